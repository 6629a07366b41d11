"""What every ctl command shares: the connection, the cluster, the output format and the errors.

Conventions, the same for every command (as kubectl's):

- The cluster is always ``-c/--cluster NAME``, defaulting to ``$STRATA_CLUSTER``, never a
  positional argument: positionals are what the verb acts on (a file, a scope, workload ids),
  and one variable set once per shell session serves every command, as a kube context does.
- ``-o/--output table|wide|json|yaml`` and ``-c`` are accepted before or after the subcommand.
- Exit codes: 0 done, 1 an error (the server said no to the call, a bad file, no server), 2 a
  usage error (unknown flag, missing argument). ``--fail-on-deny`` makes a "no" answer 1 too.
- Every error is one line on stderr, ``error: ...``, naming the file, line and field when there is
  one; never a traceback.
"""

from __future__ import annotations

import itertools
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import click
import yaml

from strata_policy.ctl.request_files import Decoded, FileError
from strata_policy.service.client import Client, RpcError

OUTPUTS = ("table", "wide", "json", "yaml")
WAIT_FOR_SERVING_S = 180.0  # the first start compiles the kernels: about a minute on two cores


class CtlError(click.ClickException):
    """A failed command: printed as one ``error: ...`` line, exit code 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        """One line (or one per field violation), ``error: ...``, on stderr."""
        click.echo(f"error: {self.format_message()}", err=True)


@dataclass
class Session:
    """The ``ctl`` group's options, overridden by those given after the subcommand."""

    address: str
    token: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    output: str = "table"
    cluster: str = ""
    cluster_from: str = "-c"  # where ``cluster`` came from, for messages: -c or $STRATA_CLUSTER
    _client: Client | None = field(default=None, repr=False)

    def override(self, output: str | None, cluster: str | None) -> None:
        """Options given after the subcommand win over those before it."""
        if output:
            self.output = output
        if cluster:
            self.cluster, self.cluster_from = cluster, "-c"

    def require_cluster(self, from_file: str = "") -> str:
        """The cluster to act on: ``-c``, ``$STRATA_CLUSTER`` or the request file's ``clusterId``.

        A file naming another cluster than ``-c`` is refused, as kubectl refuses a namespace
        mismatch, so a file written for one cluster is never sent to another by accident.
        """
        if self.cluster and from_file and from_file != self.cluster:
            raise CtlError(
                f"the file is for cluster {from_file!r} but {self.cluster_from} names "
                f"{self.cluster!r}; drop one of them"
            )
        cluster = self.cluster or from_file
        if not cluster:
            raise click.UsageError("name the cluster: -c/--cluster NAME (or set STRATA_CLUSTER)")
        return cluster

    def client(self) -> Client:
        """A client of the server (opened once per command)."""
        if self._client is None:
            credentials = None
            if self.tls_ca:
                from strata_policy.service.tls import (  # noqa: PLC0415  # only with TLS
                    TlsConfigError,
                    channel_credentials,
                )

                try:
                    credentials = channel_credentials(
                        self.tls_ca, self.tls_cert or None, self.tls_key or None
                    )
                except (TlsConfigError, OSError) as exc:
                    raise CtlError(f"TLS: {exc}") from None
            self._client = Client(self.address, token=self.token, credentials=credentials)
        return self._client

    def close(self) -> None:
        """Close the channel, if one was opened."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def call(
        self, method: str, request: Mapping[str, Any], decoded: Decoded | None = None
    ) -> dict[str, Any]:
        """One RPC; a failure becomes a ``CtlError`` (field violations mapped to file lines).

        A server still compiling its kernels answers UNAVAILABLE while its health says
        NOT_SERVING: then wait for SERVING (a spinner on a terminal) and send the call once
        more. Only then: a server that was SERVING all along did not refuse for warm-up, and
        sending a decision twice on a guess is not ctl's to do.
        """
        for attempt in range(2):
            try:
                return self.client().call(method, request)
            except RpcError as exc:
                if attempt == 0 and exc.code == "UNAVAILABLE" and self._wait_for_serving():
                    continue
                raise CtlError(self._describe(exc, decoded)) from None
            except ValueError as exc:  # json_format refused it; files are checked before
                raise CtlError(f"bad request: {exc}") from None
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _wait_for_serving(self) -> bool:
        """Whether the server was warming up and is now SERVING (False: it is not there at all,
        was SERVING already, or did not come to SERVING within ``WAIT_FOR_SERVING_S``)."""
        client = self.client()
        warming = False
        spinner = itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
        show = sys.stderr.isatty()
        deadline = time.monotonic() + WAIT_FOR_SERVING_S
        try:
            while time.monotonic() < deadline:
                try:
                    status = client.health(timeout=5.0)
                except RpcError:  # not there at all: report the original error
                    return False
                if status == "SERVING":
                    return warming
                warming = True
                if show:
                    sys.stderr.write(f"\r{next(spinner)} waiting for the server to warm up…")
                    sys.stderr.flush()
                time.sleep(0.5)
            return False
        finally:
            if show:
                sys.stderr.write("\r\033[K")

    def _describe(self, exc: RpcError, decoded: Decoded | None) -> str:
        if exc.code == "UNAVAILABLE":
            hint = "start it with `make serve`, or pass --address / set STRATA_ADDRESS"
            if any(s in exc.message.lower() for s in ("socket closed", "handshake", "ssl")):
                hint = (  # a TLS server refusing plaintext, or mutual TLS without a cert
                    "if it uses TLS, pass --tls-ca (and --tls-cert/--tls-key for mutual TLS); "
                    + hint
                )
            return f"cannot reach the server at {self.address} ({exc.message}); {hint}"
        if not exc.violations:
            return f"{exc.code}: {exc.message}"
        lines = []
        for path, what in exc.violations:
            line = _line_of(decoded, path)
            where = f"{decoded.path}:{line}: " if decoded is not None and line else ""
            lines.append(f"{where}{path}: {what} ({exc.code})")
        if exc.violations_left_out:
            lines.append(
                f"... and {exc.violations_left_out} more ({exc.code}; the server sends the first "
                f"{len(exc.violations)})"
            )
        return "\nerror: ".join(lines)

    def show(self, response: Mapping[str, Any], table: Callable[[], str]) -> None:
        """Print the response: raw for json/yaml, else the human table."""
        if self.output == "json":
            import json  # noqa: PLC0415  # only here

            click.echo(json.dumps(response, indent=2))
        elif self.output == "yaml":
            click.echo(yaml.safe_dump(dict(response), sort_keys=False).rstrip("\n"))
        else:
            click.echo(table())

    @property
    def wide(self) -> bool:
        """``-o wide``: more columns."""
        return self.output == "wide"


def _line_of(decoded: Decoded | None, path: str) -> int:
    """The line of a server's field path in the file, or of its nearest parent that is there.

    The server names fields in snake_case (``workloads[0].scope_id``, map keys as ``[gpu]`` or
    ``.gpu``), the file in whatever style it was written: compare without case and ``_``.
    """
    if decoded is None:
        return 0
    lines = {_norm(k): v for k, v in decoded.lines.items()}
    path = _norm(re.sub(r"\[\"?([^\]0-9\"][^\]\"]*)\"?\]", r".\1", path))
    while path:
        if path in lines:
            return lines[path]
        path = path.rpartition(".")[0]
    return 0


def _norm(path: str) -> str:
    return path.lower().replace("_", "")


def pass_session(fn: Callable[..., int | None]) -> Callable[..., None]:
    """Wrap a command: take ``-o``/``-c`` given after it, run it, close the channel, exit."""

    @click.option(
        "-o", "--output", type=click.Choice(OUTPUTS), default=None, help="table, wide, json or yaml"
    )
    @click.option("-c", "--cluster", default=None, help="the cluster (default: $STRATA_CLUSTER)")
    @click.pass_context
    def command(
        ctx: click.Context, /, output: str | None, cluster: str | None, **kwargs: Any
    ) -> None:
        session = ctx.find_object(Session)
        assert session is not None, "ctl's group makes the session"
        session.override(output, cluster)
        try:
            code = fn(session, **kwargs)
        except FileError as exc:
            raise CtlError(str(exc)) from None
        finally:
            session.close()
        if code:
            ctx.exit(code)

    command.__name__ = fn.__name__
    command.__doc__ = fn.__doc__
    return command
