"""Placement as pure functions: where each replica of a workload goes, or why it cannot.

``place_one`` and ``place_batch`` never mutate the matrix's allocation state (the engine commits
an outcome with ``matrix.allocate`` per replica); both run the same kernel, so a batch equals
the same workloads placed one by one with each outcome committed before the next. See DESIGN §3
for the semantics; the kernels' docstrings for the per-policy formulas.

Gangs are placed greedily, replica after replica, each seeing the earlier ones; when a replica
finds no node the whole gang is left unplaced (all or nothing) and the reasons are counted on
the state after its earlier replicas (so a spread gang reports ``spread conflict``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import partial

import numpy as np

from strata_policy import kernels
from strata_policy.model.decisions import Policy, Reason
from strata_policy.model.objects import Placement, Workload
from strata_policy.model.slots import setters
from strata_policy.placement import inputs
from strata_policy.placement.explain import SPREAD_CONFLICT, insufficient, unfit_reason
from strata_policy.placement.fgd_inputs import frag_arrays
from strata_policy.placement.index import index_of
from strata_policy.placement.one_replica import place_blocks, place_cached
from strata_policy.placement.outputs import batch_placements
from strata_policy.quota.batch import Groups
from strata_policy.state.nodes import NodeMatrix, ReplicaRows
from strata_policy.state.taskmix import TaskMix, TaskType, shape_of

POLICY_CODES: Mapping[Policy, int] = {
    Policy.FIRST_FIT: kernels.FIRST_FIT,
    Policy.BEST_FIT: kernels.BEST_FIT,
    Policy.LEAST_ALLOCATED: kernels.LEAST_ALLOCATED,
    Policy.MOST_ALLOCATED: kernels.MOST_ALLOCATED,
    Policy.BALANCED_ALLOCATION: kernels.BALANCED_ALLOCATION,
    Policy.DOT_PRODUCT: kernels.DOT_PRODUCT,
    Policy.FRAGMENTATION_AWARE: kernels.FRAGMENTATION_AWARE,
    Policy.RANDOM: kernels.RANDOM,
}


class FgdScore(Enum):
    """FRAGMENTATION_AWARE's node score (formulas in ``kernels.frag``).

    ``PAPER`` is the FGD paper's ``int(100·sigmoid(−ΔF/1000))`` with ties to node order;
    ``UNTRUNCATED`` the strict ``−ΔF``; ``REFINED`` (the default) the paper's score over ΔF plus
    the change in GPU milli that the node's free CPU cannot feed, ties to the device left with
    the least free milli, and its mix weighs each shape per unit of the GPU capacity its models
    allow (``fgd_inputs.per_capacity_weights``), so nodes of a model few nodes have are
    kept for the tasks that need it. On the openb trace REFINED leaves about 12 % fewer GPUs
    unallocated than PAPER, and ahead on every variant family (docs/simulation.md).
    """

    PAPER = "PAPER"
    UNTRUNCATED = "UNTRUNCATED"
    REFINED = "REFINED"


FGD_MODES: Mapping[FgdScore, int] = {
    FgdScore.PAPER: kernels.FGD_PAPER,
    FgdScore.UNTRUNCATED: kernels.FGD_UNTRUNCATED,
    FgdScore.REFINED: kernels.FGD_REFINED,
}


@dataclass(frozen=True, slots=True)
class PlacementOptions:
    """How to choose among feasible nodes.

    ``resource_weights`` empty means weight 1 for every resource the workload requests.
    ``seed`` seeds RANDOM (with the workload id). FRAGMENTATION_AWARE measures against
    ``task_types`` when given, else ``task_mix.typical(coverage)``, else (nothing seen yet) the
    workload's own shape; ``fgd_score`` picks its score (``FgdScore``).
    """

    policy: Policy = Policy.LEAST_ALLOCATED
    resource_weights: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    task_types: tuple[TaskType, ...] = ()
    task_mix: TaskMix | None = None
    coverage: float = 0.95
    fgd_score: FgdScore = FgdScore.REFINED


@dataclass(frozen=True, slots=True)
class PlacementOutcome:
    """One replica placement per replica, or none with the reasons why."""

    placements: tuple[Placement, ...]
    score: float = 0.0
    reasons: tuple[Reason, ...] = ()
    explanation: str = ""

    @property
    def placed(self) -> bool:
        """Whether every replica got a node."""
        return bool(self.placements)


_new = object.__new__
# Members read once: ``Policy.RANDOM`` goes through the enum's metaclass (about 0.1 µs), twice
# per ``place_one``.
_RANDOM = Policy.RANDOM
_FGD = Policy.FRAGMENTATION_AWARE
_set_placements, _set_score, _set_reasons, _set_explanation = setters(
    PlacementOutcome, ("placements", "score", "reasons", "explanation")
)


def _placed(placements: tuple[Placement, ...], score: float) -> PlacementOutcome:
    """``PlacementOutcome(placements, score)`` through its slots: a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``, which costs as much as the
    kernel's work for one placement; a batch builds one per workload."""
    out: PlacementOutcome = _new(PlacementOutcome)
    _set_placements(out, placements)
    _set_score(out, score)
    _set_reasons(out, ())
    _set_explanation(out, "")
    return out


