"""Admission (DESIGN §2 Admit): limits, headroom, borrowed under G, NEEDS_RECLAIM, purity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from strata_policy.errors import InvalidArgument
from strata_policy.model import Decision, ReasonCode, RunningWorkload, Scope, Workload
from strata_policy.quota import QuotaTree, check_admit, decide_admit
from strata_policy.testing import resources, running, scope, workload

CAPACITY = resources(cpu=64, gpu_milli=16000)
ORG = [
    scope("org", guarantee=resources(gpu_milli=16000), limit=resources(gpu_milli=12000)),
    scope("team-a", parent="org", guarantee=resources(gpu_milli=8000)),
    scope("team-b", parent="org", guarantee=resources(gpu_milli=8000)),
    scope("proj-x", parent="team-a", guarantee=resources(gpu_milli=8000)),
]
GPU64 = resources(cpu=512, gpu_milli=64000)


def cluster(
    scopes: Sequence[Scope], holding: Sequence[RunningWorkload]
) -> tuple[QuotaTree, dict[str, RunningWorkload]]:
    """A tree charged with ``holding`` and the running map the engine would pass."""
    tree = QuotaTree.build(scopes)
    for rw in holding:
        tree.charge(rw.workload.scope_id, rw.workload.total)
    return tree, {rw.workload.id: rw for rw in holding}


def gpus(wid: str, sid: str, n: int, *, priority: int = 0) -> Workload:
    """A workload asking for ``n`` whole GPUs."""
    return workload(wid, sid, gpu_milli=1000 * n, priority=priority)


@dataclass(frozen=True, slots=True)
class Case:
    """One Admit scenario and its expected outcome."""

    scopes: Sequence[Scope]
    holding: Sequence[RunningWorkload]
    pending: Workload
    decision: Decision
    codes: list[str]
    borrowed: dict[str, int]


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            Case(ORG, [], gpus("w", "proj-x", 4), Decision.ADMITTED, [], {}), id="within quota"
        ),
        pytest.param(
            Case(
                ORG,
                [running(gpus("old", "team-b", 10))],
                gpus("w", "proj-x", 4),
                Decision.DENIED,
                [ReasonCode.LIMIT_EXCEEDED, ReasonCode.NO_VICTIMS],
                {},
            ),
            id="ancestor limit stops a grandchild: nothing of lower priority inside it",
        ),
        pytest.param(
            Case(
                ORG,
                [running(gpus("low", "team-b", 10, priority=-1))],
                gpus("w", "proj-x", 4),
                Decision.NEEDS_RECLAIM,
                [ReasonCode.LIMIT_EXCEEDED],
                {},
            ),
            id="limit: lower-priority work inside the limiting scope makes way, NEEDS_RECLAIM",
        ),
        pytest.param(
            Case(
                [scope("a", limit=resources(gpu_milli=8000)), scope("b")],
                [running(gpus("lo", "a", 6, priority=-1)), running(gpus("b1", "b", 8))],
                gpus("w", "a", 4),
                Decision.NEEDS_RECLAIM,
                [ReasonCode.LIMIT_EXCEEDED, ReasonCode.NO_HEADROOM],
                {"gpu": 4000},
            ),
            id="limit and headroom both short: one victim inside the limit frees both",
        ),
        pytest.param(
            Case(
                [scope("root"), scope("team-a", parent="root", guarantee=GPU64)],
                [running(gpus("x", "root", 4))],
                gpus("w", "team-a", 8),
                Decision.ADMITTED,
                [],
                {},
            ),
            id="openb: a team guaranteed under an ungoverned root borrows nothing within it",
        ),
        pytest.param(
            Case(
                [
                    scope("root"),
                    scope("team-a", parent="root", guarantee=resources(gpu_milli=6000)),
                ],
                [],
                gpus("w", "team-a", 8),
                Decision.ADMITTED,
                [],
                {"gpu": 2000},
            ),
            id="openb: only the part above the team's guarantee is borrowed",
        ),
        pytest.param(
            Case([scope("free")], [], gpus("w", "free", 16), Decision.ADMITTED, [], {"gpu": 16000}),
            id="nil guarantee and limit: ungoverned, all borrowed",
        ),
        pytest.param(
            Case(
                [scope("a"), scope("b")],
                [running(gpus("old", "a", 14))],
                gpus("w", "b", 4),
                Decision.DENIED,
                [ReasonCode.NO_HEADROOM, ReasonCode.NO_VICTIMS],
                {},
            ),
            id="headroom stops a borrower",
        ),
        pytest.param(
            Case(
                [scope("a"), scope("b", guarantee=resources(gpu_milli=8000))],
                [running(gpus("old", "a", 14))],
                gpus("w", "b", 4),
                Decision.NEEDS_RECLAIM,
                [ReasonCode.NO_HEADROOM],
                {},
            ),
            id="guaranteed scope needs reclaim while a borrower holds its room",
        ),
        pytest.param(
            Case(
                ORG,
                [running(gpus("old", "team-b", 6))],
                gpus("w", "team-a", 4),
                Decision.ADMITTED,
                [],
                {},
            ),
            id="sibling over guarantee does not make a claimant borrow",
        ),
        pytest.param(
            Case(
                [scope("org", guarantee=resources(gpu_milli=4000)), scope("t", parent="org")],
                [],
                gpus("w", "t", 2),
                Decision.ADMITTED,
                [],
                {"gpu": 2000},
            ),
            id="a scope on the path guaranteeing nothing: all borrowed",
        ),
        pytest.param(
            Case(
                [
                    scope("org", guarantee=resources(gpu_milli=4000)),
                    scope("t", parent="org", guarantee=resources(gpu_milli=8000)),
                ],
                [],
                gpus("w", "t", 6),
                Decision.ADMITTED,
                [],
                {"gpu": 2000},
            ),
            id="borrowed: the part above the smallest idle guarantee",
        ),
    ],
)
def test_decide_admit(case: Case) -> None:
    """Each DESIGN §2 Admit outcome, with its reason codes and what is borrowed."""
    tree, run = cluster(case.scopes, case.holding)
    result = decide_admit(tree, run, case.pending, CAPACITY)
    assert result.decision is case.decision
    assert [r.code for r in result.reasons] == case.codes
    assert dict(result.borrowed) == case.borrowed


def test_admitted_usage_rises_up_the_tree() -> None:
    """Committing an admission (charge) raises usage at the scope and every ancestor."""
    tree, run = cluster(ORG, [])
    w = gpus("w", "proj-x", 4)
    assert decide_admit(tree, run, w, CAPACITY).decision is Decision.ADMITTED
    tree.charge(w.scope_id, w.total)
    for sid in ("proj-x", "team-a", "org"):
        assert dict(tree.usage(sid)) == {"gpu": 4000}
    assert dict(tree.usage("team-b")) == {}


def test_limit_reason_names_scope_resource_and_amounts() -> None:
    """LIMIT_EXCEEDED names the limiting scope, the resource, usage, limit and request."""
    tree, _ = cluster(ORG, [running(gpus("old", "team-b", 10))])
    check = check_admit(tree, gpus("w", "proj-x", 4), CAPACITY)
    (reason,) = check.limit_reasons
    assert (reason.scope_id, reason.resource) == ("org", "gpu")
    assert (reason.usage, reason.limit, reason.request) == (10000, 12000, 4000)
    assert "org" in reason.message
    assert check.blocking_scope == "org"
    assert not check.within_limits


def test_blocking_scope_is_the_deepest_failing_limit() -> None:
    """With limits failing at a team and its org, the team (deepest) blocks."""
    scopes = [
        scope("org", limit=resources(cpu=4)),
        scope("team", parent="org", limit=resources(cpu=2)),
    ]
    tree, _ = cluster(scopes, [])
    check = check_admit(tree, workload("w", "team", cpu=8), CAPACITY)
    assert [r.scope_id for r in check.limit_reasons] == ["team", "org"]
    assert check.blocking_scope == "team"


def test_no_headroom_reason_reports_available_and_request() -> None:
    """NO_HEADROOM carries the free amount and the request; short holds the gap."""
    tree, _ = cluster([scope("a")], [running(gpus("old", "a", 14))])
    check = check_admit(tree, gpus("w", "a", 4), CAPACITY)
    (reason,) = check.headroom_reasons
    assert (reason.resource, reason.available, reason.request) == ("gpu", 2000, 4000)
    assert dict(check.short) == {"gpu": 2000}
    assert check.within_limits
    assert not check.fits


def test_limit_on_an_unrequested_resource_does_not_block() -> None:
    """A scope over a lowered cpu limit still admits a gpu-only workload."""
    tree, _ = cluster([scope("a", limit=resources(cpu=1))], [])
    tree.charge("a", resources(cpu=2))
    assert check_admit(tree, gpus("w", "a", 1), CAPACITY).fits


def test_unknown_scope_is_invalid_argument() -> None:
    """A workload naming a scope the tree does not know is a bad call, not a crash."""
    tree, run = cluster(ORG, [])
    with pytest.raises(InvalidArgument):
        decide_admit(tree, run, gpus("w", "nope", 1), CAPACITY)


def test_needs_reclaim_lists_victims_and_leaves_tree_unchanged() -> None:
    """The dry run names the borrower's workload as victim and restores every usage."""
    scopes = [scope("a"), scope("b", guarantee=resources(gpu_milli=8000))]
    tree, run = cluster(scopes, [running(gpus("old", "a", 14))])
    before = {sid: dict(tree.usage(sid)) for sid in tree.scopes}
    result = decide_admit(tree, run, gpus("w", "b", 4), CAPACITY)
    assert [v.workload_id for v in result.victims] == ["old"]
    assert {sid: dict(tree.usage(sid)) for sid in tree.scopes} == before
    assert dict(tree.total_usage()) == {"gpu": 14000}
