"""The interceptors' per-method handler cache: reused while the inner handler is the same."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from strata_policy.service.interceptors import (
    ConcurrencyLimitInterceptor,
    LoggingInterceptor,
    WrappedHandlers,
)

ADMIT = "/strata.policy.v1.PolicyService/Admit"


class Details:
    """A HandlerCallDetails with a method name only."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


class Context:
    """The part of a ServicerContext the logging interceptor uses."""

    def add_callback(self, callback: Any) -> bool:
        callback()
        return True


INNER = grpc.unary_unary_rpc_method_handler(lambda request, context: "ok")


@pytest.mark.parametrize(
    "interceptor",
    [
        pytest.param(LoggingInterceptor(), id="logging"),
        pytest.param(ConcurrencyLimitInterceptor(4), id="concurrency limit"),
    ],
)
def test_wrapped_handler_is_built_once_per_method(interceptor: Any) -> None:
    """Two calls of one method get the same wrapper, which still runs the inner handler."""
    first = interceptor.intercept_service(lambda d: INNER, Details(ADMIT))
    second = interceptor.intercept_service(lambda d: INNER, Details(ADMIT))
    assert first is second
    assert first is not INNER
    assert second.unary_unary(None, Context()) == "ok"


def test_new_inner_handler_gets_a_new_wrapper() -> None:
    """An inner handler built per call (as auth does) is wrapped afresh, never confused."""
    built: list[str] = []

    def wrap(method: str, handler: Any) -> Any:
        built.append(method)
        return ("wrapped", handler)

    cache = WrappedHandlers(wrap)
    a = grpc.unary_unary_rpc_method_handler(lambda request, context: "a")
    b = grpc.unary_unary_rpc_method_handler(lambda request, context: "b")
    assert cache(ADMIT, a) == ("wrapped", a)
    assert cache(ADMIT, a) == ("wrapped", a)
    assert cache(ADMIT, b) == ("wrapped", b)
    assert cache("/strata.x/Unknown", None) == ("wrapped", None)
    assert cache("/strata.x/Unknown", None) == ("wrapped", None)
    assert built == [ADMIT, ADMIT, "/strata.x/Unknown", "/strata.x/Unknown"]


def test_cache_is_bounded() -> None:
    """Method names come from clients: no more than MAX_METHODS are kept."""
    cache = WrappedHandlers(lambda method, handler: handler)
    for i in range(WrappedHandlers.MAX_METHODS + 50):
        cache(f"/strata.x/M{i}", INNER)
    assert len(cache._cache) == WrappedHandlers.MAX_METHODS


def test_concurrency_count_returns_to_zero_with_cached_wrapper() -> None:
    """Each call through the cached wrapper releases the slot its interception took."""
    limiter = ConcurrencyLimitInterceptor(2)
    for _ in range(5):
        handler = limiter.intercept_service(lambda d: INNER, Details(ADMIT))
        assert limiter.in_flight == 1
        assert handler.unary_unary(None, Context()) == "ok"
        assert limiter.in_flight == 0
