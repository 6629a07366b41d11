"""The baselines' rules on small named cases the notes' rules decide, and a replay smoke test."""

from __future__ import annotations

from capacity_kit import state_of

from strata_policy.model import HOSTNAME_KEY
from strata_policy.simulate import autoscale
from strata_policy.simulate.autoscale_baselines import (
    ClusterAutoscaler,
    Karpenter,
    estimate_binpacking,
)
from strata_policy.simulate.autoscale_catalog import day_catalog, price_of, synthetic_day
from strata_policy.simulate.autoscalers import StrataAutoscaler, View
from strata_policy.testing import group_node, node_group, running, scope, workload

SMALL = node_group("small", 0.2, cpu=4, memory_gi=16)
BIG = node_group("big", 0.6, cpu=16, memory_gi=64)
HIGHMEM = node_group("highmem", 0.3, cpu=4, memory_gi=32)


def _view(pending: list, groups: list, nodes: list | None = None, run: list | None = None,  # type: ignore[type-arg]
          now: float = 0.0) -> View:  # fmt: skip
    state = state_of(nodes or [], [scope("t")], run or [])
    return View(now, state, pending, groups, {}, {})


def test_binpacking_estimator_first_fit_decreasing() -> None:
    """Five 2-CPU pods on 4-CPU templates: three nodes, every pod held."""
    pods = [workload(f"p{i}", "t", cpu=2, memory_gi=1) for i in range(5)]
    nodes, held = estimate_binpacking(SMALL, pods, 10)
    assert (nodes, len(held)) == (3, 5)


def test_least_waste_prefers_the_tighter_fit() -> None:
    """Four 4-CPU/4-GiB pods: least-waste takes the 16-CPU group (CPU and memory waste 0.75 sum)
    over the 4-CPU/32-GiB one (memory waste 0.875 per node)."""
    pods = [workload(f"p{i}", "t", cpu=4, memory_gi=4) for i in range(4)]
    act = ClusterAutoscaler("least-waste").decide(_view(pods, [HIGHMEM, BIG]))
    assert act.add == [("big", 1)]


def test_price_expander_prefers_cheaper_per_pod() -> None:
    """Four 1-CPU pods: the price expander picks one small node (0.2) over one big (0.6)."""
    pods = [workload(f"p{i}", "t", cpu=1, memory_gi=1) for i in range(4)]
    act = ClusterAutoscaler("price").decide(_view(pods, [BIG, SMALL]))
    assert act.add == [("small", 1)]


def test_ca_scales_down_only_after_ten_minutes() -> None:
    """An empty node is unneeded at once but removed only after 10 minutes unneeded."""
    ca = ClusterAutoscaler("least-waste")
    nodes = [group_node("n1", "small", cpu=4, memory_gi=16)]
    assert ca.decide(_view([], [SMALL], nodes, now=1000)).remove == []
    assert ca.decide(_view([], [SMALL], nodes, now=1500)).remove == []
    assert ca.decide(_view([], [SMALL], nodes, now=1600)).remove == ["n1"]


def test_ca_keeps_a_busy_node() -> None:
    """A node above 0.5 utilisation is never unneeded."""
    ca = ClusterAutoscaler("least-waste")
    nodes = [group_node("n1", "small", cpu=4, memory_gi=16)]
    run = [running(workload("w", "t", cpu=3), "n1")]
    for now in (1000, 2000, 3000):
        assert ca.decide(_view([], [SMALL], nodes, run, now=now)).remove == []


def test_karpenter_launches_the_cheapest_type_that_fits() -> None:
    """Six 2-CPU pods pack onto claims; each launches the cheapest type holding its pods."""
    pods = [workload(f"p{i}", "t", cpu=2, memory_gi=2) for i in range(6)]
    act = Karpenter().decide(_view(pods, [BIG, SMALL]))
    assert act.add == [("big", 1)]


def test_karpenter_deletes_empty_nodes() -> None:
    """Emptiness: every empty node goes in one action."""
    nodes = [group_node(f"n{i}", "small", cpu=4, memory_gi=16) for i in range(3)]
    assert Karpenter().decide(_view([], [SMALL], nodes)).remove == ["n0", "n1", "n2"]


