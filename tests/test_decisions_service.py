"""Admit, Place, Release and Reclaim end to end over gRPC, with their error paths."""

from __future__ import annotations

from typing import Any

import pytest

from strata_policy.service.client import Client, RpcError


def cluster(client: Client, cluster_id: str) -> None:
    """Two 8-GPU nodes in zones a/b; org limits 24 GPUs; team-a is guaranteed 8; team-b none."""
    client.call(
        "PushSnapshot",
        {
            "clusterId": cluster_id,
            "snapshot": {
                "nodes": [
                    {
                        "id": f"node-{i}",
                        "capacity": {"cpu": "64000", "gpu": "8000"},
                        "labels": {"zone": z},
                        "gpuModel": "A100",
                    }
                    for i, z in ((1, "a"), (2, "b"))
                ],
                "scopes": [
                    {"id": "org", "limit": {"gpu": "24000"}},
                    {"id": "team-a", "parentId": "org", "guarantee": {"gpu": "8000"}},
                    {"id": "team-b", "parentId": "org"},
                ],
            },
        },
    )


def wl(wid: str, scope: str, gpu: int, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    """A workload dict asking for ``gpu`` milli-GPUs per replica."""
    return {
        "id": wid,
        "scopeId": scope,
        "request": {"gpu": str(gpu)},
        "replicas": replicas,
        **extra,
    }


def scopes(client: Client, cluster_id: str) -> dict[str, dict[str, Any]]:
    """GetCluster's scopes by id."""
    return {s["id"]: s for s in client.call("GetCluster", {"clusterId": cluster_id})["scopes"]}


def test_place_gang_with_spread(client: Client, cluster_id: str) -> None:
    """A two-replica gang spread over hostnames lands on both nodes with whole devices."""
    cluster(client, cluster_id)
    spread = {"spread": {"topologyKey": "kubernetes.io/hostname"}}
    resp = client.call(
        "Place",
        {
            "clusterId": cluster_id,
            "workloads": [wl("job-1", "team-a", 4000, replicas=2, **spread)],
            "policy": "POLICY_MOST_ALLOCATED",
        },
    )
    (result,) = resp["results"]
    assert result["decision"] == "DECISION_PLACED"
    assert sorted(p["nodeId"] for p in result["placements"]) == ["node-1", "node-2"]
    assert all(p["gpuDevices"] == [0, 1, 2, 3] for p in result["placements"])
    assert scopes(client, cluster_id)["org"]["usage"] == {"gpu": "8000"}


def test_admit_then_release_restores_usage(client: Client, cluster_id: str) -> None:
    """Admit charges the tree, release refunds it exactly; unknown ids are not found."""
    cluster(client, cluster_id)
    before = scopes(client, cluster_id)
    resp = client.call("Admit", {"clusterId": cluster_id, "workloads": [wl("a", "team-b", 3000)]})
    assert resp["results"][0]["decision"] == "DECISION_ADMITTED"
    assert resp["results"][0]["borrowed"] == {"gpu": "3000"}
    assert scopes(client, cluster_id)["team-b"]["usage"] == {"gpu": "3000"}
    rel = client.call("Release", {"clusterId": cluster_id, "workloadIds": ["a", "ghost"]})
    assert (rel["released"], rel["notFound"]) == (["a"], ["ghost"])
    assert scopes(client, cluster_id) == before


def test_denied_is_a_value_not_an_error(client: Client, cluster_id: str) -> None:
    """A workload over the org limit is DENIED with a LIMIT_EXCEEDED reason naming the scope."""
    cluster(client, cluster_id)
    resp = client.call(
        "Admit", {"clusterId": cluster_id, "workloads": [wl("big", "team-b", 25000)]}
    )
    (result,) = resp["results"]
    assert result["decision"] == "DECISION_DENIED"
    reason = result["reasons"][0]
    assert (reason["code"], reason["scopeId"], reason["resource"]) == (
        "LIMIT_EXCEEDED",
        "org",
        "gpu",
    )
    assert resp["generation"] == "1"


def test_needs_reclaim_then_reclaim_commits(client: Client, cluster_id: str) -> None:
    """A borrower holds team-a's guarantee: Admit says NEEDS_RECLAIM; Reclaim evicts, admits."""
    cluster(client, cluster_id)
    for wid, now in (("b1", "10"), ("b2", "20")):
        client.call(
            "Place", {"clusterId": cluster_id, "workloads": [wl(wid, "team-b", 8000)], "nowMs": now}
        )
    admit = client.call("Admit", {"clusterId": cluster_id, "workloads": [wl("a1", "team-a", 8000)]})
    (result,) = admit["results"]
    assert result["decision"] == "DECISION_NEEDS_RECLAIM"
    assert [v["workloadId"] for v in result["victims"]] == ["b2"]
    dry = client.call(
        "Reclaim", {"clusterId": cluster_id, "workload": wl("a1", "team-a", 8000), "dryRun": True}
    )
    assert dry["satisfiable"]
    assert [v["workloadId"] for v in dry["victims"]] == ["b2"]
    done = client.call(
        "Reclaim",
        {"clusterId": cluster_id, "workload": wl("a1", "team-a", 8000), "requirePlacement": True},
    )
    assert done["satisfiable"]
    assert done["victims"][0]["reason"] == "VICTIM_REASON_RECLAIM_BORROWED"
    assert done["result"]["decision"] == "DECISION_PLACED"
    usage = scopes(client, cluster_id)
    assert usage["team-a"]["usage"] == {"gpu": "8000"}
    assert usage["team-b"]["usage"] == {"gpu": "8000"}


def test_get_cluster_shows_effective_guarantee_and_oversubscribed(
    client: Client, cluster_id: str
) -> None:
    """GetCluster: an ungoverned org's G is its team's; borrowed is usage above G; a set
    guarantee below the children's sum is flagged oversubscribed."""
    cluster(client, cluster_id)
    for w in (wl("b1", "team-b", 8000), wl("a1", "team-a", 4000)):
        client.call("Admit", {"clusterId": cluster_id, "workloads": [w]})
    got = scopes(client, cluster_id)
    assert got["org"]["effectiveGuarantee"] == {"gpu": "8000"}
    assert got["org"]["borrowed"] == {"gpu": "4000"}
    assert got["team-a"].get("borrowed", {}) == {}
    assert got["team-b"]["borrowed"] == {"gpu": "8000"}
    assert got["org"].get("oversubscribed", []) == []
    client.call(
        "UpdateSnapshot",
        {"clusterId": cluster_id, "upsertScopes": [{"id": "org", "guarantee": {"gpu": "2000"}}]},
    )
    org = scopes(client, cluster_id)["org"]
    assert (org["effectiveGuarantee"], org["oversubscribed"]) == ({"gpu": "2000"}, ["gpu"])


def test_unplaced_explains_by_node_counts(client: Client, cluster_id: str) -> None:
    """A workload for a GPU model no node has is UNPLACED with a Kubernetes-style summary."""
    cluster(client, cluster_id)
    resp = client.call(
        "Place",
        {"clusterId": cluster_id, "workloads": [wl("h", "team-a", 1000, gpuModel="H100")]},
    )
    (result,) = resp["results"]
    assert result["decision"] == "DECISION_UNPLACED"
    assert result["explanation"] == "0/2 nodes fit: 2 gpu_model mismatch"
    assert scopes(client, cluster_id)["team-a"]["usage"] == {}


@pytest.mark.parametrize(
    ("method", "request_", "field"),
    [
        pytest.param(
            "Admit",
            {"workloads": [wl("x", "nowhere", 1000)]},
            "workloads[0].scope_id",
            id="unknown scope",
        ),
        pytest.param(
            "Admit",
            {"workloads": [wl("x", "team-a", 1000), wl("x", "team-a", 1000)]},
            "workloads[1].id",
            id="duplicate id in batch",
        ),
        pytest.param(
            "Admit", {"workloads": [wl("", "team-a", 1000)]}, "workloads[0].id", id="empty id"
        ),
        pytest.param(
            "Admit",
            {"workloads": [wl("x", "team-a", 1500)]},
            'workloads[0].request["gpu"]',
            id="fractional gpu above one device",
        ),
        pytest.param(
            "Admit",
            {"workloads": [{"id": "x", "scopeId": "team-a", "request": {"cpu": "-5"}}]},
            'workloads[0].request["cpu"]',
            id="negative amount",
        ),
        pytest.param(
            "Admit",
            {"workloads": [wl("x", "team-a", 1000, replicas=1_000_000)]},
            "workloads[0].replicas",
            id="absurd replicas",
        ),
        pytest.param("Place", {"workloadIds": ["ghost"]}, "workload_ids[0]", id="place unknown id"),
        pytest.param(
            "Place",
            {"workloads": [wl("x", "team-a", 1000)], "resourceWeights": {"cpu": "NaN"}},
            'resource_weights["cpu"]',
            id="NaN score weight",
        ),
        pytest.param(
            "Place",
            {"workloads": [wl("x", "team-a", 1000)], "resourceWeights": {"gpu": -1}},
            'resource_weights["gpu"]',
            id="negative score weight",
        ),
        pytest.param(
            "Place",
            {"workloads": [wl("x", "team-a", 1000)], "resourceWeights": {"gpu": "Infinity"}},
            'resource_weights["gpu"]',
            id="infinite score weight",
        ),
        pytest.param(
            "Place",
            {"workloads": [wl("x", "team-a", 1000)], "fragmentation": {"coverage": 1.5}},
            "fragmentation.coverage",
            id="coverage above 1",
        ),
        pytest.param(
            "Place",
            {
                "workloads": [wl("x", "team-a", 1000)],
                "fragmentation": {"taskTypes": [{"request": {"gpu": "1500"}, "weight": 1}]},
            },
            'fragmentation.task_types[0].request["gpu"]',
            id="task type with an impossible gpu request",
        ),
        pytest.param(
            "Place",
            {
                "workloads": [wl("x", "team-a", 1000)],
                "fragmentation": {"taskTypes": [{"request": {"gpu": "500"}, "weight": "NaN"}]},
            },
            "fragmentation.task_types[0].weight",
            id="task type with a NaN weight",
        ),
        pytest.param(
            "Reclaim",
            {"workload": wl("x", "team-a", 1000), "resourceWeights": {"cpu": "-Infinity"}},
            'resource_weights["cpu"]',
            id="reclaim with a negative infinite weight",
        ),
        pytest.param("Release", {"workloadIds": [""]}, "workload_ids[0]", id="release empty id"),
        pytest.param(
            "Reclaim",
            {"workload": wl("x", "ghost", 1000)},
            "workload.scope_id",
            id="reclaim bad scope",
        ),
    ],
)
def test_bad_requests_rejected_and_nothing_changes(
    client: Client, cluster_id: str, method: str, request_: dict[str, Any], field: str
) -> None:
    """Each bad request is INVALID_ARGUMENT naming the field; the cluster is unchanged."""
    cluster(client, cluster_id)
    before = client.call("GetCluster", {"clusterId": cluster_id, "includeSnapshot": True})
    with pytest.raises(RpcError) as err:
        client.call(method, {"clusterId": cluster_id, **request_})
    assert err.value.code == "INVALID_ARGUMENT"
    assert field in [path for path, _ in err.value.violations], err.value.violations
    after = client.call("GetCluster", {"clusterId": cluster_id, "includeSnapshot": True})
    assert after == before


def test_batch_size_limit_is_resource_exhausted(client: Client, cluster_id: str) -> None:
    """A batch above max_batch is RESOURCE_EXHAUSTED naming the limit."""
    cluster(client, cluster_id)
    ids = [f"w{i}" for i in range(10_001)]
    with pytest.raises(RpcError) as err:
        client.call("Release", {"clusterId": cluster_id, "workloadIds": ids})
    assert (err.value.code, err.value.reason) == ("RESOURCE_EXHAUSTED", "SIZE_LIMIT_EXCEEDED")
