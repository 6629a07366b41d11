"""The replay's joined bound, tighter: nodes paid while provisioned (``lead``), and each
replica on one column's nodes, a non-preemptible one on the same column all its life.
Checked against a brute-force optimum of the replay's own model on tiny cases."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.capacity import NodeGroup, bound
from strata_policy.capacity import time_bound as time_bound_module
from strata_policy.capacity.catalog import could_hold
from strata_policy.capacity.time_bound import time_bound
from strata_policy.model import HOSTNAME_KEY, Workload
from strata_policy.testing import node_group, workload

ZONE = "topology.kubernetes.io/zone"
M4 = node_group("m", 1.0, cpu=4, memory_gi=16, max_count=4)


def columns(groups: Sequence[NodeGroup]) -> list[bound.GroupColumn]:
    """One column per group, 0 to its ``max_count`` nodes."""
    out = []
    for g in groups:
        t = g.new_node(0)
        out.append(bound.GroupColumn(g.price_per_hour, t.capacity, t.gpu_model, 0.0,
                                     float(g.max_count), g.id, t.labels))  # fmt: skip
    return out


def joined(groups: Sequence[NodeGroup], steps: list[list[Workload]], lead: int = 0,
           assign: bool = True) -> float:  # fmt: skip
    """The bound of ``steps`` (an hour each) over ``groups``, fresh (memos cleared)."""
    bound._MEMO.clear()
    time_bound_module._MEMO.clear()
    cols = columns(groups)
    floors = [bound.lower_bound(cols, d, integral=True).value for d in steps]
    old, time_bound_module._ASSIGN = time_bound_module._ASSIGN, assign
    try:
        return time_bound(cols, steps, floors, 1.0, lead=lead).value
    finally:
        time_bound_module._ASSIGN = old


A = workload("a", "t", cpu=4)
B = workload("b", "t", cpu=4)


@pytest.mark.parametrize(
    ("steps", "lead", "value"),
    [
        pytest.param([[], [A]], 0, 1.0, id="no lead: the node is paid the hour it holds a"),
        pytest.param([[], [A]], 1, 2.0, id="lead 1: ordered an hour before it holds a"),
        pytest.param([[A], []], 1, 1.0, id="a at the first step: a fleet may start ready"),
        pytest.param([[], [], [A]], 1, 2.0, id="lead 1, a at the third hour: two hours paid"),
        pytest.param([[A], [A, B]], 1, 4.0,
                     id="b comes: its node is paid from the hour before (2 + 2, not 1 + 2)"),
        pytest.param([[], [A]], 5, 2.0, id="a lead past the run: only the steps there are"),
    ],
)  # fmt: skip
def test_lead_bound(steps: list[list[Workload]], lead: int, value: float) -> None:
    """One 4-CPU node per 4-CPU workload at $1 an hour: a node holds work ``lead`` steps
    after it is ordered, and is paid from the order."""
    assert joined([M4], steps, lead) == pytest.approx(value)


def test_lead_rejects_a_negative_lead() -> None:
    """A negative lead is a caller's error, named, not a looser bound."""
    with pytest.raises(ValueError, match="lead"):
        time_bound(columns([M4]), [[A]], [1.0], 1.0, lead=-1)


def test_lead_floors_past_the_time_limit_are_the_steps_own() -> None:
    """Past the time limit the lead floors left are the maxima of the steps' own floors
    (valid, looser), nothing is memoised, and the line says so."""
    time_bound_module._MEMO.clear()
    got = time_bound(columns([M4]), [[], [A], []], [0.0, 1.0, 0.0], 1.0, lead=1,
                     time_limit_s=-1.0)  # fmt: skip
    assert (got.value, got.joined) == (pytest.approx(2.0), False)
    assert time_bound_module.LEAD_CUT in got.why
    assert not time_bound_module._MEMO