def test_karpenter_replaces_with_a_cheaper_type() -> None:
    """Single-node: a big node holding one small pod, nowhere else to go, becomes a small one."""
    nodes = [group_node("b1", "big", cpu=16, memory_gi=64)]
    run = [running(workload("w", "t", cpu=2), "b1")]
    act = Karpenter().decide(_view([], [SMALL, BIG], nodes, run))
    assert (act.add, act.remove) == ([("small", 1)], ["b1"])


def test_karpenter_never_moves_non_preemptible() -> None:
    """A node running a non-preemptible pod is neither deleted nor replaced."""
    nodes = [group_node("b1", "big", cpu=16, memory_gi=64), group_node("b2", "big", 16, 64)]
    run = [running(workload("w", "t", cpu=2, preemptible=False), "b1"),
           running(workload("v", "t", cpu=2, preemptible=False), "b2")]  # fmt: skip
    act = Karpenter().decide(_view([], [SMALL, BIG], nodes, run))
    assert (act.add, act.remove) == ([], [])


def test_price_model() -> None:
    """A g4dn.12xlarge-like node (48 CPU, 192 GiB, 4 T4) costs about AWS's $3.912."""
    cap = {"cpu": 48_000, "memory": 192 * 1024**3, "gpu": 4000}
    assert abs(price_of(cap, "T4") - 3.912) < 0.02


def test_replay_smoke() -> None:
    """Two hours of the synthetic day: every autoscaler pays at least the bound; Strata
    leaves no guarantee short (the price expander does here: guaranteed replicas wait)."""
    scopes, trace = synthetic_day(7, 2)
    for scaler in (StrataAutoscaler(), ClusterAutoscaler("price"), Karpenter()):
        t = autoscale.replay(scaler, day_catalog(), scopes, trace, step_s=300)
        s = autoscale.summarise(t, 300)
        assert s.cost >= s.lower_bound > 0
        if scaler.name == "strata":
            assert s.violations == 0


Z = "topology.kubernetes.io/zone"
ZONED = [node_group(f"m-{z}", 0.2, cpu=4, memory_gi=16, labels={Z: z}) for z in "abc"]
PG = workload("pg", "t", cpu=1, memory_gi=1, replicas=3, spread_key=Z)


def test_ca_zone_spread_one_replica_per_option() -> None:
    """A zone-spread gang of 3: an option of one zone's group holds one replica, on one node."""
    assert estimate_binpacking(ZONED[0], [PG], 10) == (1, [PG])


def test_ca_zone_spread_skips_a_taken_zone() -> None:
    """A zone where an upcoming node has room for a replica holds none in this option; the
    loop after orders the next zone."""
    assert estimate_binpacking(ZONED[0], [PG], 10, {"pg": frozenset({"a"})}) == (0, [])
    state = state_of([], [scope("t")])
    view = View(0.0, state, [PG], ZONED, {}, {}, {"pg": frozenset({"a"})})
    assert ClusterAutoscaler("least-waste").decide(view).add == [("m-b", 1)]


def test_karpenter_zone_spread() -> None:
    """Karpenter launches the gang's three claims in three zones, skipping a taken one."""
    assert Karpenter().decide(_view([PG], ZONED)).add == [("m-a", 1), ("m-b", 1), ("m-c", 1)]
    view = View(0.0, state_of([], [scope("t")]), [PG], ZONED, {}, {}, {"pg": frozenset({"a"})})
    assert Karpenter().decide(view).add == [("m-b", 1), ("m-c", 1)]


def test_upcoming_nodes_include_ready_free_room() -> None:
    """A gang of 2 spread by hostname, one ready node with room and one node coming: covered,
    so no autoscaler orders for it again; with nothing coming it stays pending."""
    gang = workload("g", "t", cpu=2, memory_gi=1, replicas=2, spread_key=HOSTNAME_KEY)
    state = state_of([group_node("ready", "small", cpu=4, memory_gi=16)], [scope("t")])
    coming = [SMALL.new_node(0)]
    assert autoscale._uncovered(state.matrix, [gang], coming, StrataAutoscaler().placement)[0] == []
    left, _ = autoscale._uncovered(state.matrix, [gang], [], StrataAutoscaler().placement)
    assert left == [gang]