@dataclass(frozen=True, slots=True)
class PlacedBatch:
    """``place_batch``'s answer in columns, for a caller that commits a batch in bulk.

    ``placements[i]`` is workload ``i``'s placements (``()`` when unplaced) and ``scores[i]``
    its score; ``rows`` holds the replicas of the placed workloads, in order, as arrays
    (``NodeMatrix.allocate_rows``), or is ``None`` when the batch did not come from one kernel
    call. ``outcome(i)`` is workload ``i``'s ``PlacementOutcome``, built on demand: a batch
    that commits its placements directly builds none, and an unplaced workload's reasons are
    worked out only when asked for.
    """

    placements: list[tuple[Placement, ...]]
    scores: list[float]
    rows: ReplicaRows | None
    unplaced: Callable[[int], PlacementOutcome]

    def outcome(self, i: int) -> PlacementOutcome:
        """Workload ``i``'s outcome."""
        chosen = self.placements[i]
        return _placed(chosen, self.scores[i]) if chosen else self.unplaced(i)

    def outcomes(self) -> list[PlacementOutcome]:
        """Every workload's outcome, in order."""
        return [self.outcome(i) for i in range(len(self.placements))]


def place_one(
    matrix: NodeMatrix, workload: Workload, options: PlacementOptions
) -> PlacementOutcome:
    """Place all replicas of ``workload`` or none; does not mutate ``matrix``.

    A single replica without spread (any policy but RANDOM) is answered by the fast paths of
    ``placement.one_replica`` (the block search; FGD's score tree per shape); the rest, and every
    unplaced answer (it needs the reasons), run the batch kernel on this one workload.
    """
    policy = options.policy
    if workload.replicas == 1 and not workload.spread_key and policy is not _RANDOM:
        if policy is _FGD:
            types = _task_types(options) or (_own_shape(workload),)
            found = place_cached(matrix, workload, types, FGD_MODES[options.fgd_score])
        else:
            found = place_blocks(matrix, workload, POLICY_CODES[policy], options.resource_weights)
        if found is not None:
            return _placed(found[0], found[1])
    return _place(matrix, [workload], options, private=workload.replicas > 1).outcome(0)


def place_batch(
    matrix: NodeMatrix, workloads: Sequence[Workload], options: PlacementOptions
) -> list[PlacementOutcome]:
    """Place ``workloads`` in order, each seeing the placed ones before it, each all or
    nothing; does not mutate ``matrix``. Equal to ``place_one`` + commit, one by one."""
    return place_columns(matrix, workloads, options).outcomes()


def place_columns(
    matrix: NodeMatrix,
    workloads: Sequence[Workload],
    options: PlacementOptions,
    groups: Groups | None = None,
) -> PlacedBatch:
    """``place_batch``'s answer as a ``PlacedBatch`` (columns; outcomes on demand);
    ``groups`` is ``quota.batch.group(workloads)`` when the caller has it."""
    if not workloads:
        return PlacedBatch([], [], None, _no_outcome)
    if options.policy is Policy.FRAGMENTATION_AWARE and not _task_types(options):
        # No mix observed: every workload measures against its own shape, as place_one does.
        scratch = matrix.copy()
        out = []
        for wl in workloads:
            outcome = place_one(scratch, wl, options)
            for p in outcome.placements:
                scratch.allocate(scratch.index[p.node_id], wl.request, p.gpu_devices)
            out.append(outcome)
        return PlacedBatch(
            [o.placements for o in out], [o.score for o in out], None, out.__getitem__
        )
    return _place(matrix, workloads, options, private=len(workloads) > 1, groups=groups)


def _no_outcome(i: int) -> PlacementOutcome:
    raise IndexError(i)


def _task_types(options: PlacementOptions) -> tuple[TaskType, ...]:
    if options.task_types:
        return options.task_types
    if options.task_mix is not None:
        return options.task_mix.typical(options.coverage)
    return ()


