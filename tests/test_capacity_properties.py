"""Properties of every plan: bound ≤ cost, promises kept, nothing moved that must not move."""

from __future__ import annotations

from capacity_kit import state_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata_policy.capacity import GROUP_LABEL, PlanOptions, plan_capacity
from strata_policy.capacity.catalog import added_nodes
from strata_policy.model import Node, RunningWorkload, Workload
from strata_policy.model.decisions import Policy
from strata_policy.placement.place import PlacementOptions, place_batch
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.testing import node_group, scope, workload

GROUPS = (
    node_group("s", 0.2, cpu=4, memory_gi=16, max_count=6),
    node_group("b", 0.7, cpu=16, memory_gi=64, max_count=3),
    node_group("g", 1.1, cpu=8, memory_gi=32, gpus=2, model="T4", max_count=4),
)
POLICIES = (
    Policy.MOST_ALLOCATED,
    Policy.LEAST_ALLOCATED,
    Policy.FIRST_FIT,
    Policy.BEST_FIT,
    Policy.FRAGMENTATION_AWARE,
)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[RunningWorkload], list[Workload], Policy]:
    """Nodes of the catalog's groups, work running on them, pending work, a policy."""
    nodes: list[Node] = []
    for i in range(draw(st.integers(0, 5))):
        g = GROUPS[draw(st.integers(0, 2))]
        nodes.append(g.new_node(100 + i))

    def one(prefix: str, i: int) -> Workload:
        gpu = draw(st.sampled_from([0, 0, 500, 1000]))
        return workload(
            f"{prefix}{i}", "t", cpu=draw(st.integers(1, 6)), memory_gi=draw(st.integers(0, 8)),
            gpu_milli=gpu, replicas=draw(st.integers(1, 2)),
            preemptible=draw(st.booleans()),
            spread_key=draw(st.sampled_from(["", "kubernetes.io/hostname"])),
        )  # fmt: skip

    runners = [one("r", i) for i in range(draw(st.integers(0, 6)))]
    policy = draw(st.sampled_from(POLICIES))
    matrix = matrix_from_nodes(nodes)
    running = []
    for w, o in zip(runners, place_batch(matrix, runners, PlacementOptions(policy)), strict=True):
        if o.placed:
            for p in o.placements:
                matrix.allocate(matrix.index[p.node_id], w.request, p.gpu_devices)
            running.append(RunningWorkload(w, o.placements))
    pending = [one("p", i) for i in range(draw(st.integers(0, 8)))]
    return nodes, running, pending, policy


SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(clusters(), st.integers(0, 3))
def test_bound_below_cost_and_consolidation_rules(case: tuple, budget: int) -> None:  # type: ignore[type-arg]
    """0 ≤ bound ≤ cost; only preemptible replicas move, every replica of a named node moves,
    at most ``budget`` nodes, groups stay within [min, max] (or the count they had)."""
    nodes, running, pending, policy = case
    state = state_of(nodes, [scope("t")], running)
    options = PlanOptions(PlacementOptions(policy), disruption_budget=budget)
    got = plan_capacity(state, GROUPS, pending, options)
    assert 0 <= got.lower_bound_per_hour <= got.cost_per_hour + 1e-9
    assert len(got.consolidation) <= (budget or 1)
    by_id = {rw.workload.id: rw for rw in running}
    for c in got.consolidation:
        on_node = [rw for rw in running for p in rw.placements if p.node_id == c.node_id]
        assert c.evictions == len(on_node) == len(c.moves)
        for m in c.moves:
            assert by_id[m.workload_id].workload.preemptible
            assert m.node_id != c.node_id
    counts = {g.id: 0 for g in GROUPS}
    before = {g.id: 0 for g in GROUPS}  # a cluster may start above a group's max_count
    gone = {c.node_id for c in got.consolidation}
    for nd in nodes:
        before[nd.labels[GROUP_LABEL]] += 1
        if nd.id not in gone:
            counts[nd.labels[GROUP_LABEL]] += 1
    for s in got.scale_up:
        counts[s.node_group_id] += s.count
    for c in got.consolidation:
        if c.replacement_group_id:
            counts[c.replacement_group_id] += 1
    for g in GROUPS:
        assert g.min_count <= counts[g.id] <= max(g.max_count, g.min_count, before[g.id])


@SETTINGS
@given(clusters())
def test_plan_applied_then_placed_gives_its_placements(case: tuple) -> None:  # type: ignore[type-arg]
    """Adding the scale-up's nodes and placing the pending workloads in order with the same
    options lands every workload exactly where the plan said, and the rest nowhere."""
    nodes, running, pending, policy = case
    state = state_of(nodes, [scope("t")], running)
    options = PlanOptions(PlacementOptions(policy), consolidate=False, checks=False)
    got = plan_capacity(state, GROUPS, pending, options)
    added = added_nodes(GROUPS, [(s.node_group_id, s.node_ids) for s in got.scale_up])
    after = state_of([*nodes, *added], [scope("t")], running)
    outcomes = place_batch(after.matrix, pending, options.placement)
    placed = {
        w.id: tuple(p.node_id for p in o.placements)
        for w, o in zip(pending, outcomes, strict=True)
        if o.placed
    }
    assert placed == dict(got.placements)
    assert {u.workload_id for u in got.unplaceable} == {w.id for w in pending} - set(placed)
