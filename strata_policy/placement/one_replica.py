"""``place_one``'s fast paths: one replica, no spread key, no resource outside the columns.

**Resource policies** (all but FRAGMENTATION_AWARE and RANDOM) are answered by the block search
(``kernels.blocks``) over the matrix's block summaries (``NodeMatrix.block_index``), which serve
every request shape and are kept up to date a block per committed replica: no call of a shape,
first or later, pays for more than the summaries and the few blocks whose bound can beat the
best node found. The per-shape inputs (request row, weights, static mask and its block levels,
built once in the dtypes and shapes the kernel takes) are cached on the matrix, keyed by the
shape. An earlier design kept a score tree per shape and built it on the shape's second call:
O(N), ~100 × a ``numpy.sum`` of the matrix for that one call, to save work the block search no
longer has to do.

**FRAGMENTATION_AWARE** keeps a score tree (``kernels.tree``) per shape (policy, request,
selector, model, FGD mix) in ``matrix.trees``: its score depends on the typical shapes' cached
statistics, which block summaries do not bound. A call replays the matrix's journal since the
tree last looked (usually a handful of nodes), rescoring only those, and reads the best node at
the root; the answer is the linear scan's, bit for bit. Trees are bounded in memory (least
recently used go first) and guarded by a per-matrix lock (kernels run without the GIL).

RANDOM's score depends on the workload id, so it is never served here. When nothing fits,
``None`` sends the caller to the general path, which also counts the reasons.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from strata_policy import kernels
from strata_policy.model.objects import Placement, Workload
from strata_policy.placement import kernel_inputs as inputs
from strata_policy.placement.static_masks import search_levels, static_mask
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType

_TREE_BYTES = 64 << 20  # per matrix
_LOCK = "lock"
_QUERIES = "block-queries"
_CHOSEN = "block-placements"
_MAX_QUERIES = 1024


class _Entry:
    __slots__ = ("epoch", "frag", "seen", "tree", "types")

    def __init__(
        self,
        tree: kernels.ScoreTree,
        types: tuple[TaskType, ...],
        frag: kernels.FragArrays | None,
    ) -> None:
        self.tree = tree
        self.types = types
        self.frag = frag
        self.epoch = -1
        self.seen = 0


def _shape(workload: Workload) -> tuple[object, ...]:
    """What a cached query or tree depends on of a workload: request, selector, GPU model."""
    selector = workload.node_selector
    return (
        tuple(workload.request.items()),
        tuple(selector.items()) if selector else (),
        workload.gpu_model,
    )


def _weights_key(weights: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(weights.items())) if weights else ()


def place_blocks(
    matrix: NodeMatrix, workload: Workload, policy: int, weights: Mapping[str, float]
) -> tuple[tuple[Placement, ...], float] | None:
    """The placement of one replica of ``workload`` under a resource policy and its score, or
    None when nothing fits (or the request names a resource no node has)."""
    selector = workload.node_selector  # the key is (policy, *_shape(workload), weights), inlined
    key = (
        policy,
        tuple(workload.request.items()),
        tuple(selector.items()) if selector else (),
        workload.gpu_model,
        _weights_key(weights) if weights else (),
    )
    queries: dict[object, kernels.BlockQuery | None] = matrix.shared(_QUERIES, dict)
    query = queries.get(key, _ABSENT)
    if query is _ABSENT:
        query = _block_query(matrix, workload, policy, weights)
        if len(queries) >= _MAX_QUERIES:
            queries.clear()
        queries[key] = query
    if query is None:
        return None
    best, score, bits = matrix.block_search(query)  # type: ignore[arg-type]  # not _ABSENT
    if best < 0:
        return None
    chosen: dict[int, tuple[Placement]] = matrix.shared(_CHOSEN, dict)
    found = chosen.get(bits << 32 | best) if bits >= 0 else None
    if found is None:
        found = _chosen(matrix, query, best, bits)  # type: ignore[arg-type]  # not _ABSENT
    return found, score


_ABSENT: object = object()


def _chosen(
    matrix: NodeMatrix, query: kernels.BlockQuery, best: int, bits: int
) -> tuple[Placement]:
    """The shared one-replica answer for node ``best`` on the devices of bit set ``bits``
    (``BlockIndex.search``), kept per (node, bit set) so that a placement builds no tuple;
    a node with more than 62 devices (``bits`` -1) asks the index for its devices instead."""
    if bits < 0:
        devices = matrix.block_index().place(query)[2]
        return (inputs.placement_of(matrix, best, devices),)
    chosen: dict[int, tuple[Placement]] = matrix.shared(_CHOSEN, dict)
    if len(chosen) >= inputs.MAX_PLACEMENTS:
        chosen.clear()
    found = (inputs.placement_of(matrix, best, kernels.device_set(bits)),)
    chosen[bits << 32 | best] = found
    return found


def _block_query(
    matrix: NodeMatrix,
    workload: Workload,
    policy: int,
    weights: Mapping[str, float],
) -> kernels.BlockQuery | None:
    """The query of ``workload``'s shape, or None when it names a resource no node has.

    Built with ``BlockQuery``'s constructor, which checks nothing: every array here is made
    with the dtype and shape ``BlockIndex.query`` checks (``request_and_weights``' rows by
    ``fromiter`` with the dtype and length, or its shared empty weight row; the levels and the
    selection are cached arrays of the matrix's layout), and ``policy`` is a resource policy's
    code (``place_one`` sends no other here). The checks cost a first call of a shape about
    1.5 µs; tests/test_block_query_inputs.py says the query passes them and places like the
    validating one."""
    req, row, missing = inputs.request_and_weights(matrix, workload.request, weights)
    if missing:
        return None
    # schedulable and model are decided per block (StaticMask): ``selected`` is the selector's
    selected, blocks, supers, select_blocks, select_supers = search_levels(matrix, workload)
    return kernels.BlockQuery(matrix.block_layout(), policy, req, row, selected, blocks, supers,
                              select_blocks, select_supers)  # fmt: skip


def place_cached(
    matrix: NodeMatrix,
    workload: Workload,
    types: tuple[TaskType, ...],
    fgd_mode: int,
) -> tuple[tuple[Placement, ...], float] | None:
    """The FRAGMENTATION_AWARE placement of one replica of ``workload`` and its score, or None
    when nothing fits (or the request names a resource no node has). ``types`` is the FGD mix
    and ``fgd_mode`` its score."""
    policy = kernels.FRAGMENTATION_AWARE
    key = (policy, *_shape(workload), (), fgd_mode, len(types))
    trees = matrix.trees
    lock = trees.get(_LOCK)
    if lock is None:
        lock = trees.setdefault(_LOCK, threading.Lock())
    with lock:
        entry = trees.pop(key, None)
        refined = fgd_mode == kernels.FGD_REFINED
        frag = inputs.frag_arrays(matrix, types, private=False, per_capacity=refined)
        if entry is not None and not (
            (entry.types is types or entry.types == types)
            and entry.frag is not None
            and entry.frag.count_ge is frag.count_ge
        ):
            entry = None
        if entry is None:
            entry = _new_entry(matrix, workload, policy, {}, types, fgd_mode, frag)
            if entry is None:
                return None
        trees[key] = entry  # most recently used last
        if entry.epoch != matrix.epoch or matrix.journal_len - entry.seen > max(
            64, len(matrix) // 8
        ):
            changed = None
        else:
            changed = matrix.journal_since(entry.seen).copy()
        best, score, devices = entry.tree.place(changed)
        entry.epoch = matrix.epoch
        entry.seen = matrix.journal_len
    if best < 0:
        return None
    return (inputs.placement_of(matrix, best, devices),), score


def _new_entry(
    matrix: NodeMatrix,
    workload: Workload,
    policy: int,
    weights: Mapping[str, float],
    types: tuple[TaskType, ...],
    fgd_mode: int,
    frag: kernels.FragArrays | None,
) -> _Entry | None:
    req, missing = inputs.request_row(matrix, workload.request)
    if missing:
        return None
    trees = matrix.trees
    size = 1 << max(0, (len(matrix) - 1).bit_length())
    extra = int(_LOCK in trees)
    while len(trees) > extra and (len(trees) - extra) * 32 * size > _TREE_BYTES:
        oldest = next(k for k in trees if k != _LOCK)
        del trees[oldest]
    tree = kernels.ScoreTree(
        policy=policy,
        free=matrix.free,
        gpu_free=matrix.gpu_free,
        capacity=matrix.capacity,
        inv_cap=matrix.inv_capacity,
        inv_max_cap=matrix.inv_max_capacity,
        mask=static_mask(matrix, workload).mask,
        req=req,
        weights=inputs.weight_rows(matrix, req, weights),
        frag=frag if frag is not None else kernels.FragArrays.empty(len(matrix)),
        fgd_mode=fgd_mode,
    )
    return _Entry(tree, types, frag)
