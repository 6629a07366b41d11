"""Admit-and-place a big batch (FIFO or PRIORITY) with one kernel call per run of workloads.

The answers and the resulting state are exactly those of deciding and placing one workload at
a time (``engine.place._admit_and_place``); two paths get there faster:

- **Quota fast lane.** When ``quota.admit_all`` finds that no limit, guarantee or the headroom
  can bind inside a run of workloads, every workload of the run is ADMITTED (with a known
  ``borrowed``) whichever of the ones before it end up placed. The run is grouped once
  (``quota.groups``: the quota sums and the kernel rows are worked out per group), placed by
  one kernel call (``place_columns``) and committed from the kernel's columns with one
  ``ClusterState.add_many``: no per-workload quota decision, charge or refund, no
  ``PlacementOutcome`` for a placed workload, and its replicas allocated from the kernel's
  arrays. A run placed in full is answered in columns (``model.PlacedColumns``): its
  ``WorkloadResult`` values are built only for a caller that reads them (``Engine.place``),
  not for the Place RPC, which writes the columns to the wire.
- **Chunks decided one by one** (``_decide_and_place``) otherwise, with the kernel still placing
  the chunk in one call and the decisions replayed exactly (see its docstring).

Runs start as long as ``FAST_PATH_MAX`` and halve while the lane does not hold, down to
``FAST_PATH_MIN``; then one chunk is decided one by one, and the lane is tried again after it,
short, doubling while it holds. A failed lane check costs a pass over the run (sums, no
decisions), so the checks cost at most about twice the workloads placed through the lane plus
``FAST_PATH_MIN`` per chunk decided one by one.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import replace
from itertools import compress

from strata_policy.model import (
    Decision,
    Order,
    PlacedColumns,
    RunningWorkload,
    Workload,
    WorkloadResult,
)
from strata_policy.model.columns import Part
from strata_policy.placement.outputs import running_many
from strata_policy.placement.place import PlacementOptions, place_batch, place_columns
from strata_policy.quota import RunAdmitted, admit_all, batch_order, decide_admit
from strata_policy.quota.groups import Groups, group, group_tagged
from strata_policy.state.cluster import ClusterState

FAST_PATH_MIN = 32  # batches from this size place in runs through one kernel call each
FAST_PATH_MAX = 4096
_ID = operator.attrgetter("id")


def admit_and_place(
    state: ClusterState,
    workloads: Sequence[Workload],
    order: Order,
    options: PlacementOptions,
    now_ms: int,
    tags: Sequence[object] | None = None,
) -> list[Part]:
    """The results of admitting and placing ``workloads`` one by one in ``order`` (FIFO or
    PRIORITY: orders fixed before any decision), committed to ``state``, in order as parts
    (``model.columns``): a run placed in full is one ``PlacedColumns``, no values built.

    With ``tags`` (``engine.place``'s module docstring: ``tags[i]`` is workload ``i``'s), each
    run is grouped by its tags (``group_tagged``), the same groups ``group`` finds from the
    fields; without, by the fields."""
    ordered = list(batch_order(state.tree, workloads, order, state.capacity))
    parts: list[Part] = []
    results: list[WorkloadResult] = []  # values since the last part
    pos, chunk, lane = 0, FAST_PATH_MIN, FAST_PATH_MAX
    while pos < len(ordered):
        window = ordered[pos : pos + lane]
        run = [workloads[i] for i in window]
        groups = (
            group(run) if tags is None else group_tagged(run, list(map(tags.__getitem__, window)))
        )
        admitted = admit_all(state.tree, run, state.capacity, groups)
        if admitted is not None:
            columns = _place_admitted_run(state, run, groups, admitted, options, now_ms, results)
            if columns is not None:
                if results:
                    parts.append(tuple(results))
                    results.clear()
                parts.append(columns)
            pos += len(run)
            lane = min(lane * 2, FAST_PATH_MAX)
        elif len(run) > FAST_PATH_MIN:
            lane = max(len(run) // 2, FAST_PATH_MIN)
        else:
            done, redone = _decide_and_place(
                state, workloads, ordered[pos : pos + chunk], options, now_ms, results
            )
            pos += done
            chunk = FAST_PATH_MIN if redone else min(chunk * 2, FAST_PATH_MAX)
    if results:
        parts.append(tuple(results))
    return parts


def _place_admitted_run(
    state: ClusterState,
    run: list[Workload],
    groups: Groups,
    admitted: RunAdmitted,
    options: PlacementOptions,
    now_ms: int,
    results: list[WorkloadResult],
) -> PlacedColumns | None:
    """Place a run the quota lane admitted in full; commit the placed ones, report the rest
    UNPLACED (they hold nothing, as when placed one by one).

    The kernel's columns are committed as they are: placed workloads' values are built column
    by column through their slots (``placement.outputs``) and their replicas allocated
    from the kernel's arrays (``PlacedBatch.rows``); only an unplaced workload gets a
    ``PlacementOutcome``, for its reasons. A run placed in full is answered as its columns
    (returned; no ``WorkloadResult`` built); otherwise every result is appended to
    ``results`` and None is returned."""
    batch = place_columns(state.matrix, run, options, groups)
    chosen = batch.placements
    placed = list(map(bool, chosen))
    if all(placed):
        done, lent, scores = run, admitted.borrowed, batch.scores
        taken = chosen
    else:
        done = list(compress(run, placed))
        lent = list(compress(admitted.borrowed, placed))
        scores = list(compress(batch.scores, placed))
        taken = list(compress(chosen, placed))
    rws = running_many(done, taken, now_ms)
    columns = PlacedColumns(list(map(_ID, done)), taken, lent, scores)
    charges = admitted.totals
    if len(done) == len(run):
        state.add_many(rws, charges, batch.rows)
        return columns
    charges = {sid: dict(amounts) for sid, amounts in charges.items()}
    next_placed = iter(columns.results()).__next__
    for i, w in enumerate(run):
        if placed[i]:
            results.append(next_placed())
            continue
        _uncharge(charges, w)
        outcome = batch.outcome(i)
        results.append(
            WorkloadResult(
                w.id,
                Decision.UNPLACED,
                reasons=outcome.reasons,
                borrowed=admitted.borrowed[i],
                explanation=outcome.explanation,
            )
        )
    state.add_many(rws, charges, batch.rows)
    return None


def _uncharge(charges: dict[str, dict[str, int]], w: Workload) -> None:
    """Take ``w``'s ``request × replicas`` out of its scope's sum (it was not placed)."""
    amounts = charges[w.scope_id]
    for r, a in w.request.items():
        if a > 0:
            amounts[r] -= a * w.replicas


def _decide_and_place(
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
