"""Reclaim's documented cases (DESIGN §2 as updated by issue 14), as a table of named cases.

The claimant rule on the final state, the skip rule, two short resources, the effective
guarantee, limits; and cases restated in Strata's vocabulary from the test suites of Kueue
(``pkg/scheduler/preemption``: cohort reclaim, "preempt while borrowing"), YuniKorn (a victim
queue is not taken below its guaranteed resources) and Volcano (reclaim from an overused queue
for one within its deserved share). Capacity is per case; ``victims`` None = not satisfiable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from strata_policy.model import Decision, ReasonCode, RunningWorkload, Scope, VictimReason, Workload
from strata_policy.quota import QuotaTree, decide_admit, find_victims
from strata_policy.testing import resources, running, scope, workload

RECLAIM, LOWER = VictimReason.RECLAIM_BORROWED, VictimReason.LOWER_PRIORITY


def gpus(n: int, cpus: int = 0) -> dict[str, int]:
    """``n`` whole GPUs and ``cpus`` CPUs in base units."""
    return resources(cpu=cpus, gpu_milli=n * 1000)


def held(
    wid: str, sid: str, n: int, at_ms: int, *, cpus: int = 0, priority: int = 0
) -> RunningWorkload:
    """A running workload of ``n`` GPUs (and ``cpus`` CPUs) admitted at ``at_ms``."""
    return running(
        workload(wid, sid, cpu=cpus, gpu_milli=n * 1000, priority=priority), admitted_at_ms=at_ms
    )


def pending(sid: str, n: int, *, cpus: int = 0, priority: int = 0) -> Workload:
    """The workload that needs room."""
    return workload("w", sid, cpu=cpus, gpu_milli=n * 1000, priority=priority)


@dataclass(frozen=True, slots=True)
class Case:
    """A reclaim scenario and the victims DESIGN §2 gives (None: not satisfiable)."""

    scopes: Sequence[Scope]
    holding: Sequence[RunningWorkload]
    pending: Workload
    victims: list[tuple[str, VictimReason]] | None
    capacity: dict[str, int] = field(default_factory=lambda: gpus(16))


CASES = [
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(4)), scope("b")],
            [held("p", "a", 2, 1), held("v", "b", 6, 2)],
            pending("a", 4, priority=5),
            [("v", RECLAIM), ("p", LOWER)],
            gpus(8),
        ),
        id="kueue pair: one borrowed from another branch + one own lower-priority",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(4)), scope("b")],
            [held("p", "a", 4, 1), held("v", "b", 4, 2)],
            pending("a", 4, priority=5),
            [("p", LOWER)],
            gpus(8),
        ),
        id="own lower-priority victim alone suffices: the borrowed one is put back",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(4)), scope("b")],
            [held("p", "a", 2, 1, priority=5), held("v", "b", 6, 2)],
            pending("a", 4, priority=5),
            None,
            gpus(8),
        ),
        id="kueue: never preempt in order to borrow (own work not lower priority)",
    ),
    pytest.param(
        Case(
            [
                scope("org1"),
                scope("a", parent="org1", guarantee=gpus(4)),
                scope("b", parent="org1", guarantee=gpus(4)),
                scope("org2", guarantee=gpus(8)),
            ],
            [
                held("b2", "b", 4, 1),
                held("x2", "org2", 8, 2),
                held("b1", "b", 2, 4),
                held("x1", "org2", 2, 5),
            ],
            pending("a", 4),
            [("x1", RECLAIM), ("b1", RECLAIM)],
        ),
        id="needed candidate: org2's borrower, counted once the sibling's victim is chosen",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(4, cpus=4)), scope("b")],
            [held("v", "b", 8, 1, cpus=8)],
            pending("a", 4, cpus=6),
            None,
            gpus(8, cpus=8),
        ),
        id="two short resources: within G on gpu but not cpu reclaims nothing",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(4, cpus=4)), scope("b")],
            [held("v", "b", 8, 1, cpus=8)],
            pending("a", 4, cpus=4),
            [("v", RECLAIM)],
            gpus(8, cpus=8),
        ),
        id="two short resources: within G on both reclaims",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(4, cpus=4)), scope("b")],
            [held("p", "a", 0, 1, cpus=2), held("v", "b", 8, 2, cpus=6)],
            pending("a", 4, cpus=4, priority=3),
            [("v", RECLAIM), ("p", LOWER)],
            gpus(8, cpus=8),
        ),
        id="two short resources: own victim brings the claimant within G on cpu",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(8)), scope("b", guarantee=gpus(8))],
            [held("b2", "b", 4, 1), held("b1", "b", 6, 2)],
            pending("a", 8),
            None,
            gpus(10),
        ),
        id="yunikorn: a victim queue is never taken below its guarantee (skip rule)",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(8)), scope("b", guarantee=gpus(4))],
            [held("b1", "b", 4, 1), held("b2", "b", 4, 2), held("b3", "b", 4, 3)],
            pending("a", 8),
            [("b3", RECLAIM), ("b2", RECLAIM)],
            gpus(12),
        ),
        id="volcano: reclaim from the overused queue for one within its deserved share",
    ),
    pytest.param(
        Case(
            [
                scope("root"),
                scope("team-a", parent="root", guarantee=gpus(8, cpus=64)),
                scope("team-b", parent="root"),
                scope("other", guarantee=gpus(8)),
            ],
            [held("b1", "team-b", 4, 1), held("a1", "team-a", 8, 2)],
            pending("other", 8),
            [("b1", RECLAIM)],
        ),
        id="openb: a team within G under an ungoverned root is not a candidate",
    ),
    pytest.param(
        Case(
            [
                scope("root", guarantee=gpus(4)),
                scope("team-a", parent="root", guarantee=gpus(8)),
                scope("other", guarantee=gpus(12)),
            ],
            [held("a1", "team-a", 8, 1), held("o1", "other", 8, 2)],
            pending("other", 4),
            [("a1", RECLAIM)],
        ),
        id="oversubscribed parent: its children share less, within G or not",
    ),
    pytest.param(
        Case(
            [
                scope("org", limit=gpus(8)),
                scope("a", parent="org"),
                scope("b", parent="org"),
                scope("c"),
            ],
            [held("lo", "b", 6, 1), held("c1", "c", 10, 2)],
            pending("a", 4, priority=5),
            [("lo", LOWER)],
        ),
        id="limit: only lower-priority work inside the limiting scope, never reclaim",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(4), limit=gpus(4)), scope("b")],
            [held("a1", "a", 4, 1, priority=5), held("b1", "b", 12, 2)],
            pending("a", 2, priority=5),
            None,
        ),
        id="limit: nothing of lower priority inside it, borrowers elsewhere do not help",
    ),
    pytest.param(
        Case(
            [scope("a", guarantee=gpus(1)), scope("b")],
            [held("r", "b", 4, 1), held("p2", "a", 1, 2), held("p1", "a", 1, 3)],
            pending("a", 1, priority=5),
            [("p1", LOWER)],
            gpus(6),
        ),
        id="put-back walk repeats: returning the borrowed victim frees an own one",
    ),
]


def cluster(case: Case) -> tuple[QuotaTree, dict[str, RunningWorkload]]:
    """The tree charged with the case's running workloads, and the running map."""
    tree = QuotaTree.build(case.scopes)
    for rw in case.holding:
        tree.charge(rw.workload.scope_id, rw.workload.total)
    return tree, {rw.workload.id: rw for rw in case.holding}


