"""Consolidation (DESIGN §8): REMOVE and REPLACE, and every rule a plan must keep."""

from __future__ import annotations

import pytest
from capacity_kit import plan

from strata_policy.capacity import ConsolidationAction
from strata_policy.testing import group_node, node_group, resources, running, scope, workload

SMALL = node_group("small", 0.2, cpu=4, memory_gi=16)
BIG = node_group("big", 0.7, cpu=16, memory_gi=64)
GPU = node_group("gpu", 2.0, cpu=16, memory_gi=64, gpus=4, model="A100")
HOST = "kubernetes.io/hostname"


def _small(i: int) -> object:
    return group_node(f"n{i}", "small", cpu=4, memory_gi=16)


def test_empty_node_is_removed() -> None:
    """An empty node of a group above min_count is removed: saving = its price, no eviction."""
    got = plan([_small(1)], [scope("t")], [SMALL])
    (c,) = got.consolidation
    assert (c.node_id, c.action, c.moves, c.evictions) == ("n1", ConsolidationAction.REMOVE, (), 0)
    assert c.saving_per_hour == pytest.approx(0.2)
    assert got.cost_per_hour == 0


def test_underused_node_moves_to_the_other() -> None:
    """Two half-used nodes: one is removed and its replica moves to the other."""
    wl = [workload("a", "t", cpu=2), workload("b", "t", cpu=2)]
    run = [running(wl[0], "n1"), running(wl[1], "n2")]
    got = plan([_small(1), _small(2)], [scope("t")], [SMALL], running=run)
    (c,) = got.consolidation
    assert c.action is ConsolidationAction.REMOVE
    assert c.evictions == 1
    assert c.moves[0].node_id != c.node_id


@pytest.mark.parametrize(
    ("nodes", "groups", "run", "budget", "want"),
    [
        pytest.param([_small(1), _small(2)], [SMALL],
                     [running(workload("a", "t", cpu=2, preemptible=False), "n1"),
                      running(workload("b", "t", cpu=2, preemptible=False), "n2")],
                     0, [], id="non-preemptible replicas never move"),
        pytest.param([_small(1), _small(2)], [node_group("small", 0.2, cpu=4, memory_gi=16,
                                                         min_count=2)],
                     [], 0, [], id="min_count kept"),
        pytest.param([_small(1), _small(2), _small(3)], [SMALL], [], 2, ["n1", "n2"],
                     id="budget 2: two of three empty nodes"),
        pytest.param([_small(1), _small(2), _small(3)], [SMALL], [], 0, ["n1"],
                     id="budget 0: the documented default, one node"),
        pytest.param([group_node("x", "other", cpu=4, memory_gi=16)], [SMALL], [], 5, [],
                     id="a node in no catalog group is never consolidated"),
    ],
)  # fmt: skip
def test_what_is_consolidated(
    nodes: list,
    groups: list,
    run: list,
    budget: int,  # type: ignore[type-arg]
    want: list,
) -> None:  # type: ignore[type-arg]
    """Exactly these nodes are named, in this order."""
    got = plan(nodes, [scope("t")], groups, running=run, budget=budget)
    assert [c.node_id for c in got.consolidation] == want


def test_replace_with_a_cheaper_group() -> None:
    """A big node holding little, with no room elsewhere, is replaced by one small node."""
    nodes = [group_node("b1", "big", cpu=16, memory_gi=64)]
    run = [running(workload("a", "t", cpu=2), "b1")]
    got = plan(nodes, [scope("t")], [SMALL, BIG], running=run)
    (c,) = got.consolidation
    assert c.action is ConsolidationAction.REPLACE
    assert c.replacement_group_id == "small"
    assert c.moves[0].node_id.startswith("small-")
    assert c.saving_per_hour == pytest.approx(0.5)
    assert got.cost_per_hour == pytest.approx(0.2)


def test_spread_is_kept() -> None:
    """A spread replica never moves onto the node of its sibling."""
    gang = workload("g", "t", cpu=1, replicas=2, spread_key=HOST)
    nodes = [_small(1), _small(2), _small(3)]
    run = [running(gang, "n1", "n2")]
    got = plan(nodes, [scope("t")], [SMALL], running=run, budget=3)
    for c in got.consolidation:
        for m in c.moves:
            assert m.node_id not in {"n1", "n2"} - {c.node_id}


def test_guarantee_stays_backed() -> None:
    """An idle guarantee of 8 GPUs on two 4-GPU nodes keeps both nodes."""
    nodes = [group_node("g1", "gpu", 16, 64, 4, "A100"), group_node("g2", "gpu", 16, 64, 4, "A100")]
    scopes = [scope("t", guarantee=resources(gpu_milli=8000))]
    got = plan(nodes, scopes, [GPU], budget=2)
    assert got.consolidation == ()


def test_guarantee_allows_removing_spare() -> None:
    """With 4 GPUs guaranteed and two 4-GPU nodes, one node can go."""
    nodes = [group_node("g1", "gpu", 16, 64, 4, "A100"), group_node("g2", "gpu", 16, 64, 4, "A100")]
    scopes = [scope("t", guarantee=resources(gpu_milli=4000))]
    got = plan(nodes, scopes, [GPU], budget=2)
    assert [c.node_id for c in got.consolidation] == ["g1"]
    assert not got.checks


def test_several_small_nodes_repacked_onto_the_node_the_plan_adds() -> None:
    """A pending 8-CPU workload orders a big node; in the same plan the two small nodes' pods
    move onto its spare room and both small nodes go (what Strata's replay autoscaler relies on
    when it consolidates beside a scale-up)."""
    run = [running(workload("a", "t", cpu=3), "n1"), running(workload("b", "t", cpu=3), "n2")]
    got = plan([_small(1), _small(2)], [scope("t")], [SMALL, BIG],
               pending=[workload("p", "t", cpu=8)], running=run, budget=2)  # fmt: skip
    (added,) = got.added_node_ids()
    assert [c.node_id for c in got.consolidation] == ["n1", "n2"]
    assert {m.node_id for c in got.consolidation for m in c.moves} == {added}
    assert got.cost_per_hour == pytest.approx(0.7)
