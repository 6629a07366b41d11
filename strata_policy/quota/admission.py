"""Admit (DESIGN §2): the full decision for one workload, as a value.

1. **Fits**: within every limit on the path and the headroom → ADMITTED, with what is
   borrowed (``check.admissible``, no reasons built: most decisions).
2. Otherwise a dry-run ``find_victims``, so that Admit and Reclaim agree: satisfiable →
   NEEDS_RECLAIM listing exactly the dry run's victims; not satisfiable → DENIED.
   - **Limit**: when a limit on the path fails, the dry run only looks at lower-priority work
     inside the limiting scope. Its reasons start with the LIMIT_EXCEEDED ones (then any
     NO_HEADROOM), for NEEDS_RECLAIM as for DENIED.
   - **Headroom**: the reasons are the NO_HEADROOM ones that made reclaim necessary.
   A DENIED answer ends with the NO_VICTIMS reason saying what no victim set could free.
   ``borrowed`` of a NEEDS_RECLAIM is what ``w`` would borrow once the victims are gone.

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
from strata_policy.quota.tree import QuotaTree
from strata_policy.quota.victims import FitsAfter, find_victims

__all__ = ["AdmitCheck", "check_admit", "decide_admit"]


def decide_admit(
    tree: QuotaTree,
    running: Mapping[str, RunningWorkload],
    workload: Workload,
    capacity: Resources,
    *,
    fits_after: FitsAfter | None = None,
) -> WorkloadResult:
    """ADMITTED / NEEDS_RECLAIM / DENIED for ``workload`` (see the module docstring).

    ``running`` holds every workload that holds quota (the reclaim dry run picks victims from
    it); ``capacity`` is the sum of schedulable capacity; ``fits_after`` is passed to the dry
    run when placement must also succeed. The caller commits an ADMITTED result by charging
    the tree. Raises ``InvalidArgument`` for an unknown scope.
    """
    borrowed = admissible(tree, tree.path(workload.scope_id), requested(workload), capacity)
    if borrowed is not None:  # most decisions: the result built through its slots
        return new_result(workload.id, Decision.ADMITTED, (), borrowed, 0.0)
    check = check_admit(tree, workload, capacity)
    why = (*check.limit_reasons, *check.headroom_reasons)
    plan = find_victims(tree, running, workload, capacity, fits_after=fits_after)
    if plan.satisfiable:
        return WorkloadResult(
            workload.id,
            Decision.NEEDS_RECLAIM,
            reasons=why,
            borrowed=dict(plan.borrowed),
            victims=plan.victims,
        )
    none = tuple(r for r in plan.reasons if r.code == ReasonCode.NO_VICTIMS)
    return WorkloadResult(workload.id, Decision.DENIED, reasons=(*why, *none))
