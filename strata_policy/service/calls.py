"""How the asyncio server serves a PolicyService call: every step, in one place.

The server runs on one asyncio event loop (``grpc.aio``); the engine runs on a bounded pool of
worker threads (``--workers``; the kernels release the GIL). A call goes through, in order:

1. **authenticate** (with ``--token-file``), when gRPC looks up the handler, before the request
   is read: no token or an unknown one is UNAUTHENTICATED and the bytes are never parsed;
2. **decode**, on the loop: bytes that do not parse become an ``Undecodable`` marker instead of
   gRPC's INTERNAL "Exception deserializing request!", and the call ends INVALID_ARGUMENT;
3. **ready?** while the journal is restored and the kernels warm up, UNAVAILABLE at once with a
   ``RetryInfo``, instead of blocking until start-up is done;
4. **authorize** the token for the request's cluster and method: PERMISSION_DENIED;
5. **take a slot** of ``--max-concurrent-rpcs``, or RESOURCE_EXHAUSTED naming the limit;
6. **run** the servicer method on the loop (small calls, ``INLINE``) or an engine worker; the
   slot is given back when that work ends, or when the call is cancelled while its job still
   waits for a worker (the job is then dropped).

A slot is therefore held only while a handler's work runs or waits for a worker: undecodable
bytes, requests gRPC refuses for size, calls cancelled or past their deadline before they start,
never take one, and a slot can never leak. Streams (server reflection, health Watch) and
Health/Check are served on the loop and never hold an engine worker. Every PolicyService call,
refused or not, ends in one metrics observation with its status code and one record in the log
(``service.rpc_log``: a line of its own when it did not end OK), written after the answer is sent.

What a call costs here, beyond gRPC's own work (which Health/Check pays too): without tokens
a method served on the loop is a registered one, found by gRPC's core (``REGISTERED``); the decode
wrapper, one coroutine (``call``) whose loop-served path awaits nothing, the slot, the inline
rule, one ``call_soon`` for the log record and the metrics (``metrics_rpc``: one lock). Each
method's parts are bound once when the gate is built: a call makes no closure.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_status import rpc_status

from strata_policy.engine import NotInPlace
from strata_policy.errors import (
    ServerNotReady,
    SizeLimitExceeded,
    StrataError,
    Unauthenticated,
)
from strata_policy.service.call_context import Aborted, Capture, Undecodable, tolerant
from strata_policy.service.rpc_log import RpcLog
from strata_policy.service.status import abort_with, to_status

if TYPE_CHECKING:
    from grpc import aio

    from strata_policy.service.auth import Grant, TokenTable

    Handler = grpc.RpcMethodHandler[Any, Any]
    Context = aio.ServicerContext[Any, Any]
    GenericHandler = grpc.GenericRpcHandler[Any, Any]
else:
    GenericHandler = grpc.GenericRpcHandler
Behaviour = Callable[[Any, Any], Any]
Rule = Callable[[Any], bool]

_clock = time.perf_counter
_get_loop = asyncio.get_running_loop
_OK = grpc.StatusCode.OK
_TO_WORKER: Any = object()  # ``CallGate._start``'s answer for a call a worker must serve


class RpcObserver(Protocol):
    """Receives one call per finished RPC (``service.metrics.Metrics`` implements it)."""

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        """Count one finished RPC."""


class Slots:
    """The concurrency limit: calls whose handler is running (waiting for or on a worker).

    Only the event loop's thread takes and gives slots, so a plain counter is exact.
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.in_use = 0

    def take(self) -> bool:
        """Take a slot; ``False`` when all are in use."""
        if self.in_use >= self.maximum:
            return False
        self.in_use += 1
        return True

    def give(self) -> None:
        """Give a slot back."""
        self.in_use -= 1

    @property
    def full(self) -> bool:
        """Whether a new call would be refused now."""
        return self.in_use >= self.maximum


# The fast path. Handing a call to a worker and back costs two thread wake-ups, which on a
# loaded 2-core machine was ~100 µs, a quarter of a whole Admit RPC (Admit/Health median 1.19-1.29
# via a worker vs 1.10 on the loop; 4-client Admit throughput 0.63-0.81 vs 0.89-0.94 of
# Health's). So a call whose engine work is small and cannot wait runs on the loop itself:
# the methods below with a small batch, on a cluster that has no call on a worker (so its lock
# is free: every engine call comes through here), and, with a journal, only dry runs (no disk
# write on the loop). It is the same servicer method either way, so the answer is the same.
INLINE_BATCH = 16
INLINE: dict[str, Rule] = {
    "Admit": lambda request: len(request.workloads) <= INLINE_BATCH,
    "Release": lambda request: len(request.workload_ids) <= 4 * INLINE_BATCH,
    # Pod events only (a node or scope change rebuilds O(nodes) or O(tree)); a delta the
    # in-place path cannot apply raises engine.NotInPlace there and goes to a worker.
    "UpdateSnapshot": lambda request: (
        len(request.upsert_workloads) + len(request.remove_workload_ids) <= INLINE_BATCH
        and not (
            request.upsert_nodes
            or request.remove_node_ids
            or request.upsert_scopes
            or request.remove_scope_ids
        )
    ),
}


