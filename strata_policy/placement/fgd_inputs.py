"""The FRAGMENTATION_AWARE kernels' inputs: the task mix's shapes as arrays and the per-node FGD
statistics, through the caches of the placement index (``placement.index``).

The per-(node, shape) ``count_ge``/``below`` statistics depend on the nodes' device state and
the shapes' per-device milli only. They live in the matrix's ``PlacementIndex.frag_stats`` with
a per-node stamp; a call refreshes just the rows whose ``matrix.version`` moved since (one node
per committed placement), so a placement costs O(N·T) arithmetic, not O(N·T·D).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from strata_policy.kernels import FragArrays
from strata_policy.model.resources import MILLI_PER_GPU
from strata_policy.placement.index import index_of
from strata_policy.placement.lineage import MAX_FRAG_STATS, LineageCaches, Mix, MixArrays, remember
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType


def shape_arrays(types: Sequence[TaskType]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per shape: cpu milli, per-device GPU milli (0 for CPU-only), device count."""
    cpu = np.array([t.cpu_milli for t in types], dtype=np.int64)
    gpu = np.array([t.gpu_milli for t in types], dtype=np.int64)
    per = np.where(gpu >= MILLI_PER_GPU, MILLI_PER_GPU, gpu)
    k = np.where(gpu >= MILLI_PER_GPU, gpu // MILLI_PER_GPU, (gpu > 0).astype(np.int64))
    return cpu, per.astype(np.int64), k.astype(np.int64)


def _mix_arrays(lineage: LineageCaches, types: Mix) -> MixArrays:
    """The shape arrays of ``types``, cached in the lineage (the same typical mix is used call
    after call; the same tuple again skips even hashing it)."""
    last = lineage.last_mix
    if last is not None and last[0] is types:
        return last[1]
    found = lineage.mixes.get(types)
    if found is None:
        shape_cpu, shape_gpu, shape_devices = shape_arrays(types)
        shape_weight = np.array([t.weight for t in types], dtype=np.float64)
        made = (
            shape_cpu,
            shape_gpu,
            shape_devices,
            shape_weight,
            tuple(t.gpu_model for t in types),
        )
        found = remember(lineage.mixes, types, made, MAX_FRAG_STATS)
    lineage.last_mix = (types, found)
    return found


def _model_ok(matrix: NodeMatrix, models: tuple[str, ...]) -> np.ndarray:
    out = np.ones((len(matrix), len(models)), dtype=np.bool_)
    for m, spec in enumerate(models):
        names = {x for x in spec.split("|") if x}
        if names:
            allowed = np.array([x in names for x in matrix.models], dtype=np.bool_)
            out[:, m] = allowed[matrix.model_code]
    return out


def _capacity_share(matrix: NodeMatrix, model_allowed: np.ndarray) -> np.ndarray:
    """Per shape: the share of the cluster's GPU devices on nodes whose model it allows (1.0 for
    a shape naming no model; 1.0 too when the cluster has no GPU, so nothing is rescaled)."""
    devices = matrix.gpu_devices.astype(np.float64)
    total = float(devices.sum())
    if total <= 0.0:
        return np.ones(model_allowed.shape[1], dtype=np.float64)
    share: np.ndarray = (devices @ model_allowed) / total
    return share


def per_capacity_weights(weights: np.ndarray, share: np.ndarray) -> np.ndarray:
    """The refined FGD's mix: each shape's share of the tasks divided by the share of the
    cluster's GPUs it may run on (a shape no node allows keeps its weight: it runs nowhere, so
    it ranks no node above another).

    FGD counts a node's idle GPUs as fragmented for every shape whose model it does not allow, so
    placing work there earns ``Σ p_m`` of those shapes per GPU milli. Weighted by task share
    alone, that makes the nodes of a model few tasks name (the openb trace's 39 G3 nodes) the
    best place for unconstrained work, which then fills them before the 549 G2 nodes, and the
    few pods that need a G3 fail. Per unit of the capacity a shape can use, the weight says how
    much of that capacity it will claim: a model many tasks need and few nodes have is kept for
    them, one with room to spare is not."""
    out = weights.copy()
    scaled = (share > 0.0) & (share < 1.0)
    out[scaled] = weights[scaled] / share[scaled]
    return out


def frag_arrays(
    matrix: NodeMatrix, types: Sequence[TaskType], private: bool, *, per_capacity: bool = False
) -> FragArrays:
    """The FGD inputs for ``types``, statistics refreshed; ``private`` gives copies the kernel
    may mutate (batches and gangs), otherwise the cached arrays themselves. ``per_capacity``
    (the refined score) weighs each shape per unit of the GPU capacity it may use
    (``per_capacity_weights``)."""
    if not types:
        return FragArrays.empty(len(matrix))
    index = index_of(matrix)
    lineage = index.lineage
    shape_cpu, shape_gpu, shape_devices, weights, models = _mix_arrays(
        lineage, types if isinstance(types, tuple) else tuple(types)
    )
    stats = index.frag_stats(matrix, shape_gpu)
    model_allowed = lineage.fgd_models.get(models)
    if model_allowed is None:
        model_allowed = remember(
            lineage.fgd_models, models, _model_ok(matrix, models), MAX_FRAG_STATS
        )
    if per_capacity:
        key_w = (models, weights.tobytes())
        scaled = lineage.fgd_weights.get(key_w)
        if scaled is None:
            share = _capacity_share(matrix, model_allowed)
            scaled = per_capacity_weights(weights, share)
            remember(lineage.fgd_weights, key_w, scaled, MAX_FRAG_STATS)
        weights = scaled
    count_ge = stats.count_ge.copy() if private else stats.count_ge
    below = stats.below.copy() if private else stats.below
    return FragArrays(shape_cpu, shape_gpu, shape_devices, weights, model_allowed, count_ge, below)
