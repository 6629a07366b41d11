"""An enum number the server does not know is INVALID_ARGUMENT naming the field, not a default."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.service.server import Server


@pytest.fixture
def stub(server: Server) -> Iterator[svc_grpc.PolicyServiceStub]:
    """A stub on the session server."""
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield svc_grpc.PolicyServiceStub(channel)


def _workload(workload_id: str) -> pb.Workload:
    return pb.Workload(id=workload_id, scope_id="team", request={"cpu": 1000}, replicas=1)


CASES: list[Any] = [
    pytest.param(
        "Admit",
        lambda c: svc.AdmitRequest(cluster_id=c, workloads=[_workload("w")], order=77),  # type: ignore[arg-type]  # the unknown number is the point
        "order",
        id="admit: order 77",
    ),
    pytest.param(
        "Place",
        lambda c: svc.PlaceRequest(cluster_id=c, workloads=[_workload("w")], policy=99),  # type: ignore[arg-type]  # as above
        "policy",
        id="place: policy 99",
    ),
    pytest.param(
        "Place",
        lambda c: svc.PlaceRequest(cluster_id=c, workloads=[_workload("w")], order=5),  # type: ignore[arg-type]  # as above
        "order",
        id="place: order 5",
    ),
    pytest.param(
        "Place",
        lambda c: svc.PlaceRequest(
            cluster_id=c,
            workloads=[_workload("w")],
            policy=pb.POLICY_FRAGMENTATION_AWARE,
            fragmentation=pb.FragmentationOptions(score=42),  # type: ignore[arg-type]  # as above
        ),
        "fragmentation.score",
        id="place: fragmentation score 42",
    ),
    pytest.param(
        "Reclaim",
        lambda c: svc.ReclaimRequest(cluster_id=c, workload=_workload("w"), policy=99),  # type: ignore[arg-type]  # as above
        "policy",
        id="reclaim: policy 99",
    ),
]


@pytest.mark.parametrize(("method", "build", "field"), CASES)
def test_unknown_enum_number_is_refused(
    stub: svc_grpc.PolicyServiceStub,
    cluster_id: str,
    method: str,
    build: Callable[[str], Any],
    field: str,
) -> None:
    """Each call is INVALID_ARGUMENT naming the enum field, and the cluster is unchanged."""
    snapshot = pb.Snapshot(
        nodes=[pb.Node(id="n", capacity={"cpu": 4000})], scopes=[pb.Scope(id="team")]
    )
    stub.PushSnapshot(svc.PushSnapshotRequest(cluster_id=cluster_id, snapshot=snapshot))
    before = stub.GetCluster(svc.GetClusterRequest(cluster_id=cluster_id, include_snapshot=True))
    with pytest.raises(grpc.RpcError) as err:
        getattr(stub, method)(build(cluster_id))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"{field}: unknown value" in (err.value.details() or "")
    after = stub.GetCluster(svc.GetClusterRequest(cluster_id=cluster_id, include_snapshot=True))
    assert after == before
