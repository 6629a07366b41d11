"""PlanCapacity over gRPC: a dry run that answers the plan, and bad catalogs as bad requests."""

from __future__ import annotations

from typing import Any

import pytest

from strata_policy.engine import Engine
from strata_policy.service.client import Client, RpcError
from strata_policy.testing import group_node, node_group, scope, snapshot, workload

GROUP_LABEL = "strata.dev/node-group"
GI = 1024**3


def _group(gid: str, price: float, cpu: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": gid,
        "template": {"id": f"{gid}-", "capacity": {"cpu": str(cpu * 1000), "memory": str(16 * GI)}},
        "pricePerHour": price,
        "maxCount": 10,
        **extra,
    }


def _push(client: Client, cluster_id: str) -> None:
    node = {
        "id": "n1",
        "capacity": {"cpu": "4000", "memory": str(16 * GI)},
        "labels": {GROUP_LABEL: "small"},
    }
    client.call(
        "PushSnapshot",
        {"clusterId": cluster_id, "snapshot": {"nodes": [node], "scopes": [{"id": "t"}]}},
    )


def test_plan_over_grpc(client: Client, cluster_id: str) -> None:
    """Scale-up, cost and bound come back; the cluster's generation is unchanged."""
    _push(client, cluster_id)
    pending = [
        {"id": f"w{i}", "scopeId": "t", "request": {"cpu": "3000"}, "replicas": 1} for i in range(3)
    ]
    reply = client.call(
        "PlanCapacity",
        {
            "clusterId": cluster_id,
            "nodeGroups": [_group("small", 0.2, 4), _group("big", 0.7, 16)],
            "workloads": pending,
        },
    )
    assert reply["generation"] == "1"
    assert [(s["nodeGroupId"], s["count"]) for s in reply["scaleUp"]] == [("small", 2)]
    assert reply["costPerHour"] == pytest.approx(0.6)
    assert 0 < reply["lowerBoundPerHour"] <= reply["costPerHour"]
    assert {p["workloadId"] for p in reply["placements"]} == {"w0", "w1", "w2"}
    after = client.call("GetCluster", {"clusterId": cluster_id})
    assert after["generation"] == "1"


@pytest.mark.parametrize(
    ("group", "code", "field"),
    [
        pytest.param(_group("g", -1.0, 4), "INVALID_ARGUMENT", "node_groups[0].price_per_hour",
                     id="negative price"),
        pytest.param(_group("g", 1.0, 4, minCount=5, maxCount=2), "INVALID_ARGUMENT",
                     "node_groups[0].min_count", id="min above max"),
        pytest.param(_group("small", 1.0, 4, currentCount=3), "INVALID_ARGUMENT",
                     "node_groups[0].current_count", id="current_count disagrees"),
    ],
)  # fmt: skip
def test_bad_catalog_over_grpc(
    client: Client, cluster_id: str, group: dict[str, Any], code: str, field: str
) -> None:
    """A bad catalog is INVALID_ARGUMENT with a field violation naming the field."""
    _push(client, cluster_id)
    with pytest.raises(RpcError) as err:
        client.call("PlanCapacity", {"clusterId": cluster_id, "nodeGroups": [group]})
    assert err.value.code == code
    assert field in {path for path, _ in err.value.violations}


def test_too_many_groups_over_grpc(client: Client, cluster_id: str) -> None:
    """More groups than the server plans over is RESOURCE_EXHAUSTED."""
    _push(client, cluster_id)
    groups = [_group(f"g{i}", 1.0, 4) for i in range(1_001)]
    with pytest.raises(RpcError) as err:
        client.call("PlanCapacity", {"clusterId": cluster_id, "nodeGroups": groups})
    assert err.value.code == "RESOURCE_EXHAUSTED"


def test_unknown_cluster(client: Client) -> None:
    """An unknown cluster is NOT_FOUND."""
    with pytest.raises(RpcError) as err:
        client.call("PlanCapacity", {"clusterId": "nope-nope"})
    assert err.value.code == "NOT_FOUND"


def test_engine_plans_admitted_but_unplaced() -> None:
    """Through the engine: an admitted, unplaced workload is planned for, and planning
    changes nothing (same generation, same snapshot)."""
    engine = Engine(clock=lambda: 1_000)
    engine.push_snapshot("c", snapshot([group_node("n1", "small", 4, 16)], [scope("t")]))
    engine.admit("c", [workload("a", "t", cpu=3)])
    before = engine.snapshot("c")
    generation, plan = engine.plan_capacity(
        "c", [node_group("small", 0.2, 4, 16)], [workload("b", "t", cpu=3)]
    )
    assert generation == before[0]
    assert engine.snapshot("c") == before
    assert plan.placements == {"a": ("n1",), "b": ("small-0",)}
    assert [(s.node_group_id, s.count) for s in plan.scale_up] == [("small", 1)]


def test_negative_disruption_budget(client: Client, cluster_id: str) -> None:
    """A negative disruption budget is INVALID_ARGUMENT naming the field."""
    _push(client, cluster_id)
    with pytest.raises(RpcError) as err:
        client.call("PlanCapacity", {"clusterId": cluster_id, "disruptionBudget": -1})
    assert ("disruption_budget", "must be in [0, 10000]") in err.value.violations