ZONED = [node_group(f"z{z}", price, cpu=1, memory_gi=16, labels={ZONE: z})
         for z, price in (("a", 1.0), ("b", 1.0), ("c", 5.0))]  # fmt: skip
GANG = workload("pg", "db", cpu=1, replicas=3, spread_key=ZONE, preemptible=False)


@pytest.mark.parametrize(
    ("assign", "value"),
    [
        pytest.param(False, 3.0, id="node-count rows only: three nodes of the cheap zones"),
        pytest.param(True, 7.0, id="assignment: one replica per zone, the dear one too"),
    ],
)  # fmt: skip
def test_zone_spread_takes_every_zone(assign: bool, value: float) -> None:
    """A non-preemptible gang of 3 spread over 3 zones has a replica in each: the
    assignment rows (at most one replica of a gang per zone) price zone c's node."""
    assert joined(ZONED, [[GANG]], assign=assign) == pytest.approx(value)


G = node_group("g", 4.0, cpu=8, memory_gi=64, gpus=1, model="T4", max_count=3)
DB = workload("db", "t", cpu=4, preemptible=False)
JOB = workload("job", "t", cpu=1, gpu_milli=1000)


def test_infeasible_joined_lp_keeps_the_floors_and_says_so() -> None:
    """A pinned demand the groups' counts cannot hold: the floors stand, named as such."""
    time_bound_module._MEMO.clear()
    two = workload("two", "t", cpu=4, replicas=2, preemptible=False)
    one = node_group("m", 1.0, cpu=4, memory_gi=16, max_count=1)
    got = time_bound(columns([one]), [[two]], [1.0], 1.0)
    assert (got.value, got.joined, got.why) == (1.0, False, time_bound_module.INFEASIBLE)


def test_assignment_never_below_the_joined_rows() -> None:
    """The assignment rows only add: with them the joined bound is ≥ without, on the
    database-and-GPU case of the joined bound's tests."""
    steps = [[DB, JOB], [DB]]
    assert joined([M4, G], steps) >= joined([M4, G], steps, assign=False) - 1e-9


# Brute force: the replay's model on tiny cases.


def brute_force(groups: Sequence[NodeGroup], steps: list[list[Workload]], lead: int) -> float:
    """The cheapest plan of the replay's model that holds every step's demand: node slots
    (a column and an index below its ``max_count``), each replica whole on a slot at every
    step it is present, a non-preemptible one on the same slot all its life, a gang's
    replicas on distinct slots (hostname) or zones (zone spread); a slot used at steps ``U``
    is paid at every step within ``lead`` before one of them (a node ordered ``lead`` steps
    before it holds work; a fleet may start ready at step 0)."""
    slots = [(g, i) for g in groups for i in range(g.max_count)]
    by_id = {w.id: w for d in steps for w in d}
    fixed = [(i, r) for i in sorted(by_id) if not by_id[i].preemptible
             for r in range(by_id[i].replicas)]  # fmt: skip
    best = float("inf")
    for pin in itertools.product(range(len(slots)), repeat=len(fixed)):
        where = dict(zip(fixed, pin, strict=True))
        options = [list(_step_uses(slots, d, where)) for d in steps]
        if any(not o for o in options):
            continue
        for uses in itertools.product(*options):
            paid = 0.0
            for s, (g, _) in enumerate(slots):
                held = {t for t, u in enumerate(uses) if s in u}
                steps_paid = {p for t in held for p in range(max(0, t - lead), t + 1)}
                paid += g.price_per_hour * len(steps_paid)
            best = min(best, paid)
    return best


