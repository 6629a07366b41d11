"""Place's workloads decided and placed one at a time: the plain path (``place_admitted``,
``admit_and_place_one``: a small batch, a FAIR one, one with ids) and the batch lane's chunks
decided one by one (``decide_and_place``: ``engine.place``'s module docstring), whose answers
and state are exactly the plain path's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from strata_policy.model import (
    Decision,
    Reason,
    ReasonCode,
    RunningWorkload,
    Workload,
    WorkloadResult,
)
from strata_policy.placement.place import PlacementOptions, place_batch, place_one
from strata_policy.quota import decide_admit
from strata_policy.state.cluster import ClusterState


def place_admitted(state: ClusterState, w: Workload, options: PlacementOptions) -> WorkloadResult:
    """Place a workload already admitted (named by id): PLACED with its placements (set on the
    state), PLACED with ALREADY_PLACED when it holds nodes already, or UNPLACED with the reasons
    (it stays ADMITTED)."""
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


def admit_and_place_one(
    state: ClusterState, w: Workload, options: PlacementOptions, now_ms: int
) -> WorkloadResult:
    """Decide ``w``'s quota and place it: the denial as decided, PLACED (held by the state
    from ``now_ms``), or UNPLACED when it fits the quota but no nodes (then not admitted)."""
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


def decide_and_place(
    state: ClusterState,
    workloads: Sequence[Workload],
    indexes: list[int],
    options: PlacementOptions,
    now_ms: int,
    results: list[WorkloadResult],
) -> tuple[int, bool]:
    """Decide a chunk one by one, place its admitted workloads in one kernel call, commit;
    returns how many workloads were done and whether the chunk stopped early to redo one.

    For a chunk: decide quota one by one (charging the admitted to the tree), then
    ``place_batch`` the admitted ones in one call (each all or nothing; one that does not fit
    allocates nothing). Then replay the chunk exactly: refund the charges and walk the decisions
    again, committing the kernel's placements. Up to the first unplaced workload the decisions
    are exact by construction. After it, each decision is taken again without that workload's
    charge; while it comes out the same, the kernel's placement for it is exact too (the same
    workloads before it hold the same nodes). At the first one that differs, the chunk stops
    there and the next chunk starts with it, smaller (see ``_decide_chunk`` for where a chunk's
    deciding stops). Chunks double while nothing is redone, so a batch costs a few kernel calls
    plus at most two quota decisions per workload.
    """
    decisions: list[WorkloadResult] = []
    admitted: list[Workload] = []
    try:
        indexes = _decide_chunk(state, workloads, indexes, decisions, admitted)
        outcomes = place_batch(state.matrix, admitted, options)
    finally:
        for w in reversed(admitted):  # the charges were only for deciding the chunk
            state.tree.refund(w.scope_id, w.total)
    placed = iter(outcomes)
    unplaced_before = False
    done = 0
    for decision, i in zip(decisions, indexes, strict=True):
        w = workloads[i]
        if (
            unplaced_before
            and decide_admit(state.tree, state.workloads, w, state.capacity) != decision
        ):
            return done, True
        done += 1
        if decision.decision is not Decision.ADMITTED:
            results.append(decision)
            continue
        outcome = next(placed)
        if not outcome.placed:
            unplaced_before = True
            results.append(
                replace(
                    decision,
                    decision=Decision.UNPLACED,
                    reasons=outcome.reasons,
                    explanation=outcome.explanation,
                )
            )
            continue
        state.add(RunningWorkload(w, outcome.placements, now_ms))
        results.append(
            WorkloadResult(
                w.id,
                Decision.PLACED,
                placements=outcome.placements,
                borrowed=decision.borrowed,
                score=outcome.score,
            )
        )
    return done, False


def _decide_chunk(
    state: ClusterState,
    workloads: Sequence[Workload],
    indexes: list[int],
    decisions: list[WorkloadResult],
    admitted: list[Workload],
) -> list[int]:
    """Decide a chunk's quota, charging the admitted to the tree; returns the indexes decided.

    Only the tree is charged: an ADMITTED decision reads nothing else, and the chunk ends before
    a "no" that follows an admitted workload — that "no" may only be due to a workload that will
    not get nodes, so it is decided again, in the next chunk, once the kernel has said which did.
    """
    for k, i in enumerate(indexes):
        w = workloads[i]
        decision = decide_admit(state.tree, state.workloads, w, state.capacity)
        if decision.decision is not Decision.ADMITTED and admitted:
            return indexes[:k]
        decisions.append(decision)
        if decision.decision is Decision.ADMITTED:
            state.tree.charge(w.scope_id, w.total)
            admitted.append(w)
    return indexes
