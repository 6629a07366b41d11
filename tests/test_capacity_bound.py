"""The LP lower bound (DESIGN §8): the fractional optimum, per resource and per GPU model."""

from __future__ import annotations

import pytest
from capacity_kit import plan

from strata_policy.testing import group_node, node_group, running, scope, workload


@pytest.mark.parametrize(
    ("groups", "pending", "lower", "cost"),
    [
        pytest.param([node_group("s", 1.0, cpu=4, memory_gi=16)],
                     [workload(f"w{i}", "t", cpu=1) for i in range(6)], 1.5, 2.0,
                     id="6 CPUs on 4-CPU nodes: bound 1.5 nodes, plan 2"),
        pytest.param([node_group("t4", 0.5, cpu=8, memory_gi=32, gpus=1, model="T4"),
                      node_group("a100", 3.0, cpu=8, memory_gi=32, gpus=1, model="A100")],
                     [workload("g", "t", gpu_milli=1000, gpu_model="A100")], 3.0, 3.0,
                     id="per-model row: an A100 GPU costs the A100 group's price"),
        pytest.param([node_group("s", 1.0, cpu=4, memory_gi=16, min_count=0)], [], 0.0, 0.0,
                     id="nothing held: bound 0"),
    ],
)  # fmt: skip
def test_lower_bound(groups: list, pending: list, lower: float, cost: float) -> None:  # type: ignore[type-arg]
    """The plan's cost and its LP bound."""
    got = plan([], [scope("t")], groups, pending, consolidate=False)
    assert got.lower_bound_per_hour == pytest.approx(lower)
    assert got.cost_per_hour == pytest.approx(cost)


def test_bound_counts_existing_nodes_by_their_own_shape() -> None:
    """A group node bigger than its template holds 60 CPUs: only that node can (a 4-CPU
    template cannot hold the replica), and the replica is over half of it, so the bound is
    that whole node (1.0, the plan's cost), not 15 template nodes."""
    nodes = [group_node("big-one", "s", cpu=64, memory_gi=16)]
    run = [running(workload("w", "t", cpu=60, preemptible=False), "big-one")]
    got = plan(nodes, [scope("t")], [node_group("s", 1.0, cpu=4, memory_gi=16)], running=run)
    assert got.cost_per_hour == pytest.approx(1.0)
    assert got.lower_bound_per_hour == pytest.approx(1.0)
