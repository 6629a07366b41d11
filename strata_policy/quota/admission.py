"""Admit (DESIGN §2): the full decision for one workload, as a value.

1. **Limit**: a failing limit anywhere on the path → DENIED with LIMIT_EXCEEDED reasons (a limit
   stops a workload before it starts; no reclaim is tried for it in Admit).
2. **Headroom**: everything requested fits in the schedulable capacity left → ADMITTED, with
   what is borrowed.
3. Otherwise a dry-run ``find_victims``: satisfiable → NEEDS_RECLAIM listing the victims (the
   reasons are the NO_HEADROOM ones that made reclaim necessary, and ``borrowed`` is what ``w``
   would borrow once they are gone); not satisfiable → DENIED with the NO_HEADROOM reasons
   first, then the NO_VICTIMS reason saying what no victim set could free.

Pure: the tree is read, and the dry run restores it before returning.
"""

from __future__ import annotations

from collections.abc import Mapping

from strata_policy.model import (
    Decision,
    ReasonCode,
    RunningWorkload,
    Workload,
    WorkloadResult,
    new_result,
)
from strata_policy.model.resources import Resources
from strata_policy.quota.check import AdmitCheck, admissible, check_admit, requested
from strata_policy.quota.reclaim import FitsAfter, find_victims
from strata_policy.quota.tree import QuotaTree

__all__ = ["AdmitCheck", "check_admit", "decide_admit"]


def decide_admit(
    tree: QuotaTree,
    running: Mapping[str, RunningWorkload],
    workload: Workload,
    capacity: Resources,
    *,
    fits_after: FitsAfter | None = None,
) -> WorkloadResult:
    """DENIED (limit) / ADMITTED / NEEDS_RECLAIM / DENIED (no headroom) for ``workload``.

    ``running`` holds every workload that holds quota (the reclaim dry run picks victims from
    it); ``capacity`` is the sum of schedulable capacity; ``fits_after`` is passed to the dry
    run when placement must also succeed. The caller commits an ADMITTED result by charging
    the tree. Raises ``InvalidArgument`` for an unknown scope.
    """
    borrowed = admissible(tree, tree.path(workload.scope_id), requested(workload), capacity)
    if borrowed is not None:  # most decisions: the result built through its slots
        return new_result(workload.id, Decision.ADMITTED, (), borrowed, 0.0)
    check = check_admit(tree, workload, capacity)
    if not check.within_limits:
        return WorkloadResult(workload.id, Decision.DENIED, reasons=check.limit_reasons)
    if not check.short:
        return WorkloadResult(workload.id, Decision.ADMITTED, borrowed=dict(check.borrowed))
    plan = find_victims(tree, running, workload, capacity, fits_after=fits_after)
    if plan.satisfiable:
        return WorkloadResult(
            workload.id,
            Decision.NEEDS_RECLAIM,
            reasons=check.headroom_reasons,
            borrowed=dict(plan.borrowed),
            victims=plan.victims,
        )
    why = tuple(r for r in plan.reasons if r.code == ReasonCode.NO_VICTIMS)
    return WorkloadResult(workload.id, Decision.DENIED, reasons=(*check.headroom_reasons, *why))
