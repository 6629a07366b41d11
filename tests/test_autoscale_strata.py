"""Strata's autoscaler in the replay: consolidation every step, within a disruption budget that
grows with the cluster (named cases)."""

from __future__ import annotations

import pytest
from capacity_kit import state_of

from strata_policy.simulate.autoscalers import StrataAutoscaler, View
from strata_policy.testing import group_node, node_group, running, scope, workload

SMALL = node_group("small", 0.2, cpu=4, memory_gi=16)
BIG = node_group("big", 0.6, cpu=16, memory_gi=64)


def _view(pending: list, nodes: list, run: list | None = None) -> View:  # type: ignore[type-arg]
    return View(0.0, state_of(nodes, [scope("t")], run or []), pending, [SMALL, BIG], {}, {})


def _smalls(n: int) -> list:  # type: ignore[type-arg]
    return [group_node(f"n{i:02d}", "small", cpu=4, memory_gi=16) for i in range(n)]


def test_consolidates_while_work_waits() -> None:
    """A pod only a big node holds waits and an empty small node idles: one pass orders the
    big node and removes the small one (before, consolidation waited for an empty queue)."""
    pod = workload("p", "t", cpu=8, memory_gi=8)
    act = StrataAutoscaler().decide(_view([pod], _smalls(1)))
    assert (act.add, act.remove) == ([("big", 1)], ["n00"])


def test_a_node_receiving_work_is_not_consolidated() -> None:
    """The small node that the waiting pod lands on stays; nothing is ordered or removed."""
    pod = workload("p", "t", cpu=2, memory_gi=2)
    act = StrataAutoscaler().decide(_view([pod], _smalls(1)))
    assert (act.add, act.remove) == ([], [])


@pytest.mark.parametrize(
    ("nodes", "share", "removed"),
    [
        pytest.param(5, 0.1, 1, id="budget: 10 % of 5 nodes rounds up to 1"),
        pytest.param(20, 0.1, 2, id="budget: 10 % of 20 nodes is 2"),
        pytest.param(25, 0.1, 3, id="budget: 10 % of 25 nodes rounds up to 3"),
        pytest.param(20, 0.0, 1, id="budget: share 0 is one node a pass"),
    ],
)
def test_budget_is_a_share_of_the_nodes(nodes: int, share: float, removed: int) -> None:
    """Empty nodes go at most ``ceil(share × nodes)`` a pass (at least one), emptiest first."""
    act = StrataAutoscaler(budget_share=share).decide(_view([], _smalls(nodes)))
    assert len(act.remove) == removed


def test_never_moves_non_preemptible() -> None:
    """Two half-used small nodes whose pods fit one: the preemptible pod moves, the
    non-preemptible one's node stays, whatever the budget."""
    nodes = _smalls(2)
    run = [
        running(workload("keep", "t", cpu=2, memory_gi=2, preemptible=False), "n00"),
        running(workload("move", "t", cpu=2, memory_gi=2), "n01"),
    ]
    act = StrataAutoscaler(budget_share=1.0).decide(_view([], nodes, run))
    assert (act.add, act.remove) == ([], ["n01"])


def test_bad_budget_share_is_refused() -> None:
    """A share outside [0, 1] is one clear error."""
    with pytest.raises(ValueError, match="budget_share"):
        StrataAutoscaler(budget_share=1.5)
