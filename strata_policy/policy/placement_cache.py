"""``place_one``'s fast path: persistent score trees kept on the matrix, one per request shape.

The engine and the simulator call ``place_one`` again and again with a few request shapes on a
matrix that changes by one node per committed replica. A score tree (``kernels.tree``) per shape
(policy, request, selector, model, weights, FGD mix) lives in ``matrix.trees``; a call replays
the matrix's ``journal`` since the tree last looked (usually a handful of nodes), rescoring only
those, and reads the best node at the root. The answer is the linear scan's, bit for bit (same
per-node helpers, same tie-break). A tree pays off only when its shape comes again: the first
call of a resource-policy shape answers with one fused scan (``kernels.scan_one``) and remembers
the shape's key; the second call builds the tree, O(N). FGD shapes build their tree at once.

Served here: one replica, no spread key, no resource outside the columns, any policy but RANDOM
(its score depends on the workload id). When nothing fits, ``None`` sends the caller to the
general path, which also counts the reasons. Trees are bounded in memory (least recently used
go first) and guarded by a per-matrix lock (kernels run without the GIL).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np

from strata_policy import kernels
from strata_policy.model.objects import Placement, Workload
from strata_policy.policy import placement_inputs as inputs
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType

_TREE_BYTES = 64 << 20  # per matrix
_LOCK = "lock"
_SEEN = "seen"  # keys of the shapes met once (answered by a scan, no tree yet)
_MAX_SEEN = 4096


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


def _weights_key(weights: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(weights.items())) if weights else ()


def place_cached(
    matrix: NodeMatrix,
    workload: Workload,
    policy: int,
    weights: Mapping[str, float],
    types: tuple[TaskType, ...],
    fgd_mode: int,
) -> tuple[tuple[Placement, ...], float] | None:
    """The placement of one replica of ``workload`` and its score, or None when nothing fits
    (or the request names a resource no node has). ``types`` is the FGD mix and ``fgd_mode`` its
    score (FGD only)."""
    selector = workload.node_selector
    key = (
        policy,
        tuple(workload.request.items()),
        tuple(selector.items()) if selector else (),
        workload.gpu_model,
        _weights_key(weights),
        fgd_mode,
        len(types),
    )
    trees = matrix.trees
    lock = trees.get(_LOCK)
    if lock is None:
        lock = trees.setdefault(_LOCK, threading.Lock())
    with lock:
        entry = trees.pop(key, None)
        frag = None
        if policy == kernels.FRAGMENTATION_AWARE:
            frag = inputs.frag_arrays(matrix, types, private=False)
            if entry is not None and not (
                (entry.types is types or entry.types == types)
                and entry.frag is not None
                and entry.frag.count_ge is frag.count_ge
            ):
                entry = None
        if entry is None and frag is None:
            seen: set[object] | None = trees.get(_SEEN)
            if seen is None:
                seen = trees[_SEEN] = set()
            if key not in seen:
                if len(seen) >= _MAX_SEEN:
                    seen.clear()
                seen.add(key)
                return _scan(matrix, workload, policy, weights)
        if entry is None:
            entry = _new_entry(matrix, workload, policy, weights, types, fgd_mode, frag)
            if entry is None:
                return None
        trees[key] = entry  # most recently used last
        journal = matrix.journal
        if entry.epoch != matrix.epoch or len(journal) - entry.seen > max(64, len(matrix) // 8):
            changed = None
        else:
            changed = np.array(journal[entry.seen :], dtype=np.int64)
        best, score, devices = entry.tree.place(changed)
        entry.epoch = matrix.epoch
        entry.seen = len(journal)
    if best < 0:
        return None
    return (Placement(matrix.nodes[best].id, devices),), score


def _scan(
    matrix: NodeMatrix, workload: Workload, policy: int, weights: Mapping[str, float]
) -> tuple[tuple[Placement, ...], float] | None:
    """``place_cached``'s answer from one fused scan of the nodes (no tree)."""
    req, missing = inputs.request_row(matrix, workload.request)
    if missing:
        return None
    best, score, devices = kernels.scan_one(
        policy=policy, free=matrix.free, gpu_free=matrix.gpu_free, capacity=matrix.capacity,
        inv_cap=matrix.inv_capacity, inv_max_cap=matrix.inv_max_capacity,
        mask=inputs.static_mask(matrix, workload).mask, req=req,
        weights=np.ascontiguousarray(inputs.weight_rows(matrix, req[None, :], weights)[0]),
    )  # fmt: skip
    if best < 0:
        return None
    return (Placement(matrix.nodes[best].id, devices),), score


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
    extra = (_LOCK in trees) + (_SEEN in trees)
    while len(trees) > extra and (len(trees) - extra) * 32 * size > _TREE_BYTES:
        oldest = next(k for k in trees if k not in (_LOCK, _SEEN))
        del trees[oldest]
    tree = kernels.ScoreTree(
        policy=policy,
        free=matrix.free,
        gpu_free=matrix.gpu_free,
        capacity=matrix.capacity,
        inv_cap=matrix.inv_capacity,
        inv_max_cap=matrix.inv_max_capacity,
        mask=inputs.static_mask(matrix, workload).mask,
        req=req,
        weights=np.ascontiguousarray(inputs.weight_rows(matrix, req[None, :], weights)[0]),
        frag=frag if frag is not None else kernels.FragArrays.empty(len(matrix)),
        fgd_mode=fgd_mode,
    )
    return _Entry(tree, types, frag)
