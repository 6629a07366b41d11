"""The Place use case (DESIGN §3): place admitted workloads by id, and admit-and-place inline ones.

Workloads are taken in the batch order (FIFO, PRIORITY or FAIR); each admitted one is placed
with all its replicas or none. An inline workload that fits the quota but no nodes is not
admitted (UNPLACED); one placed by id that does not fit stays ADMITTED. A small batch, a FAIR
one, or one with ids is decided and placed one workload at a time
(``engine.place_one_by_one``); a big FIFO or PRIORITY batch of inline workloads goes through
the batch lane here (``admit_and_place``), with the same answers and state.

A batch may come with ``tags`` (the Place request decoder's, ``service.place_request_decoder``):
``tags[i]`` is workload ``i``'s, and workloads whose tags are the same object are equal in every
field but ``id`` and ``queued_at_ms``. The lane groups such a batch by tag
(``quota.batch.group_tagged``) and checks one workload per tag
(``state.request_checks.tagged_plainly_valid``), instead of reading every workload's fields;
the answers are the same as without tags.

**The batch lane.** The answers and the resulting state are exactly those of deciding and
placing one workload at a time (``place_one_by_one.admit_and_place_one``); two paths get there
faster:

- **Quota fast lane.** When ``quota.admit_all`` finds that no limit, guarantee or the headroom
  can bind inside a run of workloads, every workload of the run is ADMITTED (with a known
  ``borrowed``) whichever of the ones before it end up placed. The run is grouped once
  (``quota.batch``: the quota sums and the kernel rows are worked out per group), placed by
  one kernel call (``place_columns``) and committed from the kernel's columns with one
  ``ClusterState.add_many``: no per-workload quota decision, charge or refund, no
  ``PlacementOutcome`` for a placed workload, and its replicas allocated from the kernel's
  arrays. A run placed in full is answered in columns (``placement.outputs.PlacedColumns``): its
  ``WorkloadResult`` values are built only for a caller that reads them (``Engine.place``),
  not for the Place RPC, which writes the columns to the wire.
- **Chunks decided one by one** (``place_one_by_one.decide_and_place``) otherwise, with the
  kernel still placing the chunk in one call and the decisions replayed exactly (see its
  docstring).

Runs start as long as ``FAST_PATH_MAX`` and halve while the lane does not hold, down to
``FAST_PATH_MIN``; then one chunk is decided one by one, and the lane is tried again after it,
short, doubling while it holds. A failed lane check costs a pass over the run (sums, no
decisions), so the checks cost at most about twice the workloads placed through the lane plus
``FAST_PATH_MIN`` per chunk decided one by one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import compress

from strata_policy.engine.commit import Committer, call_digest
from strata_policy.engine.place_one_by_one import (
    admit_and_place_one,
    decide_and_place,
    place_admitted,
)
from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import BatchResult, Decision, Order, Workload, WorkloadResult
from strata_policy.placement.outputs import ColumnarBatch, Part, PlacedColumns, running_many
from strata_policy.placement.place import PlacementOptions, place_columns
from strata_policy.quota import RunAdmitted, admit_all, batch_order
from strata_policy.quota.batch import Groups, group, group_tagged
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import (
    check_ids,
    check_new_workloads,
    check_options,
    replicas,
)

FAST_PATH_MIN = 32  # batches from this size place in runs through one kernel call each
FAST_PATH_MAX = 4096
_ID = operator.attrgetter("id")


class PlaceCase:
    """The Engine's Place (``engine.core`` assembles ``Engine`` from this and the other use
    cases): ``Engine.place`` and ``Engine.place_columnar`` run here, on the engine's
    ``commits``."""

    commits: Committer  # the engine's clusters, clock, journal and observer

    def place(
        self,
        cluster_id: str,
        workloads: Sequence[Workload] = (),
        workload_ids: Sequence[str] = (),
        *,
        tags: Sequence[object] | None = None,
        order: Order = Order.FIFO,
        options: PlacementOptions | None = None,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> BatchResult:
        """Admit-and-place inline workloads, and place admitted ones by id (DESIGN §3); ``tags``
        optionally groups the inline workloads (``engine.place``'s docstring)."""
        return self.place_columnar(
            cluster_id,
            workloads,
            workload_ids,
            tags=tags,
            order=order,
            options=options,
            dry_run=dry_run,
            expected_generation=expected_generation,
            request_id=request_id,
            now_ms=now_ms,
            caller=caller,
            body_digest=body_digest,
        ).batch_result()

    def place_columnar(
        self,
        cluster_id: str,
        workloads: Sequence[Workload] = (),
        workload_ids: Sequence[str] = (),
        *,
        tags: Sequence[object] | None = None,
        order: Order = Order.FIFO,
        options: PlacementOptions | None = None,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> ColumnarBatch:
        """``place``, its results as the batch lane makes them (``placement.outputs``): for a
        caller that writes them out rather than reading values (the Place RPC), the
        ``WorkloadResult`` of each workload placed through the lane is never built.
        ``place`` is this call's ``batch_result()``; a retried ``request_id`` is answered
        the same either way."""
        c = self.commits
        options = options or PlacementOptions()
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
            digest=call_digest(
                request_id,
                dry_run,
                body_digest,
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
        parts = tuple(admit_and_place(state, workloads, order, options, now_ms, tags))
        return lambda generation: ColumnarBatch(generation, parts)
    results: list[WorkloadResult] = []
    for i in batch_order(state.tree, batch, order, state.capacity):
        w = batch[i]
        if i < admitted:
            results.append(place_admitted(state, w, options))
        else:
            results.append(admit_and_place_one(state, w, options, now_ms))
    return lambda generation: ColumnarBatch(generation, (tuple(results),))


def _with_mix(state: ClusterState, options: PlacementOptions) -> PlacementOptions:
    """FGD measures against the cluster's task mix unless the request names its own."""
    if options.task_mix is None and not options.task_types:
        return replace(options, task_mix=state.task_mix)
    return options


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
    (``placement.outputs``): a run placed in full is one ``PlacedColumns``, no values built.

    With ``tags`` (the module docstring: ``tags[i]`` is workload ``i``'s), each
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
            done, redone = decide_and_place(
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
