"""The JSON codec: round trips, proto-JSON spellings, and field paths on bad input."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import types_pb2

from strata_policy.errors import InvalidArgument
from strata_policy.model import Node, Placement, RunningWorkload, Scope, Snapshot, Workload
from strata_policy.state import codec
from strata_policy.state.changes import Change, ChangeKind, Delta
from strata_policy.testing import node, resources, running, scope, snapshot, workload

ids = st.text("abcxyz-0123", min_size=1, max_size=6)
amounts = st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "rdma"]), st.integers(0, 2**62))
labels = st.dictionaries(st.sampled_from(["zone", "rack", "tier"]), st.text("ab1", max_size=3))

nodes = st.builds(
    Node, id=ids, capacity=amounts, labels=labels, unschedulable=st.booleans(),
    gpu_model=st.sampled_from(["", "A100", "V100M16|V100M32"]),
)  # fmt: skip
scopes = st.builds(
    Scope, id=ids, parent_id=st.sampled_from(["", "org"]), kind=st.sampled_from(["", "team"]),
    guarantee=amounts, limit=amounts, weight=st.floats(0.1, 10.0),
)  # fmt: skip
workloads = st.builds(
    Workload, id=ids, scope_id=ids, request=amounts, replicas=st.integers(1, 8),
    priority=st.integers(-(2**31), 2**31 - 1), preemptible=st.booleans(), node_selector=labels,
    gpu_model=st.sampled_from(["", "A100"]),
    spread_key=st.sampled_from(["", "kubernetes.io/hostname", "zone"]),
    queued_at_ms=st.integers(0, 2**40),
)  # fmt: skip
placements = st.builds(
    Placement, node_id=ids, gpu_devices=st.lists(st.integers(0, 7), max_size=3).map(tuple)
)
runnings = st.builds(
    RunningWorkload, workload=workloads, placements=st.lists(placements, max_size=3).map(tuple),
    admitted_at_ms=st.integers(0, 2**40),
)  # fmt: skip
snapshots = st.builds(
    Snapshot,
    nodes=st.lists(nodes, max_size=4).map(tuple),
    scopes=st.lists(scopes, max_size=4).map(tuple),
    workloads=st.lists(runnings, max_size=4).map(tuple),
)
deltas = st.builds(
    Delta,
    upsert_nodes=st.lists(nodes, max_size=2).map(tuple),
    remove_node_ids=st.lists(ids, max_size=2).map(tuple),
    upsert_scopes=st.lists(scopes, max_size=2).map(tuple),
    remove_scope_ids=st.lists(ids, max_size=2).map(tuple),
    upsert_workloads=st.lists(runnings, max_size=2).map(tuple),
    remove_workload_ids=st.lists(ids, max_size=2).map(tuple),
)


@settings(max_examples=150)
@given(snapshots)
def test_snapshot_round_trip(snap: Snapshot) -> None:
    """Encoding then decoding a snapshot gives it back exactly."""
    assert codec.snapshot_from_dict(codec.snapshot_to_dict(snap)) == snap


@settings(max_examples=100)
@given(st.integers(1, 2**40), deltas, snapshots)
def test_change_round_trip(generation: int, delta: Delta, snap: Snapshot) -> None:
    """Changes of every kind survive encoding and decoding."""
    for change in (
        Change("c", generation, ChangeKind.DELTA, delta=delta),
        Change("c", generation, ChangeKind.PUSH, snapshot=snap),
        Change("c", generation, ChangeKind.DELETE),
    ):
        assert codec.change_from_dict(codec.change_to_dict(change)) == change


@settings(max_examples=100)
@given(snapshots)
def test_output_parses_as_proto_json(snap: Snapshot) -> None:
    """What the codec writes is valid proto3 JSON for ``strata.policy.v1.Snapshot``."""
    message = json_format.ParseDict(codec.snapshot_to_dict(snap), types_pb2.Snapshot())
    again = json_format.MessageToDict(message)
    assert codec.snapshot_from_dict(again) == snap


GPU_WL = workload("job-1", "team-a", cpu=4, gpu_milli=8000, replicas=2, spread_key="zone")
EXPECTED = snapshot(
    [node("n1", gpus=8, model="A100", labels={"zone": "a"})],
    [scope("org"), scope("team-a", parent="org", limit=resources(gpu_milli=16000), kind="team")],
    [running(GPU_WL, ("n1", tuple(range(8))), "n1", admitted_at_ms=5)],
)
N1_CAMEL = {"id": "n1", "capacity": {"cpu": "64000", "memory": str(256 * 1024**3),
            "gpu": "8000"}, "labels": {"zone": "a"}, "gpuModel": "A100"}  # fmt: skip
N1_SNAKE = {"id": "n1", "capacity": {"cpu": 64000, "memory": 256 * 1024**3, "gpu": 8000},
            "labels": {"zone": "a"}, "gpu_model": "A100"}  # fmt: skip
TEAM_CAMEL = {"id": "team-a", "parentId": "org", "kind": "team", "limit": {"gpu": "16000"}}
TEAM_SNAKE = {"id": "team-a", "parent_id": "org", "kind": "team", "limit": {"gpu": 16000}}
WL_CAMEL = {"id": "job-1", "scopeId": "team-a", "request": {"cpu": "4000", "gpu": "8000"},
            "replicas": 2, "spread": {"topologyKey": "zone"}}  # fmt: skip
WL_SNAKE = {"id": "job-1", "scope_id": "team-a", "request": {"cpu": 4000, "gpu": 8000},
            "replicas": 2, "spread": {"topology_key": "zone"}}  # fmt: skip


def _doc(n: dict[str, Any], team: dict[str, Any], wl: dict[str, Any], style: str) -> dict[str, Any]:
    node_key, dev_key, at_key = (
        ("nodeId", "gpuDevices", "admittedAtMs")
        if style == "camel"
        else ("node_id", "gpu_devices", "admitted_at_ms")
    )
    return {
        "nodes": [n],
        "scopes": [{"id": "org", "weight": 1}, team],
        "workloads": [
            {
                "workload": wl,
                "placements": [{node_key: "n1", dev_key: list(range(8))}, {node_key: "n1"}],
                at_key: "5",
            }
        ],
    }


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(_doc(N1_CAMEL, TEAM_CAMEL, WL_CAMEL, "camel"), id="proto JSON camelCase"),
        pytest.param(_doc(N1_SNAKE, TEAM_SNAKE, WL_SNAKE, "snake"), id="snake_case"),
        pytest.param(_doc(N1_CAMEL, TEAM_SNAKE, WL_CAMEL, "snake"), id="mixed spellings"),
    ],
)
def test_accepts_both_spellings(doc: dict[str, Any]) -> None:
    """camelCase and snake_case field names, numbers and int64 strings all decode the same."""
    assert codec.snapshot_from_dict(doc) == EXPECTED


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param([], "snapshot", id="snapshot not an object"),
        pytest.param({"nodes": {}}, "snapshot.nodes", id="nodes not a list"),
        pytest.param({"nodes": [{"id": 3}]}, "snapshot.nodes[0].id", id="id not a string"),
        pytest.param(
            {"nodes": [{"id": "n", "capacity": {"cpu": "lots"}}]},
            'snapshot.nodes[0].capacity["cpu"]',
            id="amount not an integer",
        ),
        pytest.param(
            {"nodes": [{"id": "n", "capacity": {"cpu": 1.5}}]},
            'snapshot.nodes[0].capacity["cpu"]',
            id="amount with a fraction",
        ),
        pytest.param(
            {"scopes": [{"id": "s", "weight": "heavy"}]},
            "snapshot.scopes[0].weight",
            id="weight not a number",
        ),
        pytest.param(
            {"workloads": [{"placements": []}]},
            "snapshot.workloads[0].workload",
            id="running workload without its workload",
        ),
        pytest.param(
            {"workloads": [{"workload": {"id": "w", "preemptible": "no"}}]},
            "snapshot.workloads[0].workload.preemptible",
            id="preemptible not a boolean",
        ),
        pytest.param(
            {"workloads": [{"workload": {"id": "w"}, "placements": [{"gpuDevices": "0"}]}]},
            "snapshot.workloads[0].placements[0].gpu_devices",
            id="devices not a list",
        ),
    ],
)
def test_bad_input_names_the_field(doc: object, field: str) -> None:
    """A wrongly typed field is an InvalidArgument whose violation names that field."""
    with pytest.raises(InvalidArgument) as caught:
        codec.snapshot_from_dict(doc)
    assert field in [v.field for v in caught.value.violations]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param({"id": "w", "scopeId": "s"}, True, id="absent means preemptible"),
        pytest.param({"id": "w", "scopeId": "s", "preemptible": False}, False, id="explicit no"),
        pytest.param({"id": "w", "scopeId": "s", "preemptible": True}, True, id="explicit yes"),
    ],
)
def test_preemptible_defaults_to_true(doc: dict[str, Any], expected: bool) -> None:
    """``preemptible`` is proto3 optional: absent means true."""
    assert codec.workload_from_dict(doc).preemptible is expected


def test_unset_proto_defaults_become_model_defaults() -> None:
    """Replicas 0 and weight 0 (proto3 "unset") read as the model defaults 1 and 1.0."""
    assert codec.workload_from_dict({"id": "w", "scopeId": "s", "replicas": 0}).replicas == 1
    assert codec.scope_from_dict({"id": "s", "weight": 0}).weight == 1.0
