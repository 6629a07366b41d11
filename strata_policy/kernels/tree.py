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

Layout: tree ``k`` is row ``k`` of ``tval``/``tidx`` (``[K, 2P]``, ``P`` a power of two
``>= N``); leaf ``n`` sits at ``P + n``; padding leaves are ``-inf``.
"""

from __future__ import annotations

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel
from strata_policy.kernels.fit import (
    FIRST_FIT,
    FRAGMENTATION_AWARE,
    GPU,
    _best_fit_devices,
    _gpu_fits,
    _resources_fit,
    _score,
)
from strata_policy.kernels.frag import _frag_best


@inline_kernel
def _leaf_score(
    policy: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    n: int,
    rq: np.ndarray,
    wt: np.ndarray,
    weight_sum: float,
) -> float:
    """Node ``n``'s score for the request under a resource policy (not FGD, not RANDOM),
    ``-inf`` when infeasible (spread not considered)."""
    if not mask[n] or _resources_fit(free, n, rq) >= 0 or not _gpu_fits(gpu_free, n, rq[GPU]):
        return -np.inf
    if policy == FIRST_FIT:
        return 0.0
    sc = _score(policy, free, capacity, inv_cap, inv_max_cap, n, rq, wt, weight_sum)
    if sc > -np.inf:
        return sc + 0.0  # -0.0 becomes 0.0: equal leaves are then equal bits (see _tree_set)
    return -np.inf


@kernel
def _leaf_fgd(
    free: np.ndarray,
    gpu_free: np.ndarray,
    mask: np.ndarray,
    n: int,
    rq: np.ndarray,
    t_cpu: np.ndarray,
    t_gpu: np.ndarray,
    t_k: np.ndarray,
    t_w: np.ndarray,
    model_ok: np.ndarray,
    count_ge: np.ndarray,
    below: np.ndarray,
    fgd_mode: int,
) -> float:
    """``_leaf_score`` for FRAGMENTATION_AWARE. Kept out of the resource policies' loops: a
    call with this many arrays in a hot loop costs their reference counting on every node."""
    if not mask[n] or _resources_fit(free, n, rq) >= 0 or not _gpu_fits(gpu_free, n, rq[GPU]):
        return -np.inf
    sc, _ = _frag_best(free, gpu_free, n, rq[0], rq[GPU], t_cpu, t_gpu, t_k, t_w, model_ok,
                       count_ge, below, fgd_mode)  # fmt: skip
    if sc > -np.inf:
        return sc + 0.0
    return -np.inf


@inline_kernel
def _fix(tval: np.ndarray, tidx: np.ndarray, k: int, i: int) -> None:
    """Internal node ``i`` of tree ``k`` takes its better child (the left on ties)."""
    left = 2 * i
    if tval[k, left] >= tval[k, left + 1]:
        tval[k, i] = tval[k, left]
        tidx[k, i] = tidx[k, left]
    else:
        tval[k, i] = tval[k, left + 1]
        tidx[k, i] = tidx[k, left + 1]


@inline_kernel
def _tree_set(tval: np.ndarray, tidx: np.ndarray, k: int, n: int, s: float) -> None:
    """Set leaf ``n`` of tree ``k`` to ``s`` and repair its ancestors, stopping at the first
    one left unchanged (the ones above depend on nothing else that moved)."""
    i = tval.shape[1] // 2 + n
    tval[k, i] = s
    i //= 2
    while i >= 1:
        old_v = tval[k, i]
        old_i = tidx[k, i]
        _fix(tval, tidx, k, i)
        if tval[k, i] == old_v and tidx[k, i] == old_i:
            return
        i //= 2


@kernel
def _tree_fill(tval: np.ndarray, tidx: np.ndarray, k: int) -> None:
    """Build every internal node of tree ``k`` from its leaves (already set)."""
    p = tval.shape[1] // 2
    for i in range(p - 1, 0, -1):
        _fix(tval, tidx, k, i)


@kernel
def _tree_init(tval: np.ndarray, tidx: np.ndarray, k: int) -> None:
    """Leaves of tree ``k`` to ``-inf`` with their node indices."""
    p = tval.shape[1] // 2
    for i in range(p):
        tval[k, p + i] = -np.inf
        tidx[k, p + i] = i


@kernel
def _sync_resource(
    policy: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    tval: np.ndarray,
    tidx: np.ndarray,
    k: int,
    rows: np.ndarray,
    full: bool,
) -> None:
    """``_tree_sync`` for the resource policies."""
    weight_sum = 0.0
    for c in range(wt.shape[0]):
        weight_sum += wt[c]
    if weight_sum <= 0.0:
        weight_sum = 1.0
    if full:
        p = tval.shape[1] // 2
        for n in range(free.shape[0]):
            tval[k, p + n] = _leaf_score(policy, free, gpu_free, capacity, inv_cap, inv_max_cap,
                                         mask, n, rq, wt, weight_sum)  # fmt: skip
        return
    for i in range(rows.shape[0]):
        n = rows[i]
        s = _leaf_score(policy, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, n, rq, wt,
                        weight_sum)  # fmt: skip
        _tree_set(tval, tidx, k, n, s)


@kernel
def _sync_fgd(
    free: np.ndarray,
    gpu_free: np.ndarray,
    mask: np.ndarray,
    rq: np.ndarray,
    t_cpu: np.ndarray,
    t_gpu: np.ndarray,
    t_k: np.ndarray,
    t_w: np.ndarray,
    model_ok: np.ndarray,
    count_ge: np.ndarray,
    below: np.ndarray,
    fgd_mode: int,
    tval: np.ndarray,
    tidx: np.ndarray,
    k: int,
    rows: np.ndarray,
    full: bool,
) -> None:
    """``_tree_sync`` for FRAGMENTATION_AWARE."""
    p = tval.shape[1] // 2
    for i in range(free.shape[0] if full else rows.shape[0]):
        n = i if full else rows[i]
        s = _leaf_fgd(free, gpu_free, mask, n, rq, t_cpu, t_gpu, t_k, t_w, model_ok, count_ge,
                      below, fgd_mode)  # fmt: skip
        if full:
            tval[k, p + n] = s
        else:
            _tree_set(tval, tidx, k, n, s)


@kernel
def _tree_sync(
    policy: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    t_cpu: np.ndarray,
    t_gpu: np.ndarray,
    t_k: np.ndarray,
    t_w: np.ndarray,
    model_ok: np.ndarray,
    count_ge: np.ndarray,
    below: np.ndarray,
    fgd_mode: int,
    tval: np.ndarray,
    tidx: np.ndarray,
    k: int,
    rows: np.ndarray,
    n_rows: int,
) -> None:
    """Bring tree ``k`` up to date: rescore nodes ``rows[:n_rows]``, or every node (a fresh
    build) when ``n_rows < 0`` or the list is longer than a rebuild costs."""
    full = n_rows < 0 or (n_rows > 64 and n_rows * 8 > free.shape[0])
    if full:
        _tree_init(tval, tidx, k)
    part = rows[: max(n_rows, 0)]
    if policy == FRAGMENTATION_AWARE:
        _sync_fgd(free, gpu_free, mask, rq, t_cpu, t_gpu, t_k, t_w, model_ok, count_ge, below,
                  fgd_mode, tval, tidx, k, part, full)  # fmt: skip
    else:
        _sync_resource(policy, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, rq, wt,
                       tval, tidx, k, part, full)  # fmt: skip
    if full:
        _tree_fill(tval, tidx, k)


@kernel
def _tree_place(
    policy: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    t_cpu: np.ndarray,
    t_gpu: np.ndarray,
    t_k: np.ndarray,
    t_w: np.ndarray,
    model_ok: np.ndarray,
    count_ge: np.ndarray,
    below: np.ndarray,
    fgd_mode: int,
    tval: np.ndarray,
    tidx: np.ndarray,
    rows: np.ndarray,
    n_rows: int,
    out_dev: np.ndarray,
) -> tuple[int, float]:
    """One replica with tree 0: sync it (``rows``/``n_rows`` as ``_tree_sync``), then the best
    node (-1 when none fits), its score and devices (as the batch kernel chooses them)."""
    zero: int = np.int64(0)  # type: ignore[assignment]  # run-time int64 (config)
    _tree_sync(policy, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, rq, wt, t_cpu, t_gpu,
               t_k, t_w, model_ok, count_ge, below, fgd_mode, tval, tidx, zero, rows,
               n_rows)  # fmt: skip
    out_dev[:] = -1
    if not tval[0, 1] > -np.inf:
        return -1, 0.0
    best = tidx[0, 1]
    g = rq[GPU]
    if policy == FRAGMENTATION_AWARE:
        sc, dev = _frag_best(free, gpu_free, best, rq[0], g, t_cpu, t_gpu, t_k, t_w, model_ok,
                             count_ge, below, fgd_mode)  # fmt: skip
        if dev >= 0:
            out_dev[0] = dev
            return best, sc
        _best_fit_devices(gpu_free, best, g, out_dev)
        return best, sc
    _best_fit_devices(gpu_free, best, g, out_dev)
    if policy == FIRST_FIT:
        return best, 0.0
    weight_sum = 0.0
    for c in range(wt.shape[0]):
        weight_sum += wt[c]
    if weight_sum <= 0.0:
        weight_sum = 1.0
    return best, _score(policy, free, capacity, inv_cap, inv_max_cap, best, rq, wt, weight_sum)