# The methods gRPC's core matches itself (``CallGate.add_to``): those served on the loop, whose
# fixed cost is most of their cost. Not every method: grpc.aio's accept loop keeps one pending
# request per registered method and waits on all of them (``asyncio.wait``) for every call that
# arrives, so each one registered adds a little to every call, Health/Check's included.
REGISTERED = frozenset(INLINE)


def dry_runs_only(rules: Mapping[str, Rule]) -> dict[str, Rule]:
    """``rules`` restricted to dry runs (a server with a journal writes commits to disk)."""

    def dry(rule: Rule) -> Rule:
        return lambda request: bool(request.dry_run) and rule(request)

    return {name: dry(rule) for name, rule in rules.items()}


@dataclass(frozen=True, slots=True)
class Method:
    """One PolicyService method: its full path, request name and sync servicer handler."""

    path: str
    short: str
    request_name: str
    handler: Handler


class CallGate(GenericHandler):
    """Serves PolicyService's methods through the steps above (the module docstring)."""

    RETRY_AFTER_SECONDS = 1.0

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        service: ServiceDescriptor,
        executor: Executor,
        slots: Slots,
        *,
        observer: RpcObserver | None = None,
        tokens: TokenTable | None = None,
        inline: Mapping[str, Rule] | None = None,
        rpc_log: RpcLog | None = None,
    ) -> None:
        self.executor = executor
        self.rpc_log = RpcLog() if rpc_log is None else rpc_log
        self.inline = dict(INLINE if inline is None else inline)
        self._busy: dict[str, int] = {}  # cluster id → its calls on (or queued for) a worker
        self.slots = slots
        self.observer = observer
        self.tokens = tokens
        self.ready = False
        self.service_name = service.full_name
        self._methods: dict[str, Handler] = {}
        self._parts: dict[str, Method] = {}
        for name, handler in handlers.items():
            path = f"/{service.full_name}/{name}"
            method = Method(path, name, service.methods_by_name[name].input_type.name, handler)
            self._parts[path] = method
            self._methods[path] = self._serve(method, None)

    def add_to(self, server: aio.Server) -> None:
        """Serve this gate's methods on ``server`` (before it starts).

        Without tokens the ``REGISTERED`` methods are also *registered* methods: gRPC then
        matches their calls to the handler in its core, as it does Health's, instead of asking
        ``service`` in Python per call. With tokens every call must come through ``service``
        (step 1 reads the call's metadata there), so only the generic handler is added."""
        server.add_generic_rpc_handlers((self,))
        if self.tokens is None:
            prefix = len(self.service_name) + 2
            registered = {
                path[prefix:]: handler
                for path, handler in self._methods.items()
                if path[prefix:] in REGISTERED
            }
            server.add_registered_method_handlers(  # type: ignore[attr-defined]  # stubs 1.53
                self.service_name, registered
            )

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Handler | None:
        """The handler for a call, authenticated (step 1) when tokens are configured."""
        path: str = handler_call_details.method
        if self.tokens is None:
            return self._methods.get(path)
        method = self._parts.get(path)
        if method is None:
            return None
        from strata_policy.service.auth import bearer_token  # noqa: PLC0415  # only with tokens

        token = bearer_token(handler_call_details.invocation_metadata)
        if token is None:
            return self._refuse(method, Unauthenticated("missing 'authorization: Bearer <token>'"))
        grant = self.tokens.lookup(token)
        if grant is None:
            return self._refuse(method, Unauthenticated("unknown bearer token"))
        return self._serve(method, grant)

    def _serve(self, method: Method, grant: Grant | None) -> Handler:
        """The handler of ``method`` for calls made with ``grant`` (``None``: no tokens).

        Everything a call needs of its method is bound here, once: a call makes no closure and
        looks nothing up by name, and one served on the loop (``INLINE``) awaits nothing."""
        behaviour = method.handler.unary_unary
        assert behaviour is not None, "PolicyService methods are unary"
        start, on_worker, emit, short = self._start, self._on_worker, self._emit, method.short

        async def call(request: Any, context: Context) -> Any:
            started = _clock()
            code = _OK
            response = None
            try:
                response = start(method, behaviour, grant, request, context)
                if response is _TO_WORKER:
                    response = await on_worker(behaviour, request, context)
                if grant is not None:
                    from strata_policy.service.auth import visible_to  # noqa: PLC0415  # tokens

                    response = visible_to(grant, method.path, response)
                return response
            except StrataError as exc:
                status = rpc_status.to_status(to_status(exc))
                code = status.code
                await abort_with(context, status)
            except Aborted as aborted:
                code = aborted.status.code
                await abort_with(context, aborted.status)
            except asyncio.CancelledError:
                code = grpc.StatusCode.CANCELLED
                raise
            finally:
                _get_loop().call_soon(emit, short, request, response, code, _clock() - started)

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=tolerant(method.handler.request_deserializer or _raw),
            response_serializer=method.handler.response_serializer,
        )

    def _start(
        self,
        method: Method,
        behaviour: Behaviour,
        grant: Grant | None,
        request: Any,
        context: Context,
    ) -> Any:
        """Steps 2-6 for a decoded request, on the loop: the answer of a call served here, or
        ``_TO_WORKER`` with a slot taken for a worker's job; raises the ``StrataError`` a
        refusal ends with."""
        if type(request) is Undecodable:
            raise request.as_error(method.request_name)
        if not self.ready:
            raise ServerNotReady(self.RETRY_AFTER_SECONDS)
        if grant is not None:
            from strata_policy.service.auth import check_request  # noqa: PLC0415  # with tokens

            check_request(grant, method.path, request)
        if not self.slots.take():
            raise SizeLimitExceeded(
                "max_concurrent_rpcs", self.slots.in_use + 1, self.slots.maximum
            )
        small = self.inline.get(method.short)
        if (
            small is not None
            and small(request)
            and getattr(request, "cluster_id", "") not in self._busy
        ):
            try:  # the fast path: see ``INLINE``
                answer = behaviour(request, Capture.of(request, context, on_loop=True))
            except NotInPlace:
                return _TO_WORKER  # more than the loop may spend after all: a worker takes it
            except BaseException:
                self.slots.give()
                raise
            self.slots.give()
            return answer
        return _TO_WORKER

    async def _on_worker(self, behaviour: Behaviour, request: Any, context: Context) -> Any:
        """Step 6 on an engine worker, for a call holding a slot (``_start``)."""
        # On a worker, the slot and the cluster's busy mark last as long as the job, not the
        # call: a call cancelled while its job runs must not let a fast-path call on the same
        # cluster wait for that job's lock on the loop, nor free a slot while the work goes on.
        cluster_id: str = getattr(request, "cluster_id", "")
        self._busy[cluster_id] = self._busy.get(cluster_id, 0) + 1
        try:
            job = self.executor.submit(behaviour, request, Capture.of(request, context))
        except BaseException:  # the pool is shut down
            self._job_done(cluster_id)
            raise
        loop = asyncio.get_running_loop()
        job.add_done_callback(lambda _: _on_loop(loop, self._job_done, cluster_id))
        return await asyncio.wrap_future(job, loop=loop)  # cancelling it drops a queued job

    def _job_done(self, cluster_id: str) -> None:
        """A worker's job ended (or was dropped before it ran): its slot and busy mark go."""
        if self._busy[cluster_id] == 1:
            del self._busy[cluster_id]
        else:
            self._busy[cluster_id] -= 1
        self.slots.give()

    def _refuse(self, method: Method, exc: StrataError) -> Handler:
        """A handler that ends the call with ``exc`` without reading the request's bytes."""
        status = rpc_status.to_status(to_status(exc))

        async def refuse(request: Any, context: Context) -> Any:
            self._emit(method.short, None, None, status.code, 0.0)
            await abort_with(context, status)

        return grpc.unary_unary_rpc_method_handler(refuse)

    def _emit(
        self, method: str, request: Any, response: Any, code: grpc.StatusCode, seconds: float
    ) -> None:
        self.rpc_log.record(method, request, response, code, seconds)
        if self.observer is not None:  # an enum's ``name`` is a Python property: OK skips it
            self.observer.observe_rpc(method, "OK" if code is _OK else code.name, seconds)


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[str], None], arg: str) -> None:
    """Run ``fn(arg)`` on ``loop`` from any thread; nothing once the loop is closed (shutdown)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, arg)


def _raw(data: bytes) -> bytes:
    return data
