"""Reclaim (DESIGN §2): candidates, order, greedy walk with re-check, reverse fill-back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from strata_policy.model import ReasonCode, RunningWorkload, Scope, VictimReason, Workload
from strata_policy.quota import FitsAfter, QuotaTree, find_victims
from strata_policy.testing import resources, running, scope, workload

CAPACITY = resources(gpu_milli=16000)
RECLAIM, LOWER = VictimReason.RECLAIM_BORROWED, VictimReason.LOWER_PRIORITY


def g8() -> dict[str, int]:
    """A guarantee of 8 GPUs."""
    return resources(gpu_milli=8000)


TWO_TEAMS = [scope("a", guarantee=g8()), scope("b", guarantee=g8())]


def held(
    wid: str, sid: str, gpus: int, at_ms: int, *, priority: int = 0, preemptible: bool = True
) -> RunningWorkload:
    """A running workload of ``gpus`` whole GPUs admitted at ``at_ms``."""
    w = workload(wid, sid, gpu_milli=gpus * 1000, priority=priority, preemptible=preemptible)
    return running(w, admitted_at_ms=at_ms)


def pending(sid: str, gpus: int, priority: int = 0) -> Workload:
    """The workload that needs room."""
    return workload("w", sid, gpu_milli=gpus * 1000, priority=priority)


@dataclass(frozen=True, slots=True)
class Case:
    """A reclaim scenario; ``victims`` None means not satisfiable."""

    scopes: Sequence[Scope]
    holding: Sequence[RunningWorkload]
    pending: Workload
    victims: list[tuple[str, VictimReason]] | None


CASES = [
    pytest.param(
        Case(TWO_TEAMS, [held("a1", "a", 4, 1)], pending("b", 4), []),
        id="already fits: satisfiable, no victims",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=g8()), scope("b", guarantee=g8()), scope("c")],
            [*(held(f"a{i}", "a", 2, i) for i in range(1, 6)), held("c1", "c", 2, 0)],
            pending("b", 8),
            [("a5", RECLAIM), ("c1", RECLAIM)],
        ),
        id="borrower loses newest first, stops once back within its guarantee",
    ),
    pytest.param(
        Case(
            [scope("a"), scope("b", guarantee=g8())],
            [held("a1", "a", 2, 2), held("a2", "a", 10, 1)],
            pending("b", 8),
            [("a2", RECLAIM)],
        ),
        id="reverse fill-back returns an unneeded victim",
    ),
    pytest.param(
        Case(
            [scope("a"), scope("b", guarantee=resources(gpu_milli=4000))],
            [held("a1", "a", 14, 1)],
            pending("b", 8),
            None,
        ),
        id="claimant that would itself borrow reclaims nothing",
    ),
    pytest.param(
        Case(
            [
                scope("org1", guarantee=resources(gpu_milli=4000)),
                scope("b", parent="org1", guarantee=g8()),
                scope("org2"),
            ],
            [held("x1", "org2", 14, 1)],
            pending("b", 8),
            None,
        ),
        id="claimant borrowing at the level where the branches meet reclaims nothing",
    ),
    pytest.param(
        Case(
            [
                scope("org", guarantee=resources(gpu_milli=16000)),
                scope("a", parent="org"),
                scope("b", parent="org", guarantee=g8()),
            ],
            [held("a1", "a", 14, 1)],
            pending("b", 8),
            [("a1", RECLAIM)],
        ),
        id="siblings meet below the root: reclaim judged at their parent",
    ),
    pytest.param(
        Case(
            [scope("a"), scope("b", guarantee=g8())],
            [held("a1", "a", 14, 1, preemptible=False)],
            pending("b", 8),
            None,
        ),
        id="non-preemptible never chosen",
    ),
    pytest.param(
        Case(
            [scope("a", limit=g8())],
            [held("lo", "a", 6, 1), held("same", "a", 2, 2, priority=5)],
            pending("a", 4, priority=5),
            [("lo", LOWER)],
        ),
        id="lower-priority preemption inside one scope (limit)",
    ),
    pytest.param(
        Case(
            [scope("a")],
            [held("p1", "a", 4, 3, priority=1), held("p0", "a", 4, 1), held("q0", "a", 8, 2)],
            pending("a", 4, priority=5),
            [("q0", LOWER)],
        ),
        id="priority candidates: lowest priority, then newest, when out of headroom",
    ),
    pytest.param(
        Case(
            [scope("a", limit=g8())],
            [held("eq", "a", 8, 1, priority=5)],
            pending("a", 4, priority=5),
            None,
        ),
        id="equal priority is never preempted",
    ),
    pytest.param(
        Case(
            [scope("org", limit=g8()), scope("a", parent="org"), scope("b", parent="org")],
            [held("lo", "a", 8, 1)],
            pending("b", 4, priority=1),
            [("lo", LOWER)],
        ),
        id="limit at the parent: priority candidates from the whole limited subtree",
    ),
    pytest.param(
        Case(
            [scope("a"), scope("b", guarantee=g8())],
            [held("a1", "a", 10, 1), held("b0", "b", 4, 2)],
            pending("b", 4, priority=3),
            [("a1", RECLAIM)],
        ),
        id="reclaim candidates come before priority candidates",
    ),
]


def cluster(case: Case) -> tuple[QuotaTree, dict[str, RunningWorkload]]:
    """The tree charged with the case's running workloads, and the running map."""
    tree = QuotaTree.build(case.scopes)
    for rw in case.holding:
        tree.charge(rw.workload.scope_id, rw.workload.total)
    return tree, {rw.workload.id: rw for rw in case.holding}