@pytest.mark.parametrize("case", CASES)
def test_reclaim_case(case: Case) -> None:
    """Reclaim finds exactly DESIGN §2's victims (or none), and the tree is unchanged."""
    tree, run = cluster(case)
    before = {sid: dict(tree.usage(sid)) for sid in tree.scopes}
    plan = find_victims(tree, run, case.pending, case.capacity)
    assert {sid: dict(tree.usage(sid)) for sid in tree.scopes} == before
    if case.victims is None:
        assert (plan.satisfiable, plan.victims) == (False, ())
        assert plan.reasons[0].code == ReasonCode.NO_VICTIMS
    else:
        assert plan.satisfiable
        assert [(v.workload_id, v.reason) for v in plan.victims] == case.victims


@pytest.mark.parametrize("case", CASES)
def test_admit_agrees_with_reclaim(case: Case) -> None:
    """Admit answers NEEDS_RECLAIM with the same victims exactly when Reclaim is satisfiable."""
    tree, run = cluster(case)
    plan = find_victims(tree, run, case.pending, case.capacity)
    result = decide_admit(tree, run, case.pending, case.capacity)
    assert result.victims == plan.victims
    if case.victims is None:
        assert result.decision is Decision.DENIED
    elif case.victims:
        assert result.decision is Decision.NEEDS_RECLAIM
    codes = [r.code for r in result.reasons]
    assert (codes[:1] == [ReasonCode.LIMIT_EXCEEDED]) is plan.limited
