"""Server interceptors: one structured log line (and metrics) per RPC.

The log line carries method, cluster_id, request_id, generation (from the response), status code
and duration_ms. Interceptors wrap the method handler so they see the deserialized request and
the response, not only the method name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import grpc
import structlog

from strata_policy.errors import SizeLimitExceeded

log = structlog.get_logger("strata.rpc")
_clock = time.perf_counter
_OK = grpc.StatusCode.OK

if TYPE_CHECKING:  # grpc-stubs makes these generic; the runtime classes are not subscriptable
    ServerInterceptorBase = grpc.ServerInterceptor[Any, Any]
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
else:
    ServerInterceptorBase = grpc.ServerInterceptor


class RpcObserver(Protocol):
    """Receives one call per finished RPC (``service.metrics.Metrics`` implements it)."""

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        """Count one finished RPC."""


def wrap_unary(
    handler: grpc.RpcMethodHandler[Any, Any] | None,
    behaviour: Callable[
        [Callable[[Any, grpc.ServicerContext], Any]], Callable[[Any, grpc.ServicerContext], Any]
    ],
) -> grpc.RpcMethodHandler[Any, Any] | None:
    """A copy of a unary-unary handler whose behaviour is wrapped; other kinds pass through."""
    if handler is None or handler.unary_unary is None:
        return handler
    return grpc.unary_unary_rpc_method_handler(
        behaviour(handler.unary_unary),
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


class WrappedHandlers:
    """The wrapped handler of each method, made once and reused while the inner one is the same.

    gRPC asks every interceptor for a handler on every call, in its polling thread, before the
    call reaches a worker; building a fresh wrapper each time (a closure and a handler tuple per
    interceptor) was most of the per-call cost interceptors add to a small RPC. The cache is
    keyed by method and checked by the inner handler's identity, so an inner interceptor that
    builds per-call handlers (auth) still gets its own wrapper every time. Bounded: method names
    come from clients, and unknown ones are not cached (their handler is ``None``).
    """

    MAX_METHODS = 256

    def __init__(self, wrap: Callable[[str, Handler | None], Handler | None]) -> None:
        self._wrap = wrap
        self._cache: dict[str, tuple[Handler, Handler | None]] = {}

    def __call__(self, method: str, handler: Handler | None) -> Handler | None:
        """``handler`` wrapped for ``method``."""
        hit = self._cache.get(method)
        if hit is not None and hit[0] is handler:
            return hit[1]
        wrapped = self._wrap(method, handler)
        if handler is not None and len(self._cache) < self.MAX_METHODS:
            self._cache[method] = (handler, wrapped)
        return wrapped


class LoggingInterceptor(ServerInterceptorBase):
    """Logs every PolicyService RPC as one line; feeds the optional observer."""

    def __init__(self, observer: RpcObserver | None = None) -> None:
        self.observer = observer
        self._wrapped = WrappedHandlers(self._wrap)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        method: str = handler_call_details.method
        if not method.startswith("/strata."):
            return handler
        return self._wrapped(method, handler)

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any] | None
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        short = method.rsplit("/", 1)[-1]

        emit = self._emit

        def behaviour(
            inner: Callable[[Any, grpc.ServicerContext], Any],
        ) -> Callable[[Any, grpc.ServicerContext], Any]:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                start = _clock()
                code = _OK
                response = None
                try:
                    response = inner(request, context)
                    return response
                except Exception:
                    code = context.code() or grpc.StatusCode.UNKNOWN  # type: ignore[attr-defined]  # set by abort
                    if code is grpc.StatusCode.UNKNOWN:
                        log.exception("rpc failed", method=short)
                        code = grpc.StatusCode.INTERNAL
                    raise
                finally:
                    # The line is built and written once the call is over (gRPC runs callbacks
                    # after the answer is sent), so it costs the caller nothing.
                    done = partial(emit, short, request, response, code, _clock() - start)
                    if not context.add_callback(done):
                        done()

            return call

        return wrap_unary(handler, behaviour)

    def _emit(
        self, method: str, request: Any, response: Any, code: grpc.StatusCode, seconds: float
    ) -> None:
        log.info(
            "rpc",
            method=method,
            cluster_id=getattr(request, "cluster_id", ""),
            request_id=getattr(request, "request_id", ""),
            generation=getattr(response, "generation", None),
            code=code.name,
            duration_ms=round(seconds * 1000, 3),
        )
        if self.observer is not None:
            self.observer.observe_rpc(method, code.name, seconds)


class ConcurrencyLimitInterceptor(ServerInterceptorBase):
    """Refuses PolicyService calls beyond ``maximum`` in progress (queued or running).

    gRPC asks interceptors for the handler when a call arrives, before it waits for a worker
    thread, so the count here includes calls waiting in the queue. A refused call ends with
    RESOURCE_EXHAUSTED and an ErrorInfo naming the limit (``max_concurrent_rpcs``), unlike
    gRPC's own limit which says nothing more. Health and reflection are never refused.
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self._lock = threading.Lock()
        self.in_flight = 0
        self._wrapped = WrappedHandlers(self._wrap)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        if not handler_call_details.method.startswith("/strata."):
            return continuation(handler_call_details)
        with self._lock:
            if self.in_flight >= self.maximum:
                refused = self.in_flight + 1
                return grpc.unary_unary_rpc_method_handler(
                    lambda request, context: _refuse(context, refused, self.maximum)
                )
            self.in_flight += 1
        try:
            handler = continuation(handler_call_details)
        except BaseException:
            self._release()
            raise
        if handler is None or handler.unary_unary is None:
            self._release()
            return handler
        return self._wrapped(handler_call_details.method, handler)

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any] | None
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        lock = self._lock

        def behaviour(
            inner: Callable[[Any, grpc.ServicerContext], Any],
        ) -> Callable[[Any, grpc.ServicerContext], Any]:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                try:
                    return inner(request, context)
                finally:
                    with lock:  # _release, written out: this runs on every RPC
                        self.in_flight -= 1

            return call

        return wrap_unary(handler, behaviour)

    def _release(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _refuse(context: grpc.ServicerContext, value: int, maximum: int) -> None:
    from strata_policy.service.status import abort  # noqa: PLC0415  # status imports grpc_status

    abort(context, SizeLimitExceeded("max_concurrent_rpcs", value, maximum))
