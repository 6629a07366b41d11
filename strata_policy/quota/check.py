"""The admit check of DESIGN §2: limits on the path, headroom at the root, what is borrowed.

Pure reads of a ``QuotaTree``; no decision is taken here (``admission.decide_admit`` takes it,
``reclaim.find_victims`` re-runs the fast form ``shortfall`` after every simulated eviction).

Interpretations written down:

- **Limits are checked on the resources the workload requests** (``q[r] > 0``). A scope whose
  usage of ``r`` is already above a lowered limit does not stop a workload that asks for no
  ``r``: admitting it cannot make that limit worse.
- **The blocking scope** is the *deepest* scope on the path whose limit fails, or ``s`` itself
  when no limit fails. Freeing room below the deepest failing limit also frees it at every
  failing ancestor, while room freed elsewhere in an ancestor's subtree cannot fix the deeper
  limit; so the deepest one is where priority candidates must come from.
- **Headroom** is ``free[r] = capacity[r] − usage(root)[r]``; ``short[r] = q[r] − free[r]`` for
  each requested ``r`` with ``q[r] > free[r]`` (free may be negative once nodes go
  unschedulable; ``short`` then counts the whole gap, the reason shows ``available`` as 0).
- **Borrowed** is ``q[r]`` minus the part of it covered by the idle effective guarantee ``G`` of
  *every* scope on the path (``QuotaTree.effective_guarantee``: a scope that sets none covers
  what its children are guaranteed). This is exactly the part of ``w`` that Reclaim could later
  take back from some level of its path: where ``w`` is covered at every level, its branch is
  within ``G`` at every level, so it is no reclaim candidate for any other scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from strata_policy.model import Reason, ReasonCode, Workload
from strata_policy.model.resources import Resources, format_amount
from strata_policy.quota.tree import QuotaTree


@dataclass(frozen=True, slots=True)
class AdmitCheck:
    """Where a workload stands against quota right now; a value, not a decision.

    ``limit_reasons``: one LIMIT_EXCEEDED per failing (scope, resource), path order (the scope
    first) then resource name. ``headroom_reasons``: one NO_HEADROOM per short resource, by name.
    ``short``: resource → headroom missing. ``borrowed``: resource → the part of ``q`` not covered
    by every guarantee on the path. ``blocking_scope``: the deepest failing limit's scope, else
    the workload's own scope.
    """

    blocking_scope: str
    limit_reasons: tuple[Reason, ...] = ()
    headroom_reasons: tuple[Reason, ...] = ()
    short: Mapping[str, int] = field(default_factory=dict)
    borrowed: Mapping[str, int] = field(default_factory=dict)

    @property
    def within_limits(self) -> bool:
        """No limit on the path would be exceeded."""
        return not self.limit_reasons

    @property
    def fits(self) -> bool:
        """Admissible now: within every limit and nothing short of headroom."""
        return not self.limit_reasons and not self.short


def check_admit(tree: QuotaTree, workload: Workload, capacity: Resources) -> AdmitCheck:
    """Check ``workload`` against limits, headroom and guarantees; reads the tree only.

    ``capacity`` is the sum of the capacity of schedulable nodes. Raises ``InvalidArgument``
    when the workload's scope is unknown.
    """
    path = workload_path(tree, workload)
    q = requested(workload)
    limit_reasons: list[Reason] = []
    blocking = workload.scope_id
    for sid in path:
        limit = tree.scopes[sid].limit
        usage = tree.usage(sid)
        for r in sorted(q):
            if r in limit and usage.get(r, 0) + q[r] > limit[r]:
                if not limit_reasons:
                    blocking = sid  # the path starts at s: the first failure is the deepest
                limit_reasons.append(_limit_reason(sid, r, usage.get(r, 0), limit[r], q[r]))
    root = tree.total_usage()
    short: dict[str, int] = {}
    headroom: list[Reason] = []
    for r in sorted(q):
        free = capacity.get(r, 0) - root.get(r, 0)
        if q[r] > free:
            short[r] = q[r] - free
            headroom.append(_headroom_reason(r, free, q[r]))
    return AdmitCheck(
        blocking_scope=blocking,
        limit_reasons=tuple(limit_reasons),
        headroom_reasons=tuple(headroom),
        short=short,
        borrowed=borrowed_part(tree, path, q),
    )


def shortfall(
    tree: QuotaTree, path: tuple[str, ...], q: Mapping[str, int], capacity: Resources
) -> frozenset[str]:
    """Resources that stop admission now (a failing limit on ``path`` or missing headroom).

    The message-free form of ``check_admit`` for loops: empty means admissible.
    """
    out: set[str] = set()
    root = tree.total_usage()
    for r, amount in q.items():
        if amount > capacity.get(r, 0) - root.get(r, 0):
            out.add(r)
    for sid in path:
        limit = tree.scopes[sid].limit
        if not limit:
            continue
        usage = tree.usage(sid)
        for r, amount in q.items():
            if r in limit and usage.get(r, 0) + amount > limit[r]:
                out.add(r)
    return frozenset(out)


def admissible(
    tree: QuotaTree, path: tuple[str, ...], q: Mapping[str, int], capacity: Resources
) -> dict[str, int] | None:
    """``check_admit``'s pass case without building reasons: what ``q`` borrows when it fits
    now (within every limit on ``path`` and the headroom: ``shortfall`` is empty), else None.

    Equal to ``check_admit(...).borrowed`` whenever ``check_admit(...).fits``; ``None`` sends
    the caller to ``check_admit`` for the reasons. Most decisions pass, so they skip them.
    """
    root = tree.total_usage()
    for r, amount in q.items():
        if amount > capacity.get(r, 0) - root.get(r, 0):
            return None
    scopes, usages = tree.scopes, tree.usages
    for sid in path:  # ``shortfall``'s limit check, stopping at the first failure
        limit = scopes[sid].limit
        if limit:
            usage = usages[sid]
            for r, amount in q.items():
                if r in limit and usage.get(r, 0) + amount > limit[r]:
                    return None
    return borrowed_part(tree, path, q)


def borrowed_part(tree: QuotaTree, path: tuple[str, ...], q: Mapping[str, int]) -> dict[str, int]:
    """The part of ``q`` not covered by the idle effective guarantee of every scope on ``path``."""
    out: dict[str, int] = {}
    effective, usages = tree.effective_guarantees, tree.usages
    for r, amount in sorted(q.items()):
        covered = amount  # min(amount, max(idle, 0) of each scope), stopping at 0
        for sid in path:
            guaranteed = effective[sid].get(r, 0)
            if not guaranteed:  # no guarantee here (the commonest case): all of it borrowed
                covered = 0
                break
            idle = guaranteed - usages[sid].get(r, 0)
            if idle < covered:
                covered = idle if idle > 0 else 0
                if not covered:
                    break
        if amount > covered:
            out[r] = amount - covered
    return out


def workload_path(tree: QuotaTree, workload: Workload) -> tuple[str, ...]:
    """The workload's scope path; ``InvalidArgument`` naming ``scope_id`` when unknown."""
    return tree.path(workload.scope_id)


def requested(workload: Workload) -> dict[str, int]:
    """``q``: the workload's total (request × replicas) without zero entries."""
    replicas, request = workload.replicas, workload.request
    if replicas == 1 and min(request.values(), default=1) > 0:  # a copy, without a loop
        return dict(request)
    return {r: a * replicas for r, a in request.items() if a > 0}


def _limit_reason(scope_id: str, r: str, usage: int, limit: int, request: int) -> Reason:
    return Reason(
        code=ReasonCode.LIMIT_EXCEEDED,
        message=(
            f"scope {scope_id!r} limits {r} to {format_amount(r, limit)}: usage "
            f"{format_amount(r, usage)} + request {format_amount(r, request)} would exceed it"
        ),
        scope_id=scope_id,
        resource=r,
        usage=usage,
        limit=limit,
        request=request,
    )


def _headroom_reason(r: str, free: int, request: int) -> Reason:
    available = max(free, 0)
    return Reason(
        code=ReasonCode.NO_HEADROOM,
        message=(
            f"cluster has {format_amount(r, available)} of {r} free, the workload needs "
            f"{format_amount(r, request)}"
        ),
        resource=r,
        request=request,
        available=available,
    )
