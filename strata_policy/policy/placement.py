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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from strata_policy import kernels
from strata_policy.model.decisions import Policy, Reason
from strata_policy.model.objects import Placement, Workload
from strata_policy.policy import placement_inputs as inputs
from strata_policy.policy.explain import SPREAD_CONFLICT, insufficient, unfit_reason
from strata_policy.state.nodes import NodeMatrix
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


@dataclass(frozen=True, slots=True)
class PlacementOptions:
    """How to choose among feasible nodes.

    ``resource_weights`` empty means weight 1 for every resource the workload requests.
    ``seed`` seeds RANDOM (with the workload id). FRAGMENTATION_AWARE measures against
    ``task_types`` when given, else ``task_mix.typical(coverage)``, else (nothing seen yet) the
    workload's own shape; ``fgd_truncate`` scores like the paper, ``int(100·sigmoid(−ΔF/1000))``,
    instead of the untruncated ``−ΔF``.
    """

    policy: Policy = Policy.LEAST_ALLOCATED
    resource_weights: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    task_types: tuple[TaskType, ...] = ()
    task_mix: TaskMix | None = None
    coverage: float = 0.95
    fgd_truncate: bool = False


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


def place_one(
    matrix: NodeMatrix, workload: Workload, options: PlacementOptions
) -> PlacementOutcome:
    """Place all replicas of ``workload`` or none; does not mutate ``matrix``."""
    return _place(matrix, [workload], options, private=workload.replicas > 1)[0]


def place_batch(
    matrix: NodeMatrix, workloads: Sequence[Workload], options: PlacementOptions
) -> list[PlacementOutcome]:
    """Place ``workloads`` in order, each seeing the placed ones before it, each all or
    nothing; does not mutate ``matrix``. Equal to ``place_one`` + commit, one by one."""
    if not workloads:
        return []
    if options.policy is Policy.FRAGMENTATION_AWARE and not _task_types(options):
        # No mix observed: every workload measures against its own shape, as place_one does.
        scratch = matrix.copy()
        out = []
        for wl in workloads:
            outcome = place_one(scratch, wl, options)
            for p in outcome.placements:
                scratch.allocate(scratch.index[p.node_id], wl.request, p.gpu_devices)
            out.append(outcome)
        return out
    return _place(matrix, workloads, options, private=len(workloads) > 1)


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
) -> list[PlacementOutcome]:
    n_work = len(workloads)
    n_res = len(matrix.resources)
    private = private or any(wl.replicas > 1 for wl in workloads)
    req = np.zeros((n_work, n_res), dtype=np.int64)
    replicas = np.empty(n_work, dtype=np.int64)
    mask_id = np.empty(n_work, dtype=np.int64)
    spread_id = np.full(n_work, -1, dtype=np.int64)
    impossible = np.zeros(n_work, dtype=np.bool_)
    seeds = np.zeros(n_work, dtype=np.uint64)
    missing: list[str] = [""] * n_work
    statics: list[inputs.StaticMask] = []
    mask_index: dict[int, int] = {}
    spreads: list[np.ndarray] = []
    spread_index: dict[str, int] = {}
    col = matrix.resource_index
    is_random = options.policy is Policy.RANDOM
    for w, wl in enumerate(workloads):
        row = req[w]
        for name, amount in wl.request.items():
            c = col.get(name)
            if c is not None:
                row[c] = amount
            elif amount > 0 and (not missing[w] or name < missing[w]):
                missing[w] = name
                impossible[w] = True
        replicas[w] = wl.replicas
        static = inputs.static_mask(matrix, wl)
        mask_id[w] = mask_index.setdefault(id(static), len(statics))
        if mask_id[w] == len(statics):
            statics.append(static)
        if wl.spread_key:
            spread_id[w] = spread_index.setdefault(wl.spread_key, len(spreads))
            if spread_id[w] == len(spreads):
                spreads.append(inputs.spread_codes(matrix, wl.spread_key))
        if is_random:
            seeds[w] = inputs.seed_of(options.seed, wl.id)
    masks = np.stack([s.mask for s in statics])
    spread = np.stack(spreads) if spreads else np.zeros((0, len(matrix)), dtype=np.int64)
    if options.policy is Policy.FRAGMENTATION_AWARE:
        types = _task_types(options) or (_own_shape(workloads[0]),)
        frag = inputs.frag_arrays(matrix, types, private)
    else:
        frag = kernels.FragArrays.empty(len(matrix))
    result = kernels.place_batch_arrays(
        free=matrix.free.copy() if private else matrix.free,
        gpu_free=matrix.gpu_free.copy() if private else matrix.gpu_free,
        capacity=matrix.capacity,
        inv_cap=matrix.inv_capacity,
        inv_max_cap=matrix.inv_max_capacity,
        masks=masks,
        mask_id=mask_id,
        spread=spread,
        spread_id=spread_id,
        req=req,
        replicas=replicas,
        weights=inputs.weight_rows(matrix, req, options.resource_weights),
        seeds=seeds,
        impossible=impossible,
        policy=POLICY_CODES[options.policy],
        apply_last=False,
        frag=frag,
        truncate=options.fgd_truncate,
    )
    return _outcomes(matrix, workloads, result, statics, mask_id, missing)


def _own_shape(workload: Workload) -> TaskType:
    cpu, gpu, models = shape_of(workload)
    return TaskType(cpu, gpu, models, 1.0)


def _outcomes(
    matrix: NodeMatrix,
    workloads: Sequence[Workload],
    result: kernels.BatchArrays,
    statics: list[inputs.StaticMask],
    mask_id: np.ndarray,
    missing: list[str],
) -> list[PlacementOutcome]:
    nodes = matrix.nodes
    node_list = result.node.tolist()
    dev_list = result.devices.tolist()
    fit = result.fit.tolist()
    score = result.score.tolist()
    offsets = result.offsets.tolist()
    out: list[PlacementOutcome] = []
    for w, wl in enumerate(workloads):
        reps = wl.replicas
        if fit[w] == reps:
            base = offsets[w]
            placements = tuple(
                Placement(nodes[node_list[i]].id, tuple(d for d in dev_list[i] if d >= 0))
                for i in range(base, base + reps)
            )
            out.append(PlacementOutcome(placements, score[w]))
            continue
        counts = dict(statics[int(mask_id[w])].counts)
        row = result.counts[w].tolist()
        for c, name in enumerate(matrix.resources):
            counts[insufficient(name)] = counts.get(insufficient(name), 0) + row[c]
        counts[SPREAD_CONFLICT] = row[len(matrix.resources)]
        if missing[w]:
            counts[insufficient(missing[w])] = row[len(matrix.resources) + 1]
        reason = unfit_reason(len(nodes), counts, fit[w], reps)
        out.append(PlacementOutcome((), 0.0, (reason,), reason.message))
    return out
