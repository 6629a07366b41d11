"""The ``/metrics`` HTTP listener, optionally behind the token file's bearer tokens.

The scrape lists every tenant's clusters, scopes and usage, so it is guarded like the gRPC API
when the server has a token file (``--metrics-auth auto``, the default, or ``token``): Prometheus
sends ``Authorization: Bearer <token>`` (its ``authorization.credentials_file``), and the token
must be in the token file with ``clusters: ["*"]`` — a scrape shows all clusters, so a token
limited to some of them is refused (403), and a missing or unknown token gets 401 with
``WWW-Authenticate: Bearer``. Access level does not matter (a read-only token is the usual
choice). ``--metrics-auth none`` serves the endpoint open: do that only on an address that is
internal to the pod network and fenced by a NetworkPolicy (docs/operations.md).

Tokens are looked up by SHA-256 digest through the same ``TokenTable`` as the gRPC interceptor,
so the file is parsed once and a token is never compared character by character.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from strata_policy.service.auth import WILDCARD, TokenFileError, TokenTable, bearer_token

METRICS_AUTH = ("auto", "token", "none")
StartResponse = Callable[..., Any]
Environ = dict[str, Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]


def split_address(address: str) -> tuple[str, int]:
    """``host:port``, ``:port`` or ``[v6]:port`` → (host, port); an empty host means all."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"metrics address must be host:port, got {address!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def metrics_tokens(mode: str, token_file: str) -> TokenTable | None:
    """The tokens that guard ``/metrics`` for ``--metrics-auth mode``, or ``None`` (open).

    ``auto``: the token file's when there is one; ``token``: the token file's, and a token file
    is required (``ValueError`` otherwise: asking for auth without tokens is a mistake, not a
    reason to serve the endpoint open); ``none``: open.
    """
    if mode not in METRICS_AUTH:
        raise ValueError(f"--metrics-auth must be one of {', '.join(METRICS_AUTH)}, got {mode!r}")
    if mode == "none" or (mode == "auto" and not token_file):
        return None
    if not token_file:
        raise TokenFileError("--metrics-auth token needs --token-file (its tokens guard /metrics)")
    return TokenTable.from_file(token_file)


def guarded(app: WsgiApp, tokens: TokenTable) -> WsgiApp:
    """``app`` answering only requests that carry a token granted every cluster."""

    def refuse(start: StartResponse, status: str, text: str) -> list[bytes]:
        body = (text + "\n").encode()
        headers = [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
        ]
        if status.startswith("401"):
            headers.append(("WWW-Authenticate", 'Bearer realm="strata-metrics"'))
        start(status, headers)
        return [body]

    def checked(environ: Environ, start: StartResponse) -> Iterable[bytes]:
        header = environ.get("HTTP_AUTHORIZATION", "")
        token = bearer_token([("authorization", header)]) if header else None
        grant = tokens.lookup(token) if token is not None else None
        if grant is None:
            what = "missing bearer token" if token is None else "unknown bearer token"
            return refuse(start, "401 Unauthorized", what)
        if WILDCARD not in grant.clusters:
            return refuse(
                start, "403 Forbidden", f"token {grant.name!r} is not granted every cluster ('*')"
            )
        return app(environ, start)

    return checked


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr (one line per scrape would drown the server's JSON logs)."""

    def log_message(self, format: str, *args: Any) -> None:  # the base's name
        """Drop the line."""


class MetricsListener:
    """``/metrics`` of ``registry`` on ``address``, served from a daemon thread."""

    def __init__(
        self, address: str, registry: CollectorRegistry, tokens: TokenTable | None = None
    ) -> None:
        host, port = split_address(address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})
        app: WsgiApp = make_wsgi_app(registry)
        if tokens is not None:
            app = guarded(app, tokens)
        try:
            self.server: WSGIServer = make_server(
                host, port, app, server_class, handler_class=_QuietHandler
            )
        except OSError as exc:
            raise OSError(f"cannot listen for metrics on {address}: {exc.strerror}") from exc
        self.port: int = self.server.server_port
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="metrics-http", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