def _step_uses(
    slots: Sequence[tuple[NodeGroup, int]],
    demand: Sequence[Workload],
    where: dict[tuple[str, int], int],
) -> Iterator[frozenset[int]]:
    """Each distinct set of slots some feasible placement of ``demand`` uses (the pinned
    replicas on their slots)."""
    items = [(w, r) for w in demand for r in range(w.replicas)]
    free = [(w, r) for w, r in items if (w.id, r) not in where]
    seen: set[frozenset[int]] = set()
    for choice in itertools.product(range(len(slots)), repeat=len(free)):
        on = {**{(w.id, r): where[(w.id, r)] for w, r in items if (w.id, r) in where},
              **{(w.id, r): s for (w, r), s in zip(free, choice, strict=True)}}  # fmt: skip
        if _fits(slots, items, on):
            key = frozenset(on.values())
            if key not in seen:
                seen.add(key)
                yield key


def _fits(
    slots: Sequence[tuple[NodeGroup, int]],
    items: Sequence[tuple[Workload, int]],
    on: dict[tuple[str, int], int],
) -> bool:
    """Every replica fits its slot's node, no node over capacity, gangs spread."""
    load: dict[int, dict[str, int]] = {}
    for w, r in items:
        s = on[(w.id, r)]
        g = slots[s][0]
        if not could_hold(g.template, w):
            return False
        used = load.setdefault(s, {})
        for res, amount in w.request.items():
            used[res] = used.get(res, 0) + amount
            if used[res] > g.template.capacity.get(res, 0):
                return False
    for w in {w.id: w for w, _ in items}.values():
        if w.spread_key and w.replicas > 1:
            mine: list[object] = [on[(w.id, r)] for r in range(w.replicas)]
            if w.spread_key == ZONE:
                mine = [slots[on[(w.id, r)]][0].template.labels.get(ZONE)
                        for r in range(w.replicas)]  # fmt: skip
            if len(set(mine)) < len(mine):
                return False
    return True


@st.composite
def tiny_replay(draw: st.DrawFn) -> tuple[list[NodeGroup], list[list[Workload]], int]:
    """Two groups (CPU, maybe one GPU, zones a and b), at most 2 nodes each; 1 to 3
    workloads (maybe a gang of 2 spread by host or zone) present at contiguous steps of 1
    to 3; a lead of 0 to 2."""
    groups = []
    for i in range(2):
        gpus = draw(st.integers(0, 1))
        groups.append(node_group(
            f"g{i}", draw(st.sampled_from([0.5, 1.0, 2.5])), cpu=draw(st.sampled_from([2, 4])),
            memory_gi=16, gpus=gpus, model="T4" if gpus else "", max_count=2,
            labels={ZONE: "ab"[i]},
        ))  # fmt: skip
    n_t = draw(st.integers(1, 3))
    steps: list[list[Workload]] = [[] for _ in range(n_t)]
    for j in range(draw(st.integers(1, 3))):
        spread = draw(st.sampled_from(["", "", HOSTNAME_KEY, ZONE]))
        w = workload(f"w{j}", "t", cpu=draw(st.integers(1, 3)),
                     gpu_milli=draw(st.sampled_from([0, 0, 1000])),
                     replicas=2 if spread else 1, spread_key=spread,
                     preemptible=draw(st.booleans()))  # fmt: skip
        start = draw(st.integers(0, n_t - 1))
        for t in range(start, draw(st.integers(start, n_t - 1)) + 1):
            steps[t].append(w)
    return groups, steps, draw(st.integers(0, 2))


@settings(max_examples=100, deadline=None)
@given(tiny_replay())
def test_bound_between_the_old_one_and_brute_force(case: tuple) -> None:  # type: ignore[type-arg]
    """On tiny replays: the bound (lead, joined, assignment) is ≥ the bound without lead
    and assignment (the old one) and ≤ the brute-force optimum of the replay's model."""
    groups, steps, lead = case
    if any(not any(could_hold(g.template, w) for g in groups) for d in steps for w in d):
        return  # a workload no node holds: no plan holds the demand
    best = brute_force(groups, steps, lead)
    got = joined(groups, steps, lead)
    assert got >= joined(groups, steps, 0, assign=False) - 1e-6
    if best < float("inf"):
        assert got <= best + 1e-6
