"""Cluster snapshots over gRPC: push, read back, update, delete, and every bad input rejected."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from strata_policy.service.client import Client, RpcError

GI = 1024**3


def base_snapshot() -> dict[str, Any]:
    """Two GPU nodes, a two-level tree, one placed and one admitted workload."""
    return {
        "nodes": [
            {
                "id": "node-1",
                "capacity": {"cpu": "64000", "memory": str(256 * GI), "gpu": "8000"},
                "labels": {"zone": "a"},
                "gpuModel": "A100",
            },
            {
                "id": "node-2",
                "capacity": {"cpu": "64000", "memory": str(256 * GI), "gpu": "8000"},
                "labels": {"zone": "b"},
                "gpuModel": "A100",
            },
        ],
        "scopes": [
            {"id": "org", "kind": "org", "limit": {"gpu": "16000"}},
            {"id": "team-a", "parentId": "org", "kind": "team", "guarantee": {"gpu": "8000"}},
        ],
        "workloads": [
            {
                "workload": {
                    "id": "job-1",
                    "scopeId": "team-a",
                    "request": {"cpu": "4000", "gpu": "2000"},
                    "replicas": 2,
                },
                "placements": [
                    {"nodeId": "node-1", "gpuDevices": [0, 1]},
                    {"nodeId": "node-2", "gpuDevices": [0, 1]},
                ],
                "admittedAtMs": "5",
            },
            {
                "workload": {"id": "job-2", "scopeId": "team-a", "request": {"gpu": "500"}},
                "admittedAtMs": "6",
            },
        ],
    }


def get(client: Client, cluster_id: str) -> dict[str, Any]:
    """GetCluster with the whole snapshot."""
    return client.call("GetCluster", {"clusterId": cluster_id, "includeSnapshot": True})


def test_push_and_read_back(client: Client, cluster_id: str) -> None:
    """A pushed snapshot reads back with usage rolled up the tree and generation 1."""
    pushed = client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": base_snapshot()})
    assert pushed["generation"] == "1"
    assert (pushed["nodeCount"], pushed["scopeCount"], pushed["workloadCount"]) == (2, 2, 2)
    cluster = get(client, cluster_id)
    scopes = {s["id"]: s for s in cluster["scopes"]}
    assert scopes["org"]["usage"] == {"cpu": "8000", "gpu": "4500"}
    assert scopes["team-a"]["usage"] == {"cpu": "8000", "gpu": "4500"}
    assert cluster["allocated"]["gpu"] == "4000"
    assert cluster["capacity"]["gpu"] == "16000"
    assert [w["workload"]["id"] for w in cluster["snapshot"]["workloads"]] == ["job-1", "job-2"]
    assert cluster["snapshot"]["nodes"][0]["labels"] == {"zone": "a"}


def test_push_replaces_and_counts_generations(client: Client, cluster_id: str) -> None:
    """Each committed push adds one to the generation; a dry run adds nothing."""
    snap = base_snapshot()
    client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": snap})
    dry = client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": snap, "dryRun": True})
    assert dry["generation"] == "1"
    again = client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": snap})
    assert again["generation"] == "2"


def test_expected_generation_conflict(client: Client, cluster_id: str) -> None:
    """A stale expected_generation is ABORTED with the actual generation in ErrorInfo."""
    client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": base_snapshot()})
    with pytest.raises(RpcError) as err:
        client.call(
            "PushSnapshot",
            {"clusterId": cluster_id, "snapshot": base_snapshot(), "expectedGeneration": "7"},
        )
    assert err.value.code == "ABORTED"
    assert err.value.reason == "GENERATION_MISMATCH"
    assert get(client, cluster_id)["generation"] == "1"


def test_request_id_is_idempotent(client: Client, cluster_id: str) -> None:
    """A retried push with the same request id returns the first answer and changes nothing."""
    req = {"clusterId": cluster_id, "snapshot": base_snapshot(), "requestId": "r-1"}
    first = client.call("PushSnapshot", req)
    second = client.call("PushSnapshot", req)
    assert first["generation"] == second["generation"] == "1"
    assert get(client, cluster_id)["generation"] == "1"


def test_update_snapshot_delta(client: Client, cluster_id: str) -> None:
    """UpdateSnapshot upserts a node and a scope, removes a workload, in one generation."""
    client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": base_snapshot()})
    resp = client.call(
        "UpdateSnapshot",
        {
            "clusterId": cluster_id,
            "upsertNodes": [{"id": "node-3", "capacity": {"cpu": "1000"}}],
            "upsertScopes": [{"id": "team-b", "parentId": "org"}],
            "removeWorkloadIds": ["job-2"],
            "expectedGeneration": "1",
        },
    )
    assert (resp["generation"], resp["nodeCount"], resp["scopeCount"]) == ("2", 3, 3)
    scopes = {s["id"]: s for s in get(client, cluster_id)["scopes"]}
    assert scopes["team-a"]["usage"] == {"cpu": "8000", "gpu": "4000"}


def test_delete_then_not_found(client: Client, cluster_id: str) -> None:
    """A deleted cluster is NOT_FOUND afterwards."""
    client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": base_snapshot()})
    assert client.call("DeleteCluster", {"clusterId": cluster_id})["generation"] == "1"
    with pytest.raises(RpcError) as err:
        get(client, cluster_id)
    assert (err.value.code, err.value.reason) == ("NOT_FOUND", "CLUSTER_NOT_FOUND")


def _mutate(path: str, value: Any) -> dict[str, Any]:
    snap = copy.deepcopy(base_snapshot())
    target: Any = snap
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    last = keys[-1]
    if last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value
    return snap


BAD_SNAPSHOTS = [
    pytest.param(
        _mutate("nodes.0.capacity", {"cpu": "-1"}),
        'snapshot.nodes[0].capacity["cpu"]',
        id="negative amount",
    ),
    pytest.param(
        _mutate("nodes.0.capacity", {"gpu": "1500"}),
        'snapshot.nodes[0].capacity["gpu"]',
        id="gpu not whole devices on a node",
    ),
    pytest.param(
        _mutate("nodes.0.capacity", {"cpu": str(2**63 - 1)}),
        'snapshot.nodes[0].capacity["cpu"]',
        id="overflowing amount",
    ),
    pytest.param(_mutate("nodes.1.id", "node-1"), "snapshot.nodes[1].id", id="duplicate node id"),
    pytest.param(_mutate("nodes.1.id", ""), "snapshot.nodes[1].id", id="empty node id"),
    pytest.param(
        _mutate("scopes.1.parentId", "nowhere"),
        "snapshot.scopes[1].parent_id",
        id="unknown parent",
    ),
    pytest.param(
        _mutate("scopes.0.parentId", "team-a"), "snapshot.scopes[0].parent_id", id="cycle in tree"
    ),
    pytest.param(
        _mutate("workloads.1.workload.scopeId", "ghost"),
        "snapshot.workloads[1].workload.scope_id",
        id="workload in unknown scope",
    ),
    pytest.param(
        _mutate("workloads.1.workload.request", {"gpu": "1500"}),
        'snapshot.workloads[1].workload.request["gpu"]',
        id="fractional gpu above one device",
    ),
    pytest.param(
        _mutate("workloads.0.placements.1.nodeId", "node-9"),
        "snapshot.workloads[0].placements[1].node_id",
        id="placement on unknown node",
    ),
    pytest.param(
        _mutate("workloads.0.workload.request", {"cpu": "64001", "gpu": "2000"}),
        "snapshot.workloads[0].placements[0]",
        id="placements exceed a node",
    ),
    pytest.param(
        _mutate("workloads.1.workload.id", "job-1"),
        "snapshot.workloads[1].id",
        id="duplicate workload id",
    ),
    pytest.param(
        _mutate("scopes.0.guarantee", {"gpu": "99000"}),
        'snapshot.scopes[0].guarantee["gpu"]',
        id="guarantee above own limit",
    ),
    pytest.param(
        _mutate("workloads.1.workload.replicas", -2),
        "snapshot.workloads[1].workload.replicas",
        id="negative replicas",
    ),
]


@pytest.mark.parametrize(("snapshot", "field"), BAD_SNAPSHOTS)
def test_bad_snapshot_rejected_and_nothing_changes(
    client: Client, cluster_id: str, snapshot: dict[str, Any], field: str
) -> None:
    """Each bad snapshot is INVALID_ARGUMENT naming the field, and the cluster is unchanged."""
    client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": base_snapshot()})
    before = get(client, cluster_id)
    with pytest.raises(RpcError) as err:
        client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": snapshot})
    assert err.value.code == "INVALID_ARGUMENT"
    assert err.value.reason == "INVALID_ARGUMENT"
    assert any(path.startswith(field) for path, _ in err.value.violations), err.value.violations
    assert get(client, cluster_id) == before


def test_empty_cluster_id_and_unknown_cluster(client: Client) -> None:
    """An empty cluster id is INVALID_ARGUMENT; an unknown one is NOT_FOUND for every read."""
    with pytest.raises(RpcError) as err:
        client.call("PushSnapshot", {"clusterId": "", "snapshot": {}})
    assert err.value.code == "INVALID_ARGUMENT"
    assert err.value.violations == [("cluster_id", "must not be empty")]
    for method in ("GetCluster", "DeleteCluster", "Admit", "Release"):
        with pytest.raises(RpcError) as err:
            client.call(method, {"clusterId": "no-such-cluster"})
        assert err.value.code == "NOT_FOUND", method


def test_bad_update_changes_nothing(client: Client, cluster_id: str) -> None:
    """A delta that removes a node still running replicas is rejected whole."""
    client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": base_snapshot()})
    before = get(client, cluster_id)
    with pytest.raises(RpcError) as err:
        client.call(
            "UpdateSnapshot",
            {
                "clusterId": cluster_id,
                "upsertNodes": [{"id": "node-3"}],
                "removeNodeIds": ["node-1"],
            },
        )
    assert err.value.code == "INVALID_ARGUMENT"
    assert err.value.violations[0][0] == "remove_node_ids[0]"
    assert get(client, cluster_id) == before
