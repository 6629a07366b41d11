"""Score trees: the best feasible node for a repeated request in O(log N) after each change.

A node's score for one request (policy, request row, weights, static mask, FGD shapes) depends
only on that node's own state. So for a request seen more than once, a max segment tree over the
nodes' scores (infeasible = ``-inf``) answers "best node" at its root, and a placement on node
``n`` changes only leaf ``n`` and its ``log2 P`` ancestors. Internal nodes keep the better child,
the left one on equal scores, so the root is the lowest-indexed node of maximal score: exactly
the linear scan's answer (strictly higher score wins, ties to the lowest index; a NaN score is
never chosen, like ``-inf``). Leaves hold the very float the scan computes (same helpers, with
``-0.0`` made ``0.0`` so that equal means identical), and the winner's reported score is
computed again on the winning node, so scores are bit-equal.

Layout: tree ``k`` is row ``k`` of ``tree_score``/``tree_node`` (``[K, 2P]``, ``P`` a power of
two ``>= N``): entry ``i`` holds the best score under it and the node that has it; leaf ``n``
sits at ``P + n``; padding leaves are ``-inf``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel
from strata_policy.kernels.fit import (
    CPU,
    FIRST_FIT,
    FRAGMENTATION_AWARE,
    GPU,
    _best_fit_devices,
    _gpu_fits,
    _resources_fit,
    _score,
)
from strata_policy.kernels.frag import _frag_best

if TYPE_CHECKING:  # annotations only: numba types the bundles from the values passed
    from strata_policy.kernels.arrays import FragArrays, NodeArrays


@inline_kernel
def _weight_sum(weights: np.ndarray) -> float:
    """The scores' divisor: the sum of the weights, 1 when it is not positive."""
    total = 0.0
    for c in range(weights.shape[0]):
        total += weights[c]
    if total <= 0.0:
        total = 1.0
    return total


@inline_kernel
def _leaf_score(
    policy: int,
    nodes: NodeArrays,
    mask: np.ndarray,
    n: int,
    request: np.ndarray,
    weights: np.ndarray,
    weight_sum: float,
) -> float:
    """Node ``n``'s score for the request under a resource policy (not FGD, not RANDOM),
    ``-inf`` when infeasible (spread not considered)."""
    free = nodes.free
    if (
        not mask[n]
        or _resources_fit(free, n, request) >= 0
        or not _gpu_fits(nodes.gpu_free, n, request[GPU])
    ):
        return -np.inf
    if policy == FIRST_FIT:
        return 0.0
    sc = _score(policy, free, nodes.capacity, nodes.inv_capacity, nodes.inv_max_capacity, n,
                request, weights, weight_sum)  # fmt: skip
    if sc > -np.inf:
        return sc + 0.0  # -0.0 becomes 0.0: equal leaves are then equal bits (see _tree_set)
    return -np.inf


@kernel
def _leaf_fgd(
    nodes: NodeArrays,
    mask: np.ndarray,
    n: int,
    request: np.ndarray,
    frag: FragArrays,
    fgd_mode: int,
) -> float:
    """``_leaf_score`` for FRAGMENTATION_AWARE. Kept out of the resource policies' loops (a
    call this large is compiled once, not inlined into each)."""
    free = nodes.free
    gpu_free = nodes.gpu_free
    if (
        not mask[n]
        or _resources_fit(free, n, request) >= 0
        or not _gpu_fits(gpu_free, n, request[GPU])
    ):
        return -np.inf
    sc, _ = _frag_best(free, gpu_free, n, request[CPU], request[GPU], frag, fgd_mode)
    if sc > -np.inf:
        return sc + 0.0
    return -np.inf


@inline_kernel
def _fix(tree_score: np.ndarray, tree_node: np.ndarray, tree: int, i: int) -> None:
    """Internal entry ``i`` of tree ``tree`` takes its better child (the left on ties)."""
    left = 2 * i
    if tree_score[tree, left] >= tree_score[tree, left + 1]:
        tree_score[tree, i] = tree_score[tree, left]
        tree_node[tree, i] = tree_node[tree, left]
    else:
        tree_score[tree, i] = tree_score[tree, left + 1]
        tree_node[tree, i] = tree_node[tree, left + 1]


@inline_kernel
def _tree_set(
    tree_score: np.ndarray, tree_node: np.ndarray, tree: int, n: int, score: float
) -> None:
    """Set leaf ``n`` of tree ``tree`` to ``score`` and repair its ancestors, stopping at the
    first one left unchanged (the ones above depend on nothing else that moved)."""
    i = tree_score.shape[1] // 2 + n
    tree_score[tree, i] = score
    i //= 2
    while i >= 1:
        old_score = tree_score[tree, i]
        old_node = tree_node[tree, i]
        _fix(tree_score, tree_node, tree, i)
        if tree_score[tree, i] == old_score and tree_node[tree, i] == old_node:
            return
        i //= 2


@kernel
def _tree_fill(tree_score: np.ndarray, tree_node: np.ndarray, tree: int) -> None:
    """Build every internal entry of tree ``tree`` from its leaves (already set)."""
    leaves = tree_score.shape[1] // 2
    for i in range(leaves - 1, 0, -1):
        _fix(tree_score, tree_node, tree, i)


