"""The same snapshot and request give byte-identical answers on two servers."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import Scope, Snapshot
from strata_policy.service import convert
from strata_policy.service.config import ServerConfig
from strata_policy.service.server import Server
from strata_policy.testing import node

POLICIES = [p for p in pb.Policy.values() if p != pb.POLICY_UNSPECIFIED]


@pytest.fixture(scope="module")
def stubs() -> Iterator[list[svc_grpc.PolicyServiceStub]]:
    """Stubs of two independent servers."""
    servers = [Server(ServerConfig(address="127.0.0.1:0", workers=2)) for _ in range(2)]
    channels = []
    for s in servers:
        s.start()
        channels.append(grpc.insecure_channel(f"127.0.0.1:{s.port}"))
    yield [svc_grpc.PolicyServiceStub(c) for c in channels]  # type: ignore[no-untyped-call]
    for c, s in zip(channels, servers, strict=True):
        c.close()
        s.grpc.stop(0)


def _snapshot() -> pb.Snapshot:
    nodes = tuple(
        node(
            f"n{i:02d}",
            cpu=16 + 16 * (i % 3),
            gpus=(i % 4) * 2,
            model=("A100", "T4", "V100M32")[i % 3],
            labels={"zone": f"z{i % 3}"},
        )
        for i in range(24)
    )
    scopes = (Scope("org"), Scope("a", "org", guarantee={"gpu": 8000}), Scope("b", "org"))
    return convert.snapshot_to_proto(Snapshot(nodes, scopes))


def _workloads() -> list[pb.Workload]:
    out = []
    for i in range(40):
        out.append(
            pb.Workload(
                id=f"w{i}",
                scope_id="ab"[i % 2],
                request={"cpu": 1000 * (1 + i % 4), "gpu": (250, 500, 1000, 2000)[i % 4]},
                replicas=1 + i % 3,
                spread=pb.Spread(topology_key="zone") if i % 5 == 0 else None,
                gpu_model="A100|V100M32" if i % 7 == 0 else "",
                priority=i % 3,
            )
        )
    return out


@pytest.mark.parametrize("policy", POLICIES, ids=[pb.Policy.Name(p) for p in POLICIES])
def test_two_servers_answer_byte_identically(
    stubs: list[svc_grpc.PolicyServiceStub], policy: int
) -> None:
    """Push, Place (with FAIR order), Admit and Reclaim: the serialized answers are equal."""
    cluster = f"det-{policy}"
    answers = []
    for stub in stubs:
        stub.PushSnapshot(svc.PushSnapshotRequest(cluster_id=cluster, snapshot=_snapshot()))
        place = stub.Place(
            svc.PlaceRequest(
                cluster_id=cluster,
                workloads=_workloads(),
                policy=policy,
                order=pb.ORDER_FAIR,
                seed=11,
                now_ms=100,
            )
        )
        late = pb.Workload(id="late", scope_id="a", request={"gpu": 8000})
        admit = stub.Admit(svc.AdmitRequest(cluster_id=cluster, workloads=[late], now_ms=200))
        reclaim = stub.Reclaim(
            svc.ReclaimRequest(
                cluster_id=cluster,
                workload=pb.Workload(id="claim", scope_id="a", request={"gpu": 4000}, priority=5),
                require_placement=True,
                policy=policy,
                now_ms=300,
            )
        )
        answers.append(
            b"".join(m.SerializeToString(deterministic=True) for m in (place, admit, reclaim))
        )
    assert answers[0] == answers[1]
    assert len(answers[0]) > 100
