"""Reclaim (DESIGN §2): find the victims for a pending workload; committed, evict + admit + place.

The victims come from the quota engine's ``find_victims``. With ``require_placement`` it also asks,
for each candidate set, whether the workload would then be placed: that check frees the candidate
victims' replicas on the node matrix, runs the placement policy, and puts them back — the tree is
never touched by it. Committed, the victims are released, the workload admitted and (when asked)
placed inside the engine's one transaction, so nothing else can take the freed room first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from strata_policy.engine.commit import Committer, call_digest
from strata_policy.model import (
    Decision,
    Placement,
    ReclaimResult,
    RunningWorkload,
    Workload,
    WorkloadResult,
)
from strata_policy.placement.place import PlacementOptions, PlacementOutcome, place_one
from strata_policy.quota import check_admit, find_victims
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import check_new_workloads, check_options


class ReclaimCase:
    """The Engine's Reclaim (``engine.core`` assembles ``Engine`` from this and the other use
    cases)."""

    commits: Committer  # the engine's clusters, clock, journal and observer

    def reclaim(
        self,
        cluster_id: str,
        workload: Workload,
        *,
        require_placement: bool = False,
        options: PlacementOptions | None = None,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> ReclaimResult:
        """Victims for a pending workload; committed: evict, admit (and place) atomically."""
        c = self.commits
        options = options or PlacementOptions()
        check_options(options)
        result = c.mutate(
            cluster_id,
            "reclaim",
            request_id,
            expected_generation,
            dry_run,
            lambda state: compute(
                state, workload, require_placement, options, now_ms or c.clock(), dry_run
            ),
            caller=caller,
            digest=call_digest(
                request_id,
                dry_run,
                body_digest,
                lambda: (
                    "reclaim",
                    workload,
                    require_placement,
                    options,
                    expected_generation,
                    now_ms,
                ),
            ),
        )
        if c.observer is not None:
            c.observer.observe_reclaim(result)
        return result


def compute(
    state: ClusterState,
    workload: Workload,
    require_placement: bool,
    options: PlacementOptions,
    now_ms: int,
    dry_run: bool,
) -> Callable[[int], ReclaimResult]:
    """Plan the victims; unless a dry run, evict them and admit (and place) the workload."""
    check_new_workloads(state, [workload], "workload")
    if options.task_mix is None and not options.task_types:
        options = replace(options, task_mix=state.task_mix)
    fits_after = _fits_after(state, workload, options) if require_placement else None
    plan = find_victims(
        state.tree, state.workloads, workload, state.capacity, fits_after=fits_after
    )
    if not plan.satisfiable or dry_run:
        return lambda generation: ReclaimResult(
            generation, plan.satisfiable, plan.victims, plan.reasons
        )
    for victim in plan.victims:
        state.remove(victim.workload_id)
    check = check_admit(state.tree, workload, state.capacity)
    placements: tuple[Placement, ...] = ()
    score = 0.0
    if not check.fits:
        # find_victims promised room; a mismatch is a bug, and the transaction undoes everything.
        raise RuntimeError(f"reclaim plan for {workload.id!r} does not make room")
    if require_placement:
        outcome = place_one(state.matrix, workload, options)
        if not outcome.placed:
            raise RuntimeError(f"reclaim plan for {workload.id!r} does not make it placeable")
        placements, score = outcome.placements, outcome.score
    state.add(RunningWorkload(workload, placements, now_ms))
    result = WorkloadResult(
        workload.id,
        Decision.PLACED if placements else Decision.ADMITTED,
        placements=placements,
        borrowed=check.borrowed,
        score=score,
    )
    return lambda generation: ReclaimResult(generation, True, plan.victims, plan.reasons, result)


def _fits_after(
    state: ClusterState, workload: Workload, options: PlacementOptions
) -> Callable[[Sequence[str]], bool]:
    """Would ``workload`` be placed if these running workloads' replicas were freed?"""

    def fits(victim_ids: Sequence[str]) -> bool:
        freed = [state.workloads[v] for v in victim_ids if v in state.workloads]
        matrix = state.matrix
        for rw in freed:
            for p in rw.placements:
                matrix.deallocate(matrix.index[p.node_id], rw.workload.request, p.gpu_devices)
        try:
            outcome: PlacementOutcome = place_one(matrix, workload, options)
        finally:
            for rw in reversed(freed):
                for p in rw.placements:
                    matrix.allocate(matrix.index[p.node_id], rw.workload.request, p.gpu_devices)
        return bool(outcome.placed)

    return fits
