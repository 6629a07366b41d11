"""The Kubernetes API as the controllers need it: list, watch, get, post, patch — JSON in, JSON out.

``KubeApi`` is the seam: the controllers depend on this protocol, never on a client library.
``HttpKubeApi`` implements it on the official ``kubernetes`` client's configuration and REST layer
(kubeconfig or in-cluster service account, TLS, bearer tokens, client certificates, proxies), but
speaks the list/watch protocol itself, so resourceVersion, bookmarks and ``410 Gone`` are handled
in one place we test (``reflector.py``) instead of inside a library's retry loop (the official
``Watch`` retries a 410 once at the same version, then raises).

Errors: ``ApiError`` (any non-2xx answer: ``status``, ``reason``, ``message``; ``gone`` for 410),
``WatchExpired`` (a 410 during a watch: the caller must re-list), ``StreamBroken`` (the connection
dropped or sent garbage mid-stream: the caller re-watches from its last version).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass
class ApiError(Exception):
    """A non-2xx answer from the API server (the Status object's reason and message)."""

    status: int
    reason: str = ""
    message: str = ""

    def __str__(self) -> str:
        return f"{self.status} {self.reason}: {self.message}"

    @property
    def gone(self) -> bool:
        """410: the resourceVersion asked for is older than the server keeps."""
        return self.status == 410


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (410 Gone, as an HTTP status or in the stream)."""


class StreamBroken(Exception):
    """The connection failed or dropped, or a watch sent a line that is not an event."""


class KubeApi(Protocol):
    """What the controllers ask of the API server."""

    def list(self, path: str) -> tuple[list[JSON], str]:
        """Every object at ``path`` (following ``continue``) and the list's resourceVersion."""
        ...

    def watch(self, path: str, resource_version: str, timeout_seconds: int) -> Iterator[JSON]:
        """Watch events after ``resource_version``, bookmarks asked for; ends on server timeout."""
        ...

    def request(
        self, method: str, path: str, body: object = None, content_type: str = "application/json"
    ) -> JSON:
        """One call; the decoded JSON answer, or ``ApiError``."""
        ...


def _status_error(status: int, data: bytes) -> ApiError:
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return ApiError(status, str(body.get("reason", "")), str(body.get("message", data[:200])))


def watch_event(line: bytes) -> JSON:
    """One line of a watch stream as an event; a 410 ERROR raises ``WatchExpired``."""
    try:
        event = json.loads(line)
    except ValueError:
        raise StreamBroken(f"not JSON: {line[:120]!r}") from None
    if not isinstance(event, dict) or "type" not in event:
        raise StreamBroken(f"not a watch event: {line[:120]!r}")
    if event["type"] == "ERROR":
        status = event.get("object") or {}
        if status.get("code") == 410:
            raise WatchExpired(str(status.get("message", "")))
        raise ApiError(int(status.get("code") or 500), str(status.get("reason", "")), str(status))
    return event


class HttpKubeApi:
    """``KubeApi`` over HTTP with the official client's configuration and connection pool."""

    def __init__(self, api_client: k8s.ApiClient, request_timeout: float = 30.0) -> None:
        self.api = api_client
        self.request_timeout = request_timeout
        self._open: set[urllib3.BaseHTTPResponse] = set()
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """Interrupt every open watch (their readers get ``StreamBroken``) and refuse new ones.

        Under the lock, so a reader cannot finish closing a stream between our look and our
        interrupt; a stream that ended on its own (its reader closed it or gave its connection
        back, and has not yet left ``_open``) needs no interrupt, and urllib3 refuses one
        (``ValueError``/``RuntimeError``) instead of ignoring it.
        """
        with self._lock:
            self._closed = True
            for raw in self._open:
                if isinstance(raw, urllib3.HTTPResponse):
                    with contextlib.suppress(ValueError, RuntimeError, OSError):
                        raw.shutdown()

    @classmethod
    def from_environment(cls, context: str | None = None) -> HttpKubeApi:
        """In-cluster service account when running in a pod, else ``KUBECONFIG``/``~/.kube``."""
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]  # untyped
        except k8s_config.ConfigException:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]  # untyped in the client
                context=context, client_configuration=configuration
            )
        return cls(k8s.ApiClient(configuration))

    @classmethod
    def for_host(cls, host: str) -> HttpKubeApi:
        """An unauthenticated client of ``host`` (tests: a loopback protocol fake)."""
        configuration = k8s.Configuration(host=host)
        return cls(k8s.ApiClient(configuration))

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        full = f"{path}?{urlencode(query)}" if query else path
        method, url, headers, body, post = self.api.param_serialize(
            method, full, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        try:
            response = self.api.call_api(
                method, url, headers, body, post, _request_timeout=timeout or self.request_timeout
            )
        except urllib3.exceptions.HTTPError as exc:
            raise StreamBroken(f"{method} {path}: {exc}") from None
        raw: urllib3.BaseHTTPResponse = response.response
        return raw

    def request(
        self, method: str, path: str, body: object = None, content_type: str = "application/json"
    ) -> JSON:
        """One call; ``ApiError`` unless 2xx."""
        raw = self._send(method, path, body=body, content_type=content_type)
        data = raw.read()
        raw.release_conn()
        if not 200 <= raw.status < 300:
            raise _status_error(raw.status, data)
        out = json.loads(data or b"{}")
        return out if isinstance(out, dict) else {"items": out}

    def list(self, path: str) -> tuple[list[JSON], str]:
        """Every page of a list (``limit``/``continue``), and the first page's resourceVersion."""
        items: list[JSON] = []
        query = {"limit": "500"}
        version = ""
        while True:
            raw = self._send("GET", path, query)
            data = raw.read()
            raw.release_conn()
            if raw.status != 200:
                raise _status_error(raw.status, data)
            page = json.loads(data)
            items.extend(page.get("items") or ())
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion", ""))
            if not meta.get("continue"):
                return items, version
            query = {"limit": "500", "continue": str(meta["continue"])}

    def watch(self, path: str, resource_version: str, timeout_seconds: int) -> Iterator[JSON]:
        """Events, one per line; ``WatchExpired`` on 410, ``StreamBroken`` on a dropped stream."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        if self._closed:
            raise StreamBroken("client closed")
        raw = self._send("GET", path, query, timeout=(10.0, timeout_seconds + 30.0))
        with self._lock:
            if self._closed:  # closed while we were connecting: nobody will interrupt us later
                raw.close()
                raise StreamBroken("client closed")
            self._open.add(raw)
        try:
            if raw.status == 410:
                raise WatchExpired(raw.read()[:200].decode(errors="replace"))
            if raw.status != 200:
                raise _status_error(raw.status, raw.read())
            buffer = b""
            for chunk in raw.stream(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield watch_event(line)
            if buffer.strip():
                yield watch_event(buffer)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise StreamBroken(str(exc)) from None
        finally:
            with self._lock:
                self._open.discard(raw)
            raw.close()  # a watch connection is never reused: it may be mid-stream
