"""Size limits and id lengths are checked from the request's counts before any conversion.

A request too big for the limits is refused without building one domain value from it (the
conversion functions are replaced by ones that fail the test), and nothing changes.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_context import Aborted, Context
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.engine import Engine
from strata_policy.service import convert
from strata_policy.service.place_request_decoder import decode_place
from strata_policy.service.servicer import PolicyServicer
from strata_policy.service.snapshot_decoder import decode_push
from strata_policy.state.request_checks import Limits
from strata_policy.testing import node, scope, snapshot

LIMITS = Limits(max_nodes=5, max_scopes=5, max_workloads=5, max_batch=3)


def _refuse(*args: object, **kwargs: object) -> Any:
    raise AssertionError("converted a request that its counts already refuse")


def scopes(n: int) -> list[pb.Scope]:
    """``n`` scope messages."""
    return [pb.Scope(id=f"s{i}") for i in range(n)]


def workloads(n: int) -> list[pb.Workload]:
    """``n`` workload messages."""
    return [pb.Workload(id=f"w{i}", scope_id="a") for i in range(n)]


CASES = [
    pytest.param(
        "PushSnapshot",
        svc.PushSnapshotRequest(cluster_id="c", snapshot=pb.Snapshot(scopes=scopes(6))),
        "max_scopes",
        id="push: too many scopes",
    ),
    pytest.param(
        "PushSnapshot",
        svc.PushSnapshotRequest(
            cluster_id="c", snapshot=pb.Snapshot(nodes=[pb.Node(id=f"n{i}") for i in range(6)])
        ),
        "max_nodes",
        id="push: too many nodes",
    ),
    pytest.param(
        "UpdateSnapshot",
        svc.UpdateSnapshotRequest(cluster_id="c", upsert_scopes=scopes(6)),
        "max_scopes",
        id="update: too many upserted scopes",
    ),
    pytest.param(
        "UpdateSnapshot",
        svc.UpdateSnapshotRequest(cluster_id="c", remove_workload_ids=[str(i) for i in range(6)]),
        "max_workloads",
        id="update: too many removals",
    ),
    pytest.param(
        "Admit", svc.AdmitRequest(cluster_id="c", workloads=workloads(4)), "max_batch", id="admit"
    ),
    pytest.param(
        "Place",
        svc.PlaceRequest(cluster_id="c", workloads=workloads(2), workload_ids=["x", "y"]),
        "max_batch",
        id="place: inline and by id together",
    ),
    pytest.param(
        "Release",
        svc.ReleaseRequest(cluster_id="c", workload_ids=[str(i) for i in range(4)]),
        "max_batch",
        id="release",
    ),
    pytest.param(
        "PushSnapshot",
        svc.PushSnapshotRequest(cluster_id="c" * 254, snapshot=pb.Snapshot(scopes=scopes(1))),
        "cluster_id",
        id="push: a cluster id too long",
    ),
    pytest.param(
        "Admit",
        svc.AdmitRequest(cluster_id="c", request_id="r" * 129, workloads=workloads(1)),
        "request_id",
        id="admit: a request id too long",
    ),
    pytest.param(
        "Reclaim",
        svc.ReclaimRequest(cluster_id="c" * 254, workload=workloads(1)[0]),
        "cluster_id",
        id="reclaim: a cluster id too long",
    ),
]


@pytest.mark.parametrize(("method", "request_", "names"), CASES)
def test_refused_before_conversion(
    monkeypatch: pytest.MonkeyPatch, method: str, request_: Any, names: str
) -> None:
    """RESOURCE_EXHAUSTED naming the limit, or INVALID_ARGUMENT naming the id, with no
    conversion run and the cluster unchanged."""
    engine = Engine(limits=LIMITS)
    engine.push_snapshot("c", snapshot([node("n1")], [scope("a")]))
    before = engine.snapshot("c")
    if method == "Place":  # its handler takes the request as its deserializer reads it
        request_ = decode_place(request_.SerializeToString())
    if method == "PushSnapshot":  # the same
        request_ = decode_push(request_.SerializeToString())
    for name in (
        "snapshot_from_proto",
        "snapshot_from_push",
        "delta_from_proto",
        "workloads_from_proto",
        "workload_from_proto",
    ):
        monkeypatch.setattr(convert, name, _refuse)
    context = Context()
    with pytest.raises(Aborted):
        getattr(PolicyServicer(engine), method)(request_, context)
    status = context.status  # a grpc.Status: code, details (the message), trailing metadata
    assert status.code.name in {"RESOURCE_EXHAUSTED", "INVALID_ARGUMENT"}
    assert names in status.details
    assert engine.snapshot("c") == before


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda i: pb.Workload(id=f"w{i}", scope_id="a"), id="one tail (read in runs)"),
        pytest.param(
            lambda i: pb.Workload(id=f"w{i}", scope_id="a", request={"cpu": 100 + i}),
            id="distinct tails (read one by one)",
        ),
    ],
)
def test_a_place_too_big_is_counted_not_converted(
    monkeypatch: pytest.MonkeyPatch, make: Any
) -> None:
    """The Place wire reader stops converting past the batch limit: the handler refuses the
    batch as RESOURCE_EXHAUSTED from the count, having built at most limit + 1 workloads."""
    built = 0
    convert_one = convert.workload_from_proto

    def counting(m: pb.Workload) -> Any:
        nonlocal built
        built += 1
        return convert_one(m)

    monkeypatch.setattr(convert, "workload_from_proto", counting)
    monkeypatch.setattr(convert, "workloads_from_proto", _refuse)
    raw = svc.PlaceRequest(
        cluster_id="c", workloads=[make(i) for i in range(50)]
    ).SerializeToString()
    decoded = decode_place(raw, max_workloads=LIMITS.max_batch)
    assert decoded.workload_count == 50
    assert list(decoded.workloads) == []
    assert built <= LIMITS.max_batch + 1
    engine = Engine(limits=LIMITS)
    engine.push_snapshot("c", snapshot([node("n1")], [scope("a")]))
    context = Context()
    with pytest.raises(Aborted):
        PolicyServicer(engine).Place(decoded, context)
    assert context.status.code.name == "RESOURCE_EXHAUSTED"
    assert "max_batch is 50" in context.status.details


def test_a_place_within_the_limit_reads_as_before() -> None:
    """At the limit, the wire reader converts every workload, as without one."""
    raw = svc.PlaceRequest(
        cluster_id="c", workloads=[pb.Workload(id=f"w{i}", scope_id="a") for i in range(3)]
    ).SerializeToString()
    assert decode_place(raw, max_workloads=3) == decode_place(raw)
    assert decode_place(raw, max_workloads=3).workload_count == 3
