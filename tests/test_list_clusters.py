"""ListClusters: every cluster by id with its generation and counts, cut to what a token reads."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from gate_server import serve_gate_at
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc

from strata_policy.engine import Engine
from strata_policy.service.auth import TokenTable
from strata_policy.service.calls import CallGate, Slots
from strata_policy.service.client import Client
from strata_policy.service.servicer import SERVICE, PolicyServicer, method_handlers
from strata_policy.testing import node, scope, snapshot

OPS, TEAM_A, VIEWER = "ops-token-0001", "team-a-token-01", "viewer-token-01"
TOKENS = {
    "tokens": [
        {"name": "ops", "token": OPS, "clusters": ["*"], "access": "read-write"},
        {"name": "team-a", "token": TEAM_A, "clusters": ["a"], "access": "read-write"},
        {"name": "viewer", "token": VIEWER, "clusters": ["b", "z"], "access": "read-only"},
    ]
}


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    """A token-checking server over an engine holding clusters c, a and b (pushed in that order)."""
    engine = Engine(clock=lambda: 1_000)
    engine.push_snapshot("c", snapshot([node("n1", gpus=8)], [scope("s")]))
    engine.push_snapshot("a", snapshot([node("n1"), node("n2")], [scope("s"), scope("t")]))
    engine.push_snapshot("b", snapshot([node("n1")], []))
    engine.push_snapshot("b", snapshot([node("n1")], [scope("s")]))
    gate = CallGate(
        method_handlers(PolicyServicer(engine)),
        SERVICE,
        futures.ThreadPoolExecutor(max_workers=2),
        Slots(16),
        tokens=TokenTable.from_dict(TOKENS),
    )
    with serve_gate_at(gate) as address:
        yield address


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        pytest.param(OPS, ["a", "b", "c"], id="wildcard sees all, by id"),
        pytest.param(TEAM_A, ["a"], id="one cluster"),
        pytest.param(VIEWER, ["b"], id="read-only sees its own; unknown grants list nothing"),
    ],
)
def test_a_token_sees_what_it_may_read(address: str, token: str, expected: list[str]) -> None:
    """The listing is cut to the token's clusters, so no token learns another tenant's ids."""
    client = Client(address, token=token, timeout=30)
    try:
        response = client.call("ListClusters", {})
    finally:
        client.close()
    assert [c["clusterId"] for c in response["clusters"]] == expected


def test_summary_fields(address: str) -> None:
    """Each summary carries the generation and the node, scope and workload counts."""
    stub = svc_grpc.PolicyServiceStub(grpc.insecure_channel(address))
    reply = stub.ListClusters(
        svc.ListClustersRequest(), metadata=(("authorization", f"Bearer {OPS}"),), timeout=30
    )
    assert [
        (c.cluster_id, c.generation, c.node_count, c.scope_count, c.workload_count)
        for c in reply.clusters
    ] == [("a", 1, 2, 2, 0), ("b", 2, 1, 1, 0), ("c", 1, 1, 1, 0)]


def test_no_token_is_refused(address: str) -> None:
    """Listing needs a token like every other call."""
    stub = svc_grpc.PolicyServiceStub(grpc.insecure_channel(address))
    with pytest.raises(grpc.RpcError) as caught:
        stub.ListClusters(svc.ListClustersRequest(), timeout=30)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