def usages(tree: QuotaTree) -> dict[str, dict[str, int]]:
    """Every scope's usage, copied."""
    return {sid: dict(tree.usage(sid)) for sid in tree.scopes}


@pytest.mark.parametrize("case", CASES)
def test_find_victims(case: Case) -> None:
    """Victims, their order and reasons follow DESIGN §2; the tree is left unchanged."""
    tree, run = cluster(case)
    before = usages(tree)
    plan = find_victims(tree, run, case.pending, CAPACITY)
    assert usages(tree) == before
    if case.victims is None:
        assert not plan.satisfiable
        assert plan.victims == ()
        assert plan.reasons[0].code == ReasonCode.NO_VICTIMS
    else:
        assert plan.satisfiable
        assert [(v.workload_id, v.reason) for v in plan.victims] == case.victims


def test_victim_fields() -> None:
    """A victim names its scope and priority and frees request × replicas."""
    w = workload("big", "a", gpu_milli=4000, replicas=3, priority=-1)
    case = Case([scope("a"), scope("b", guarantee=g8())], [running(w)], pending("b", 8), None)
    tree, run = cluster(case)
    (victim,) = find_victims(tree, run, case.pending, CAPACITY).victims
    assert (victim.scope_id, victim.priority, dict(victim.freed)) == ("a", -1, {"gpu": 12000})


def test_unsatisfiable_reasons_say_what_is_short() -> None:
    """All or nothing: no victims, NO_VICTIMS naming the short resource, then NO_HEADROOM."""
    case = Case([scope("a")], [held("a1", "a", 14, 1)], pending("a", 4), None)
    tree, run = cluster(case)
    plan = find_victims(tree, run, case.pending, CAPACITY)
    assert [r.code for r in plan.reasons] == [ReasonCode.NO_VICTIMS, ReasonCode.NO_HEADROOM]
    assert plan.reasons[0].resource == "gpu"


@pytest.mark.parametrize(
    ("fits_after", "victims"),
    [
        pytest.param(lambda ids: "p1" in ids, ["p1"], id="placement needs the older victim"),
        pytest.param(lambda ids: len(ids) > 0, ["p2"], id="any eviction places it: newest only"),
        pytest.param(lambda ids: False, None, id="never placed: all or nothing"),
    ],
)
def test_fits_after_drives_the_walk(fits_after: FitsAfter, victims: list[str] | None) -> None:
    """With fits_after, the walk continues until placement succeeds, then fills back."""
    case = Case(
        [scope("a")], [held("p1", "a", 1, 1), held("p2", "a", 1, 2)], pending("a", 1, 5), None
    )
    tree, run = cluster(case)
    plan = find_victims(tree, run, case.pending, CAPACITY, fits_after=fits_after)
    assert plan.satisfiable is (victims is not None)
    assert [v.workload_id for v in plan.victims] == (victims or [])


def test_pending_workload_in_running_is_never_its_own_victim() -> None:
    """Re-deciding an admitted workload never lists itself as a victim."""
    me = workload("w", "a", gpu_milli=16000)
    tree, run = cluster(Case([scope("a")], [running(me)], me, None))
    plan = find_victims(tree, run, workload("w", "a", gpu_milli=4000, priority=9), CAPACITY)
    assert not plan.satisfiable
