"""Limits refuse with RESOURCE_EXHAUSTED and an ErrorInfo naming the limit; nothing changes."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from strata_policy.service.client import Client, RpcError
from strata_policy.service.config import ServerConfig
from strata_policy.service.interceptors import ConcurrencyLimitInterceptor
from strata_policy.service.server import Server
from strata_policy.state.limits import Limits


class Details:
    """Handler call details for a method."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


class Aborted(Exception):
    """What a fake context raises on abort."""


class FakeContext:
    """Captures the status an interceptor aborts with."""

    status: Any = None

    def abort_with_status(self, status: Any) -> None:
        self.status = status
        raise Aborted


def echo_handler(_: Any) -> grpc.RpcMethodHandler:  # type: ignore[type-arg]
    """A unary handler that answers "ok"."""
    return grpc.unary_unary_rpc_method_handler(lambda request, context: "ok")


def test_concurrency_limit_counts_calls_in_flight() -> None:
    """With one call in flight and a maximum of 1, the next is refused with ErrorInfo details."""
    limiter = ConcurrencyLimitInterceptor(1)
    first = _handler(limiter, ADMIT)
    second = _handler(limiter, ADMIT)
    assert _handler(limiter, "/grpc.health.v1.Health/Check").unary_unary(None, None) == "ok"
    context = FakeContext()
    with pytest.raises(Aborted):
        second.unary_unary(None, context)
    status = context.status
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    rich = status_pb2.Status.FromString(dict(status.trailing_metadata)["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert rich.details[0].Unpack(info)
    assert (info.reason, info.metadata["limit"]) == ("SIZE_LIMIT_EXCEEDED", "max_concurrent_rpcs")
    assert first.unary_unary(None, None) == "ok"
    assert limiter.in_flight == 0
    assert _handler(limiter, ADMIT).unary_unary(None, None) == "ok"


ADMIT = "/strata.policy.v1.PolicyService/Admit"


def _handler(limiter: ConcurrencyLimitInterceptor, method: str) -> Any:
    handler = limiter.intercept_service(echo_handler, Details(method))
    assert handler is not None
    return handler


@pytest.fixture(scope="module")
def small_server() -> Any:
    """A server with tiny size limits."""
    limits = Limits(max_clusters=1, max_nodes=2, max_scopes=2, max_workloads=1, max_batch=2)
    srv = Server(ServerConfig(address="127.0.0.1:0", workers=2, limits=limits))
    srv.start()
    yield srv
    srv.grpc.stop(0)


@pytest.mark.parametrize(
    ("method", "request_", "limit"),
    [
        pytest.param(
            "PushSnapshot",
            {"clusterId": "a", "snapshot": {"nodes": [{"id": "1"}, {"id": "2"}, {"id": "3"}]}},
            "max_nodes",
            id="too many nodes",
        ),
        pytest.param(
            "PushSnapshot",
            {"clusterId": "b", "snapshot": {}},
            "max_clusters",
            id="too many clusters",
        ),
        pytest.param(
            "Admit",
            {"clusterId": "a", "workloads": [{"id": str(i), "scopeId": "s"} for i in range(3)]},
            "max_batch",
            id="batch too large",
        ),
    ],
)
def test_size_limits(
    small_server: Server, method: str, request_: dict[str, Any], limit: str
) -> None:
    """Each size limit is RESOURCE_EXHAUSTED naming the limit, and the cluster is unchanged."""
    client = Client(f"127.0.0.1:{small_server.port}")
    try:
        client.call("PushSnapshot", {"clusterId": "a", "snapshot": {"scopes": [{"id": "s"}]}})
        before = client.call("GetCluster", {"clusterId": "a", "includeSnapshot": True})
        with pytest.raises(RpcError) as err:
            client.call(method, request_)
        assert (err.value.code, err.value.reason) == ("RESOURCE_EXHAUSTED", "SIZE_LIMIT_EXCEEDED")
        assert limit in err.value.message
        after = client.call("GetCluster", {"clusterId": "a", "includeSnapshot": True})
        assert after["snapshot"] == before["snapshot"]
    finally:
        client.close()
