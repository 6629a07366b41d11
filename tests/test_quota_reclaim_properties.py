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
    running workloads, and a capacity they fill but for a little slack, so that pending work
    is often short and Reclaim has to choose."""
    scopes: list[Scope] = []
    for i in range(draw(st.integers(2, 6))):  # two top-level branches at least
        parent = draw(st.sampled_from(["", *(s.id for s in scopes)])) if i > 1 else ""
        both = st.fixed_dictionaries({r: st.integers(0, 10) for r in RESOURCES})
        guarantee = draw(st.one_of(st.just({}), amounts(10), both, both))
        limit = draw(st.one_of(st.just({}), st.just({}), amounts(16)))
        limit = {r: max(a, guarantee.get(r, 0)) for r, a in limit.items()}
        scopes.append(Scope(f"s{i}", parent, "", guarantee, limit))
    running = [
        RunningWorkload(workload(draw, scopes, f"v{n}"), admitted_at_ms=draw(st.integers(0, 3)))
        for n in range(draw(st.integers(1, 10)))
    ]
    used = {r: sum(rw.workload.total.get(r, 0) for rw in running) for r in RESOURCES}
    slack = draw(st.fixed_dictionaries({r: st.integers(0, 2) for r in RESOURCES}))
    return scopes, running, {r: used[r] + slack[r] for r in RESOURCES}  # full, or nearly


@st.composite
def contested(draw: st.DrawFn) -> tuple[list[Scope], list[RunningWorkload], dict[str, int]]:
    """A claimant branch ``c`` (guaranteed, maybe limited, maybe with a guaranteed team
    ``ct``) beside a lender branch ``l`` (no guarantee, maybe a team ``lt``) and another
    guaranteed ``o``, all holding work in a full cluster: the shapes where the claimant rule,
    the skip rule and a limit's priority candidates bite."""
    both = st.fixed_dictionaries({r: st.integers(0, 10) for r in RESOURCES})
    guarantee = draw(both)
    limit = draw(st.one_of(st.just({}), amounts(12)))
    scopes = [
        Scope("c", "", "", guarantee, {r: max(a, guarantee[r]) for r, a in limit.items()}),
        Scope("ct", "c", "", draw(st.one_of(st.just({}), both))),
        Scope("l", "", "", {}),
        Scope("lt", "l", "", draw(st.one_of(st.just({}), amounts(4)))),
        Scope("o", "", "", draw(both)),
    ]
    running = [
        RunningWorkload(workload(draw, scopes, f"v{n}"), admitted_at_ms=draw(st.integers(0, 3)))
        for n in range(draw(st.integers(1, 8)))
    ]
    used = {r: sum(rw.workload.total.get(r, 0) for rw in running) for r in RESOURCES}
    slack = draw(st.fixed_dictionaries({r: st.integers(0, 2) for r in RESOURCES}))
    return scopes, running, {r: used[r] + slack[r] for r in RESOURCES}


def workload(draw: st.DrawFn, scopes: list[Scope], wid: str) -> Workload:
    """A random workload in a random scope."""
    return Workload(
        id=wid,
        scope_id=draw(st.sampled_from([s.id for s in scopes])),
        request=draw(amounts(3)),
        replicas=draw(st.integers(1, 2)),
        priority=draw(st.integers(0, 3)),
        preemptible=draw(st.sampled_from([True, True, True, False])),
    )


def pending(data: st.DataObject, scopes: list[Scope]) -> Workload:
    """The workload that needs room: it asks for something, often in a guaranteed scope."""
    guaranteed = [s.id for s in scopes if s.guarantee] or [s.id for s in scopes]
    scope_id = data.draw(st.sampled_from([s.id for s in scopes] + guaranteed * 2))
    request = data.draw(
        st.dictionaries(st.sampled_from(RESOURCES), st.integers(1, 4), min_size=1, max_size=2)
    )
    return Workload("w", scope_id, request, priority=data.draw(st.integers(0, 4)))


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
@given(world=st.one_of(worlds(), contested()), data=st.data())
def test_reclaim_equals_its_naive_twin(
    world: tuple[list[Scope], list[RunningWorkload], dict[str, int]], data: st.DataObject
) -> None:
    """find_victims gives the naive twin's answer: satisfiable or not, same victims, reasons."""
    scopes, running, capacity = world
    w = pending(data, scopes)
    plan = find_victims(
        tree_of(scopes, running), {rw.workload.id: rw for rw in running}, w, capacity
    )
    _, expected = walk(World({s.id: s for s in scopes}, running, capacity), w)
    assert plan.satisfiable is (expected is not None)
    got = [(v.workload_id, v.reason.value) for v in plan.victims]
    assert got == (named(expected) if expected is not None else [])


@SETTINGS
@given(world=st.one_of(worlds(), contested()), data=st.data())
def test_reclaim_is_complete_and_minimal(
    world: tuple[list[Scope], list[RunningWorkload], dict[str, int]], data: st.DataObject
) -> None:
    """COMPLETE: when taking every candidate in order (skip rule included) makes room, or
    every priority candidate alone does, Reclaim is satisfiable. MINIMAL: its victims make
    room, and putting back any one of them leaves a set that does not."""
    scopes, running, capacity = world
    w = pending(data, scopes)
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
@given(world=st.one_of(worlds(), contested()), data=st.data())
def test_admit_agrees_with_dry_run_reclaim(
    world: tuple[list[Scope], list[RunningWorkload], dict[str, int]], data: st.DataObject
) -> None:
    """For a workload that does not fit, Admit says NEEDS_RECLAIM exactly when Reclaim is
    satisfiable, with the same victims, LIMIT_EXCEEDED first when a limit fails; one that fits
    is ADMITTED and Reclaim is satisfiable with no victims."""
    scopes, running, capacity = world
    w = pending(data, scopes)
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