def _place(
    matrix: NodeMatrix,
    workloads: Sequence[Workload],
    options: PlacementOptions,
    private: bool,
    groups: Groups | None = None,
) -> PlacedBatch:
    n_work = len(workloads)
    is_random = options.policy is Policy.RANDOM
    shapes = inputs.batch_shapes(matrix, workloads, groups)
    private = private or shapes.gangs
    seeds = np.zeros(n_work, dtype=np.uint64)
    if is_random:
        seeds[:] = [inputs.seed_of(options.seed, wl.id) for wl in workloads]
    if options.policy is Policy.FRAGMENTATION_AWARE:
        types = _task_types(options) or (_own_shape(workloads[0]),)
        refined = options.fgd_score is FgdScore.REFINED
        frag = frag_arrays(matrix, types, private, per_capacity=refined)
    else:
        frag = kernels.FragArrays.empty(len(matrix))
    req = shapes.req
    weights = inputs.weight_rows(matrix, req, options.resource_weights)
    is_fgd = options.policy is Policy.FRAGMENTATION_AWARE
    tree_of, n_trees = inputs.tree_assignment(len(matrix), shapes, is_random)
    free = matrix.free.copy() if private else matrix.free
    gpu_free = matrix.gpu_free.copy() if private else matrix.gpu_free
    blocks = None
    if not (is_random or is_fgd):
        blocks = index_of(matrix).block_index(matrix)
        if private:
            blocks = blocks.with_state(free, gpu_free)
    result = kernels.place_batch_arrays(
        free=free,
        gpu_free=gpu_free,
        capacity=matrix.capacity,
        inv_cap=matrix.inv_capacity,
        inv_max_cap=matrix.inv_max_capacity,
        masks=shapes.masks,
        mask_id=shapes.mask_id,
        spread=shapes.spread,
        spread_id=shapes.spread_id,
        req=req,
        replicas=shapes.replicas,
        weights=weights,
        seeds=seeds,
        impossible=shapes.impossible,
        policy=POLICY_CODES[options.policy],
        apply_last=False,
        frag=frag,
        fgd_mode=FGD_MODES[options.fgd_score],
        tree_of=tree_of,
        n_trees=n_trees,
        layout=None if blocks is None else blocks.layout,
        summaries=None if blocks is None else blocks.summaries,
        mask_blocks=shapes.mask_blocks,
        mask_supers=shapes.mask_supers,
    )
    return _columns(matrix, result, shapes)


def _own_shape(workload: Workload) -> TaskType:
    cpu, gpu, models = shape_of(workload)
    return TaskType(cpu, gpu, models, 1.0)


def _columns(
    matrix: NodeMatrix, result: kernels.BatchArrays, shapes: inputs.BatchShapes
) -> PlacedBatch:
    """The kernel's arrays as a ``PlacedBatch``: placements shared through the matrix's caches
    (``outputs.batch_placements``), the placed replicas' rows cut from the kernel's arrays."""
    replicas = shapes.replicas
    placed = result.fit == replicas
    chosen = batch_placements(
        matrix, placed, replicas, shapes.devices, result.offsets, result.node, result.devices
    )
    taken = np.repeat(placed, replicas)
    owner = np.repeat(np.arange(replicas.shape[0]), replicas)[taken]
    rows = ReplicaRows(result.node[taken], shapes.req[owner], result.devices[taken])
    return PlacedBatch(
        chosen, result.score.tolist(), rows, partial(_unplaced, matrix, result, shapes)
    )


def _unplaced(
    matrix: NodeMatrix, result: kernels.BatchArrays, shapes: inputs.BatchShapes, w: int
) -> PlacementOutcome:
    """Why workload ``w`` was not placed: the static reasons of its mask plus the kernel's
    per-node counts, aggregated as Kubernetes reports them."""
    counts = dict(shapes.statics[int(shapes.mask_id[w])].counts)
    row = result.counts[w].tolist()
    for c, name in enumerate(matrix.resources):
        counts[insufficient(name)] = counts.get(insufficient(name), 0) + row[c]
    counts[SPREAD_CONFLICT] = row[len(matrix.resources)]
    missing = shapes.missing[w]
    if missing:
        counts[insufficient(missing)] = row[len(matrix.resources) + 1]
    reason = unfit_reason(len(matrix.nodes), counts, int(result.fit[w]), int(shapes.replicas[w]))
    return PlacementOutcome((), 0.0, (reason,), reason.message)