@kernel
def _tree_init(tree_score: np.ndarray, tree_node: np.ndarray, tree: int) -> None:
    """Leaves of tree ``tree`` to ``-inf`` with their node indices."""
    leaves = tree_score.shape[1] // 2
    for i in range(leaves):
        tree_score[tree, leaves + i] = -np.inf
        tree_node[tree, leaves + i] = i


@kernel
def _sync_resource(
    policy: int,
    nodes: NodeArrays,
    mask: np.ndarray,
    request: np.ndarray,
    weights: np.ndarray,
    tree_score: np.ndarray,
    tree_node: np.ndarray,
    tree: int,
    rows: np.ndarray,
    full: bool,
) -> None:
    """``_tree_sync`` for the resource policies."""
    weight_sum = _weight_sum(weights)
    if full:
        leaves = tree_score.shape[1] // 2
        for n in range(nodes.free.shape[0]):
            tree_score[tree, leaves + n] = _leaf_score(policy, nodes, mask, n, request, weights,
                                                       weight_sum)  # fmt: skip
        return
    for i in range(rows.shape[0]):
        n = rows[i]
        score = _leaf_score(policy, nodes, mask, n, request, weights, weight_sum)
        _tree_set(tree_score, tree_node, tree, n, score)


@kernel
def _sync_fgd(
    nodes: NodeArrays,
    mask: np.ndarray,
    request: np.ndarray,
    frag: FragArrays,
    fgd_mode: int,
    tree_score: np.ndarray,
    tree_node: np.ndarray,
    tree: int,
    rows: np.ndarray,
    full: bool,
) -> None:
    """``_tree_sync`` for FRAGMENTATION_AWARE."""
    leaves = tree_score.shape[1] // 2
    for i in range(nodes.free.shape[0] if full else rows.shape[0]):
        n = i if full else rows[i]
        score = _leaf_fgd(nodes, mask, n, request, frag, fgd_mode)
        if full:
            tree_score[tree, leaves + n] = score
        else:
            _tree_set(tree_score, tree_node, tree, n, score)


@kernel
def _tree_sync(
    policy: int,
    nodes: NodeArrays,
    mask: np.ndarray,
    request: np.ndarray,
    weights: np.ndarray,
    frag: FragArrays,
    fgd_mode: int,
    tree_score: np.ndarray,
    tree_node: np.ndarray,
    tree: int,
    rows: np.ndarray,
    n_rows: int,
) -> None:
    """Bring tree ``tree`` up to date: rescore nodes ``rows[:n_rows]``, or every node (a fresh
    build) when ``n_rows < 0`` or the list is longer than a rebuild costs."""
    full = n_rows < 0 or (n_rows > 64 and n_rows * 8 > nodes.free.shape[0])
    if full:
        _tree_init(tree_score, tree_node, tree)
    part = rows[: max(n_rows, 0)]
    if policy == FRAGMENTATION_AWARE:
        _sync_fgd(nodes, mask, request, frag, fgd_mode, tree_score, tree_node, tree, part, full)
    else:
        _sync_resource(policy, nodes, mask, request, weights, tree_score, tree_node, tree, part,
                       full)  # fmt: skip
    if full:
        _tree_fill(tree_score, tree_node, tree)


@kernel
def _tree_place(
    policy: int,
    nodes: NodeArrays,
    mask: np.ndarray,
    request: np.ndarray,
    weights: np.ndarray,
    frag: FragArrays,
    fgd_mode: int,
    tree_score: np.ndarray,
    tree_node: np.ndarray,
    rows: np.ndarray,
    n_rows: int,
    out_dev: np.ndarray,
) -> tuple[int, float]:
    """One replica with tree 0: sync it (``rows``/``n_rows`` as ``_tree_sync``), then the best
    node (-1 when none fits), its score and devices (as the batch kernel chooses them)."""
    zero: int = np.int64(0)  # type: ignore[assignment]  # run-time int64 (config)
    _tree_sync(policy, nodes, mask, request, weights, frag, fgd_mode, tree_score, tree_node, zero,
               rows, n_rows)  # fmt: skip
    out_dev[:] = -1
    if not tree_score[0, 1] > -np.inf:
        return -1, 0.0
    best = tree_node[0, 1]
    free = nodes.free
    gpu_free = nodes.gpu_free
    gpu_milli = request[GPU]
    if policy == FRAGMENTATION_AWARE:
        sc, dev = _frag_best(free, gpu_free, best, request[CPU], gpu_milli, frag, fgd_mode)
        if dev >= 0:
            out_dev[0] = dev
            return best, sc
        _best_fit_devices(gpu_free, best, gpu_milli, out_dev)
        return best, sc
    _best_fit_devices(gpu_free, best, gpu_milli, out_dev)
    if policy == FIRST_FIT:
        return best, 0.0
    return best, _score(policy, free, nodes.capacity, nodes.inv_capacity, nodes.inv_max_capacity,
                        best, request, weights, _weight_sum(weights))  # fmt: skip
