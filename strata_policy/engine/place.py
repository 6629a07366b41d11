"""The Place use case (DESIGN §3): place admitted workloads by id, and admit-and-place inline ones.

Workloads are taken in the batch order (FIFO, PRIORITY or FAIR); each admitted one is placed
with all its replicas or none. An inline workload that fits the quota but no nodes is not
admitted (UNPLACED); one placed by id that does not fit stays ADMITTED. A big FIFO or PRIORITY
batch of inline workloads goes through the batch lane (``engine.fast_place``), with the same
answers and state; the rest are decided and placed one at a time here.

A batch may come with ``tags`` (the Place request decoder's, ``service.place_request_decoder``):
``tags[i]`` is workload ``i``'s, and workloads whose tags are the same object are equal in every
field but ``id`` and ``queued_at_ms``. The lane groups such a batch by tag
(``quota.groups.group_tagged``) and checks one workload per tag
(``state.request_checks.tagged_plainly_valid``), instead of reading every workload's fields;
the answers are the same as without tags.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from strata_policy.engine import fast_place
from strata_policy.engine.commit import Committer, body_digest
from strata_policy.engine.fast_place import FAST_PATH_MIN
from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import (
    ColumnarBatch,
    Decision,
    Order,
    Reason,
    ReasonCode,
    RunningWorkload,
    Workload,
    WorkloadResult,
)
from strata_policy.placement.place import PlacementOptions, place_one
from strata_policy.quota import batch_order, decide_admit
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import (
    check_ids,
    check_new_workloads,
    check_options,
    replicas,
)

__all__ = ["FAST_PATH_MIN", "place"]


def place(
    c: Committer,
    cluster_id: str,
    workloads: Sequence[Workload],
    workload_ids: Sequence[str],
    *,
    tags: Sequence[object] | None,
    order: Order,
    options: PlacementOptions,
    dry_run: bool,
    expected_generation: int,
    request_id: str,
    now_ms: int,
    caller: str,
    given_digest: bytes,
) -> ColumnarBatch:
    """Place on the cluster and commit (unless a dry run); the answer in columns
    (``model.columns``: a run the lane placed in full is never turned into values)."""
    c.limits.check_batch(len(workloads) + len(workload_ids), replicas(workloads))
    check_options(options)
    if tags is not None and len(tags) != len(workloads):
        raise ValueError(f"{len(tags)} tags for {len(workloads)} workloads")
    result = c.mutate(
        cluster_id,
        "place",
        request_id,
        expected_generation,
        dry_run,
        lambda state: compute(
            state, workloads, workload_ids, order, options, now_ms or c.clock(), tags
        ),
        caller=caller,
        digest=body_digest(
            request_id,
            dry_run,
            given_digest,
            lambda: (
                "place",
                tuple(workloads),
                tuple(workload_ids),
                order,
                options,
                expected_generation,
                now_ms,
            ),
        ),
    )
    if c.observer is not None:
        c.observer.observe_results(
            "Place", result.held_as_values(), placed=result.placed_in_columns()
        )
    return result


def compute(
    state: ClusterState,
    workloads: Sequence[Workload],
    workload_ids: Sequence[str],
    order: Order,
    options: PlacementOptions,
    now_ms: int,
    tags: Sequence[object] | None = None,
) -> Callable[[int], ColumnarBatch]:
    """Place admitted workloads by id, and admit-and-place inline ones, in the batch order
    (the answer's ``batch_result()`` is the ``BatchResult``; the batch lane's runs placed in
    full stay in columns). ``tags``: see the module docstring."""
    check_new_workloads(state, workloads, "workloads", tags)
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
        parts = tuple(fast_place.admit_and_place(state, workloads, order, options, now_ms, tags))
        return lambda generation: ColumnarBatch(generation, parts)
    results: list[WorkloadResult] = []
    for i in batch_order(state.tree, batch, order, state.capacity):
        w = batch[i]
        if i < admitted:
            results.append(_place_admitted(state, w, options))
        else:
            results.append(_admit_and_place(state, w, options, now_ms))
    return lambda generation: ColumnarBatch(generation, (tuple(results),))


def _with_mix(state: ClusterState, options: PlacementOptions) -> PlacementOptions:
    """FGD measures against the cluster's task mix unless the request names its own."""
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
