"""What the server logs for each PolicyService call, at a cost the event loop can pay per call.

Every call, refused or not, is recorded here once, on the event loop, after its answer is sent
(``calls.CallGate``):

- a call that did **not** end OK: one ``rpc`` line at ``info`` with ``method``, ``cluster_id``,
  ``request_id``, ``generation`` (``None`` without an answer), ``code`` and ``duration_ms``;
- a call that ended OK: the same ``rpc`` line at ``debug`` (``--log-level debug``);
- every call: counted, and within ``SUMMARY_SECONDS`` of the first call counted, one ``rpcs``
  line at ``info`` gives the interval's calls by method and code and its slowest call (method,
  cluster, request id, milliseconds). An idle server writes none; ``flush`` (on stop) writes the
  pending one, so no call goes uncounted.

Why not one ``info`` line per call, as before: a structlog line (event dict, processors, ISO
time, JSON, a write and flush) costs 20-40 µs on these 2-core machines, as much as a
one-workload Admit's engine work and a tenth of the whole call's server CPU, all on the event
loop, which caps what 4 clients get (DESIGN §6: Admit ≥ 0.7 × Health/Check's throughput). The
errors a user must find by request id keep their line; OK calls are counted in the summary and
in ``strata_rpcs_total``, and their per-workload outcomes in ``strata_decisions_total``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import grpc
import structlog

log = structlog.get_logger("strata.rpc")
SUMMARY_SECONDS = 10.0
_OK = grpc.StatusCode.OK


@dataclass(frozen=True, slots=True)
class SlowestCall:
    """The slowest call of a summary's interval."""

    method: str
    cluster_id: str
    request_id: str
    seconds: float


class RpcLog:
    """The per-call log policy above; ``record`` and ``flush`` run on the event loop only (the
    counts are plain dicts for that reason), or in a thread once the loop has stopped.

    Make it once logging is configured (the server is built after ``cli.configure_logging``):
    whether ``debug`` lines are written is read then, so that an OK call at ``info`` does not
    even gather its line's fields."""

    def __init__(self, every: float = SUMMARY_SECONDS) -> None:
        if not every > 0:
            raise ValueError(f"the summary interval must be positive, got {every}")
        self.every = every
        enabled = getattr(log.bind(), "is_enabled_for", None)  # structlog's filtering loggers
        self.debug = enabled is None or bool(enabled(logging.DEBUG))
        self._counts: dict[tuple[str, str], int] = {}  # (method, code's name): calls
        self._slowest: SlowestCall | None = None
        self._timer: asyncio.TimerHandle | None = None

    def record(
        self, method: str, request: Any, response: Any, code: grpc.StatusCode, seconds: float
    ) -> None:
        """Count one finished call and write its line if its code and the log level say so."""
        # Keyed by the code's name: hashing an enum member is a Python call (``Enum.__hash__``),
        # and so is its ``name``, which OK, nearly every call, does not need.
        name = "OK" if code is _OK else code.name
        key = (method, name)
        self._counts[key] = self._counts.get(key, 0) + 1
        slowest = self._slowest
        if slowest is None or seconds > slowest.seconds:
            self._slowest = SlowestCall(
                method,
                _clipped(request, "cluster_id"),
                _clipped(request, "request_id"),
                seconds,
            )
        if self._timer is None:
            self._timer = _call_later(self.every, self.flush)
        if code is _OK:
            if not self.debug:
                return
            write = log.debug
        else:
            write = log.info
        write(
            "rpc",
            method=method,
            cluster_id=_clipped(request, "cluster_id"),
            request_id=_clipped(request, "request_id"),
            generation=getattr(response, "generation", None),
            code=name,
            duration_ms=round(seconds * 1000, 3),
        )

    def flush(self) -> None:
        """Write the ``rpcs`` summary of the calls counted since the last one (none: nothing)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        counts, slowest = self._counts, self._slowest
        if not counts or slowest is None:
            return
        self._counts, self._slowest = {}, None
        by_method: dict[str, dict[str, int]] = {}
        for (method, code), n in sorted(counts.items()):
            by_method.setdefault(method, {})[code] = n
        log.info(
            "rpcs",
            calls=sum(counts.values()),
            by_method=by_method,
            slowest_method=slowest.method,
            slowest_cluster_id=slowest.cluster_id,
            slowest_request_id=slowest.request_id,
            slowest_ms=round(slowest.seconds * 1000, 3),
        )


def _call_later(seconds: float, fn: Any) -> asyncio.TimerHandle | None:
    """``fn`` in ``seconds`` on the running loop; ``None`` without one (the summary then waits
    for ``flush``)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.call_later(seconds, fn)


MAX_LOGGED_ID = 256  # characters of an id a log line keeps (the engine refuses longer ones)


def _clipped(request: Any, name: str) -> str:
    """``request.name`` (``""`` when it has none), cut to ``MAX_LOGGED_ID`` characters with its
    length said: a refused call's ids are the client's, up to the message size, and one call
    must not write megabytes of log."""
    value: str = getattr(request, name, "")
    if len(value) <= MAX_LOGGED_ID:
        return value
    return f"{value[:MAX_LOGGED_ID]}… ({len(value):,} characters)"
