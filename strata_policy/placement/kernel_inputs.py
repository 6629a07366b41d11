"""Turning workloads and options into the kernel's arrays, through the caches of the
placement index (``placement.index``) that make it cheap.

* **Static masks** (``placement.static_masks``): schedulable, selector and model, once per distinct
  (selector, models, wants-gpu), shared by every copy of the matrix.
* **FGD statistics.** The per-(node, shape) ``count_ge``/``below`` statistics depend on the
  nodes' device state and the shapes' per-device milli only. They live in the matrix's
  ``PlacementIndex.frag_stats`` with a per-node stamp; a call refreshes just the rows whose
  ``matrix.version`` moved since (one node per committed placement), so a placement costs
  O(N·T) arithmetic, not O(N·T·D).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from strata_policy.kernels import FragArrays
from strata_policy.model.objects import HOSTNAME_KEY, Placement, Workload
from strata_policy.model.resources import MILLI_PER_GPU
from strata_policy.placement import slot_builders
from strata_policy.placement.index import (
    MAX_FRAG_STATS,
    MAX_PLACEMENTS,
    LineageCaches,
    Mix,
    MixArrays,
    index_of,
    remember,
)
from strata_policy.placement.static_masks import StaticMask, static_mask
from strata_policy.quota.groups import Groups, group
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType

_I64 = np.dtype(np.int64)
_F64 = np.dtype(np.float64)


def placement_of(matrix: NodeMatrix, node: int, devices: tuple[int, ...]) -> Placement:
    """The shared ``Placement`` of one replica on node index ``node`` and ``devices``."""
    cache = index_of(matrix).lineage.placements
    key = (node, devices)
    found = cache.get(key)
    if found is None:
        made = slot_builders.placement(matrix.nodes[node].id, devices)
        found = remember(cache, key, made, MAX_PLACEMENTS)
    return found


def spread_codes(matrix: NodeMatrix, key: str) -> np.ndarray:
    """Per node, the code of its value of the spread key (-1 when absent)."""
    return index_of(matrix).lineage.label_codes(matrix, key or HOSTNAME_KEY)[0]


def seed_of(seed: int, workload_id: str) -> int:
    """The RANDOM policy's 64-bit seed for one workload: stable across processes and hosts."""
    digest = hashlib.blake2b(f"{seed}:{workload_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def request_row(matrix: NodeMatrix, request: Mapping[str, int]) -> tuple[np.ndarray, str]:
    """The request as a column vector, and the first resource (by name) no column has.

    Built from a list in one array construction (a first placement of a shape pays it)."""
    amounts = [request.get(r, 0) for r in matrix.resources]
    return np.array(amounts, dtype=np.int64), _missing(matrix, request)


def _missing(matrix: NodeMatrix, request: Mapping[str, int]) -> str:
    """The first resource (by name) that ``request`` asks for and no column has, or ""."""
    col = matrix.resource_index
    if request.keys() <= col.keys():
        return ""
    return min((n for n, a in request.items() if a > 0 and n not in col), default="")


DEFAULT_WEIGHTS = np.zeros(0, dtype=np.float64)
"""``request_and_weights``' weight row without weights: the block search then weighs 1 every
column the request asks for (``kernels.blocks._blocks_place``), as ``weight_rows`` does. Shared
by every query that has no weights: never written to."""


def request_and_weights(
    matrix: NodeMatrix, request: Mapping[str, int], weights: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray, str]:
    """``request_row`` and the block search's weight row: ``weight_rows``' row when
    ``weights`` is given, else ``DEFAULT_WEIGHTS`` (empty: the kernel derives that row from the
    request). A first placement of a shape without weights pays one small array construction
    (``fromiter`` with the dtype, half the cost of ``array`` with one) and no array
    arithmetic.

    The amounts are the first values of ``{**zeros, **request}`` (``zeros``: 0 per column, in
    column order): the request's amount or 0 per column, and the request's other names after
    them, so that one C-level merge gives the row and whether any name has no column (the
    merge is longer than the row), where a lookup per column and a key-set test cost twice
    that."""
    names = matrix.resources
    n = len(names)
    zeros = index_of(matrix).lineage.zero_request(matrix)
    amounts = {**zeros, **request}
    req = np.fromiter(amounts.values(), _I64, n)
    missing = "" if len(amounts) == n else _missing(matrix, request)
    if not weights:
        return req, DEFAULT_WEIGHTS, missing
    row = np.fromiter([float(weights.get(r, 0.0)) for r in names], _F64, n)
    return req, row, missing


def weight_rows(matrix: NodeMatrix, req: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
    """Per workload (a row of ``req``, or ``req`` itself when it is one row), the score weight
    of each column: the options' weights when given (absent = 0), else 1 for every requested
    resource."""
    if not weights:
        return (req > 0).astype(np.float64)
    row = np.array([float(weights.get(r, 0.0)) for r in matrix.resources], dtype=np.float64)
    return np.ascontiguousarray(np.broadcast_to(row, req.shape))


# -- score trees ----------------------------------------------------------------------------

_TREE_BYTES = 64 << 20  # memory the score trees of one call may take


def tree_assignment(n_nodes: int, shapes: BatchShapes, is_random: bool) -> tuple[np.ndarray, int]:
    """Which score tree (``kernels.tree``) serves each workload, -1 for none (the block search
    for the resource policies, a scan for FGD).

    Workloads of one shape (same request, selector, model: same request row, weights row and
    mask) share one tree; a tree costs O(N) to build and then O(log N) per placement, so it
    pays off once its shape is placed at least twice (two workloads, or a gang): only those
    shapes get one, most used first, as many as ``_TREE_BYTES`` allows. Spread gangs (their
    feasibility depends on the gang's earlier replicas) and RANDOM (its score depends on the
    workload) get none.
    """
    n_work = shapes.req.shape[0]
    tree_of = np.full(n_work, -1, dtype=np.int64)
    if is_random or n_nodes == 0 or int(shapes.replicas.sum()) < 2:
        return tree_of, 0
    uses = np.bincount(shapes.shape_id, weights=shapes.replicas, minlength=shapes.n_shapes)
    uses[shapes.shape_scans] = 0
    size = 1 << max(0, (n_nodes - 1).bit_length())
    budget = max(1, _TREE_BYTES // (32 * size))
    order = np.argsort(-uses, kind="stable")
    order = order[uses[order] >= 2][:budget]
    if order.size == 0:
        return tree_of, 0
    slot = np.full(shapes.n_shapes, -1, dtype=np.int64)
    slot[order] = np.arange(order.size)
    return np.ascontiguousarray(slot[shapes.shape_id]), int(order.size)


@dataclass(frozen=True, slots=True)
class BatchShapes:
    """A batch's workloads as kernel rows, built once per distinct shape (request, selector,
    model, spread key) so that a batch of many alike workloads costs a dict lookup each."""

    req: np.ndarray
    replicas: np.ndarray
    mask_id: np.ndarray
    spread_id: np.ndarray
    impossible: np.ndarray
    missing: list[str]
    devices: np.ndarray
    statics: list[StaticMask]
    masks: np.ndarray
    mask_blocks: np.ndarray
    mask_supers: np.ndarray
    spread: np.ndarray
    shape_id: np.ndarray
    n_shapes: int
    shape_scans: np.ndarray
    gangs: bool


def batch_shapes(
    matrix: NodeMatrix, workloads: Sequence[Workload], groups: Groups | None = None
) -> BatchShapes:
    """The kernel rows of ``workloads`` (see ``BatchShapes``); ``groups`` is
    ``quota.groups.group(workloads)`` when the caller has it. Rows are built per distinct
    shape, then spread to the workloads by index arrays: nothing here runs per workload but
    two ``numpy`` gathers and the list of missing resources."""
    if groups is None:
        groups = group(workloads)
    index: dict[object, int] = {}
    group_shape: list[int] = []
    firsts: list[Workload] = []
    for wl in groups.firsts:
        selector = wl.node_selector
        key = (
            tuple(wl.request.items()),
            tuple(selector.items()) if selector else (),
            wl.gpu_model,
            wl.spread_key,
        )
        found = index.get(key)
        if found is None:
            found = index[key] = len(firsts)
            firsts.append(wl)
        group_shape.append(found)
    n_shapes = len(firsts)
    n_res = len(matrix.resources)
    s_req = np.zeros((n_shapes, n_res), dtype=np.int64)
    s_mask = np.empty(n_shapes, dtype=np.int64)
    s_spread = np.full(n_shapes, -1, dtype=np.int64)
    s_missing: list[str] = []
    statics: list[StaticMask] = []
    mask_index: dict[int, int] = {}
    spreads: list[np.ndarray] = []
    spread_index: dict[str, int] = {}
    for i, wl in enumerate(firsts):
        row, missing = request_row(matrix, wl.request)
        s_req[i] = row
        s_missing.append(missing)
        static = static_mask(matrix, wl)
        s_mask[i] = mask_index.setdefault(id(static), len(statics))
        if s_mask[i] == len(statics):
            statics.append(static)
        if wl.spread_key:
            s_spread[i] = spread_index.setdefault(wl.spread_key, len(spreads))
            if s_spread[i] == len(spreads):
                spreads.append(spread_codes(matrix, wl.spread_key))
    s_impossible = np.array([bool(m) for m in s_missing], dtype=np.bool_)
    g = s_req[:, 2]
    s_devices = np.where(g >= MILLI_PER_GPU, g // MILLI_PER_GPU, (g > 0).astype(np.int64))
    of_group = np.asarray(groups.group, dtype=np.int64)
    ids = np.asarray(group_shape, dtype=np.int64)[of_group]
    replicas = np.asarray([w.replicas for w in groups.firsts], dtype=np.int64)[of_group]
    missing_of = [s_missing[i] for i in group_shape]
    return BatchShapes(
        req=np.ascontiguousarray(s_req[ids]),
        replicas=replicas,
        mask_id=np.ascontiguousarray(s_mask[ids]),
        spread_id=np.ascontiguousarray(s_spread[ids]),
        impossible=np.ascontiguousarray(s_impossible[ids]),
        missing=[missing_of[g] for g in groups.group] if any(s_missing) else [""] * len(ids),
        devices=s_devices[ids],
        statics=statics,
        masks=np.stack([st.mask for st in statics]),
        mask_blocks=np.stack([st.blocks for st in statics]),
        mask_supers=np.stack([st.supers for st in statics]),
        spread=np.stack(spreads) if spreads else np.zeros((0, len(matrix)), dtype=np.int64),
        shape_id=ids,
        n_shapes=n_shapes,
        shape_scans=np.flatnonzero((s_spread >= 0) | s_impossible),
        gangs=bool((replicas > 1).any()),
    )


# -- FGD -----------------------------------------------------------------------------------


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
