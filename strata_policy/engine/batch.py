"""Admit, Place and Release batches (DESIGN §2–§3) over one cluster's state.

Admit decides each workload in the batch order (FIFO, PRIORITY or FAIR, re-evaluated after every
decision) and charges the admitted ones. Place does the same for inline workloads and then places
each admitted one (all replicas or none); an inline workload that fits the quota but no nodes is
not admitted (UNPLACED), and one placed by id that does not fit stays ADMITTED.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import replace

from strata_policy.engine import fast_place
from strata_policy.engine.fast_place import FAST_PATH_MIN
from strata_policy.engine.request_checks import check_ids, check_new_workloads
from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import (
    BatchResult,
    ColumnarBatch,
    Decision,
    Order,
    Reason,
    ReasonCode,
    ReleaseResult,
    RunningWorkload,
    Workload,
    WorkloadResult,
)
from strata_policy.placement.place import PlacementOptions, place_one
from strata_policy.quota import batch_order, decide_admit
from strata_policy.quota.groups import TaggedWorkloads, representatives
from strata_policy.state import validate
from strata_policy.state.cluster import ClusterState

__all__ = ["FAST_PATH_MIN", "admit", "place", "release"]
_ID = operator.attrgetter("id")


def admit(
    state: ClusterState,
    workloads: Sequence[Workload],
    order: Order,
    now_ms: int,
    dry_run: bool = False,
) -> Callable[[int], BatchResult]:
    """Decide a batch; ADMITTED ones are charged to the tree (no nodes).

    In a dry run the last decision is not applied: nothing after it could see it, and the
    transaction would undo it anyway (this keeps a one-workload dry run free of writes).
    """
    check_new_workloads(state, workloads, "workloads")
    results: list[WorkloadResult] = []
    last = len(workloads) - 1
    indexes = (0,) if last == 0 else batch_order(state.tree, workloads, order, state.capacity)
    for i in indexes:
        w = workloads[i]
        result = decide_admit(state.tree, state.workloads, w, state.capacity)
        if result.decision is Decision.ADMITTED and not (dry_run and len(results) == last):
            state.add(RunningWorkload(w, (), now_ms))
        results.append(result)
    return lambda generation: BatchResult(generation, tuple(results))


def place(
    state: ClusterState,
    workloads: Sequence[Workload],
    workload_ids: Sequence[str],
    order: Order,
    options: PlacementOptions,
    now_ms: int,
) -> Callable[[int], ColumnarBatch]:
    """Place admitted workloads by id, and admit-and-place inline ones, in the batch order
    (the answer's ``batch_result()`` is the ``BatchResult``; the batch lane's runs placed in
    full stay in columns)."""
    if not _tagged_plainly_valid(state, workloads):
        check_new_workloads(state, workloads, "workloads")
    check_ids(workload_ids, "workload_ids")
    known: list[Workload] = []
    bad: list[FieldViolation] = []
    for i, wid in enumerate(dict.fromkeys(workload_ids)):
        if wid not in state.workloads:
            bad.append(FieldViolation(f"workload_ids[{i}]", f"workload {wid!r} is not admitted"))
        else:
            known.append(state.workloads[wid].workload)
    if bad:
        raise InvalidArgument(bad)
    batch = [*known, *workloads]
    admitted = len(known)
    options = _with_mix(state, options)
    if not known and order is not Order.FAIR and len(workloads) >= FAST_PATH_MIN:
        parts = tuple(fast_place.admit_and_place(state, workloads, order, options, now_ms))
        return lambda generation: ColumnarBatch(generation, parts)
    results: list[WorkloadResult] = []
    for i in batch_order(state.tree, batch, order, state.capacity):
        w = batch[i]
        if i < admitted:
            results.append(_place_admitted(state, w, options))
        else:
            results.append(_admit_and_place(state, w, options, now_ms))
    return lambda generation: ColumnarBatch(generation, (tuple(results),))


def _tagged_plainly_valid(state: ClusterState, workloads: Sequence[Workload]) -> bool:
    """True only when ``check_new_workloads`` would find nothing, asked of a
    ``TaggedWorkloads`` batch (False for any other: it is checked as usual).

    The ids are checked for the whole batch (distinct, new to the cluster, of a valid length:
    ``validate.workloads_plainly_valid``'s id rules), the other fields only for the first
    workload of each distinct tag (``quota.groups.representatives``): a tag's workloads differ
    from it only in id and ``queued_at_ms``, which no rule but the id's reads."""
    if not isinstance(workloads, TaggedWorkloads) or len(workloads) < 2:
        return False
    ids = list(map(_ID, workloads))
    if len(set(ids)) != len(ids) or not state.workloads.keys().isdisjoint(ids):
        return False
    lengths = list(map(len, ids))
    if min(lengths) < 1 or max(lengths) > validate.MAX_ID_LENGTH:
        return False
    firsts = [workloads[i] for i in representatives(workloads.tags)]
    return validate.workloads_plainly_valid(firsts, state.tree.scopes, state.workloads)


def _with_mix(state: ClusterState, options: PlacementOptions) -> PlacementOptions:
    if options.task_mix is None and not options.task_types:
        return replace(options, task_mix=state.task_mix)
    return options


def _place_admitted(state: ClusterState, w: Workload, options: PlacementOptions) -> WorkloadResult:
    current = state.workloads[w.id]
    if current.placed:
        return WorkloadResult(
            w.id,
            Decision.PLACED,
            placements=current.placements,
            reasons=(Reason(ReasonCode.ALREADY_PLACED, f"workload {w.id!r} was already placed"),),
        )
    outcome = place_one(state.matrix, w, options)
    if not outcome.placed:
        return WorkloadResult(
            w.id, Decision.UNPLACED, reasons=outcome.reasons, explanation=outcome.explanation
        )
    state.set_placements(w.id, outcome.placements)
    return WorkloadResult(w.id, Decision.PLACED, placements=outcome.placements, score=outcome.score)


def _admit_and_place(
    state: ClusterState, w: Workload, options: PlacementOptions, now_ms: int
) -> WorkloadResult:
    decision = decide_admit(state.tree, state.workloads, w, state.capacity)
    if decision.decision is not Decision.ADMITTED:
        return decision
    outcome = place_one(state.matrix, w, options)
    if not outcome.placed:
        return replace(
            decision,
            decision=Decision.UNPLACED,
            reasons=outcome.reasons,
            explanation=outcome.explanation,
        )
    state.add(RunningWorkload(w, outcome.placements, now_ms))
    return replace(
        decision, decision=Decision.PLACED, placements=outcome.placements, score=outcome.score
    )


def release(state: ClusterState, workload_ids: Sequence[str]) -> Callable[[int], ReleaseResult]:
    """Free each known workload once; unknown (and repeated) ids are listed as not found."""
    check_ids(workload_ids, "workload_ids")
    released: list[str] = []
    not_found: list[str] = []
    for wid in workload_ids:
        if wid in state.workloads:
            state.remove(wid)
            released.append(wid)
        else:
            not_found.append(wid)
    return lambda generation: ReleaseResult(generation, tuple(released), tuple(not_found))
