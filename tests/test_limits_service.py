"""Limits refuse with RESOURCE_EXHAUSTED and an ErrorInfo naming the limit; nothing changes."""

from __future__ import annotations

from typing import Any

import pytest

from strata_policy.service.client import Client, RpcError
from strata_policy.service.config import ServerConfig
from strata_policy.service.server import Server
from strata_policy.state.request_checks import Limits


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
