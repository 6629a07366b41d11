"""Hypothesis properties of Reclaim (DESIGN §2) over random trees, workloads and priorities:
equal to its naive twin, COMPLETE, MINIMAL, and Admit ≡ dry-run Reclaim."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from naive_reclaim import LOWER, Cand, World, candidates, makes_room, walk

from strata_policy.model import Decision, ReasonCode, RunningWorkload, Scope, Workload
from strata_policy.quota import QuotaTree, decide_admit, find_victims

RESOURCES = ("cpu", "gpu")
SETTINGS = settings(max_examples=150, deadline=None)


def amounts(max_value: int) -> st.SearchStrategy[dict[str, int]]:
    """A sparse resource map over cpu/gpu."""
    return st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, max_value), max_size=2)


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[Scope], list[RunningWorkload], dict[str, int]]:
    """A random forest of scopes (guarantees set on some, absent on others, a few limits),
    running workloads admitted within the limits, and a capacity they may overfill."""
    scopes: list[Scope] = []
    for i in range(draw(st.integers(1, 6))):
        parent = draw(st.sampled_from(["", *(s.id for s in scopes)]))
        guarantee = draw(st.one_of(st.just({}), amounts(8)))
        limit = draw(st.one_of(st.just({}), st.just({}), amounts(16)))
        limit = {r: max(a, guarantee.get(r, 0)) for r, a in limit.items()}
        scopes.append(Scope(f"s{i}", parent, "", guarantee, limit))
    running = [
        RunningWorkload(workload(draw, scopes, f"v{n}"), admitted_at_ms=draw(st.integers(0, 3)))
        for n in range(draw(st.integers(0, 8)))
    ]
    capacity = draw(st.fixed_dictionaries({r: st.integers(0, 20) for r in RESOURCES}))
    return scopes, running, capacity


def workload(draw: st.DrawFn, scopes: list[Scope], wid: str) -> Workload:
    """A random workload in a random scope."""
    return Workload(
        id=wid,
        scope_id=draw(st.sampled_from([s.id for s in scopes])),
        request=draw(amounts(5)),
        replicas=draw(st.integers(1, 2)),
        priority=draw(st.integers(0, 3)),
        preemptible=draw(st.sampled_from([True, True, True, False])),
    )


def tree_of(scopes: list[Scope], running: list[RunningWorkload]) -> QuotaTree:
    """The tree charged with every running workload."""
    tree = QuotaTree.build(scopes)
    for rw in running:
        tree.charge(rw.workload.scope_id, rw.workload.total)
    return tree


def named(victims: list[Cand]) -> list[tuple[str, str]]:
    """(id, reason) pairs."""
    return [(c.rw.workload.id, c.reason) for c in victims]


@SETTINGS
@given(world=worlds(), data=st.data())
def test_reclaim_equals_its_naive_twin(
    world: tuple[list[Scope], list[RunningWorkload], dict[str, int]], data: st.DataObject
) -> None:
    """find_victims gives the naive twin's answer: satisfiable or not, same victims, reasons."""
    scopes, running, capacity = world
    w = workload(data.draw, scopes, "w")
    plan = find_victims(
        tree_of(scopes, running), {rw.workload.id: rw for rw in running}, w, capacity
    )
    _, expected = walk(World({s.id: s for s in scopes}, running, capacity), w)
    assert plan.satisfiable is (expected is not None)
    got = [(v.workload_id, v.reason.value) for v in plan.victims]
    assert got == (named(expected) if expected is not None else [])


@SETTINGS
@given(world=worlds(), data=st.data())
def test_reclaim_is_complete_and_minimal(
    world: tuple[list[Scope], list[RunningWorkload], dict[str, int]], data: st.DataObject
) -> None:
    """COMPLETE: when taking every candidate in order (skip rule included) makes room, or
    every priority candidate alone does, Reclaim is satisfiable. MINIMAL: its victims make
    room, and putting back any one of them leaves a set that does not."""
    scopes, running, capacity = world
    w = workload(data.draw, scopes, "w")
    naive = World({s.id: s for s in scopes}, running, capacity)
    plan = find_victims(
        tree_of(scopes, running), {rw.workload.id: rw for rw in running}, w, capacity
    )
    short, order = candidates(naive, w)
    _, walked = walk(naive, w)  # every candidate in order, with the skip rule
    if walked is not None:
        assert plan.satisfiable
    if makes_room(naive, w, short, [c for c in order if c.reason == LOWER]):
        assert plan.satisfiable
    if not plan.satisfiable:
        return
    by_id = {c.rw.workload.id: c for c in order}
    victims = [by_id[v.workload_id] for v in plan.victims]
    assert [c.reason for c in victims] == [v.reason.value for v in plan.victims]
    assert makes_room(naive, w, short, victims)
    for i in range(len(victims)):
        assert not makes_room(naive, w, short, victims[:i] + victims[i + 1 :])


@SETTINGS
@given(world=worlds(), data=st.data())
def test_admit_agrees_with_dry_run_reclaim(
    world: tuple[list[Scope], list[RunningWorkload], dict[str, int]], data: st.DataObject
) -> None:
    """For a workload that does not fit, Admit says NEEDS_RECLAIM exactly when Reclaim is
    satisfiable, with the same victims, LIMIT_EXCEEDED first when a limit fails; one that fits
    is ADMITTED and Reclaim is satisfiable with no victims."""
    scopes, running, capacity = world
    w = workload(data.draw, scopes, "w")
    tree = tree_of(scopes, running)
    by_id = {rw.workload.id: rw for rw in running}
    result = decide_admit(tree, by_id, w, capacity)
    plan = find_victims(tree, by_id, w, capacity)
    assert plan.satisfiable is (result.decision is not Decision.DENIED)
    assert result.victims == plan.victims
    if result.decision is Decision.ADMITTED:
        assert plan.victims == ()
    else:
        assert (result.reasons[0].code == ReasonCode.LIMIT_EXCEEDED) is plan.limited
    if result.decision is Decision.NEEDS_RECLAIM:
        assert plan.victims
