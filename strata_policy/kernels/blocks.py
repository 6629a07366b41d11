"""Block bounds: the best node for any request without scoring every node.

**Layout.** Nodes of one class (same schedulability, GPU model and capacity row) are consecutive
in ``perm``, in index order, cut into blocks of at most ``B`` nodes; consecutive blocks of one
class form superblocks of at most ``S`` blocks. Every block and superblock therefore has one
capacity row. Each keeps, per resource column, the largest and the smallest free amount of its
nodes and its best GPU offer (``_gpu_offer``: ``1000 ×`` fully free devices, or the largest free
device when none is fully free, so that a GPU request ``g`` fits at device level exactly when
``offer >= g``). These summaries do not depend on the request: one set serves every shape, the
first call of a shape included, and a committed placement refreshes one block and one superblock.

**Bounds.** For a request, a (super)block's bound is the best score any of its fitting nodes can
have: ``fit._score`` itself evaluated on the summary row, with the largest free amounts for the
policies whose score grows with free (LEAST_ALLOCATED, DOT_PRODUCT) and the smallest for those
where it shrinks (MOST_ALLOCATED, BEST_FIT). Every floating-point step of those formulas (``+``,
``-``, ``×`` by a non-negative number, ``/`` by a positive one) is monotone under
round-to-nearest, so the bound is ``>=`` the very float the full scan computes for each fitting
node, and equal to it when the nodes are alike: ties at the top, common in a cluster of one node
type, are pruned exactly. BALANCED_ALLOCATION is not monotone: a (super)block whose nodes have
equal free amounts gets its exact score; otherwise per column the utilisation after placing lies
in ``[lo_c, hi_c]`` (monotone again), the standard deviation is at least ``gap / sqrt(2k)`` with
``gap = max lo − min hi``, and the bound is ``100 · (1 − gap / sqrt(2k)) + 1e-9`` (the slack
covers rounding; scores are at most 100). A block that cannot hold the request (a column's
largest free amount below the request, the GPU offer too small, no node passing the static mask)
is skipped. With non-finite weights no bound is trusted and every fitting block is scored.

**Search.** Bound every superblock; open the best one (lowest first node on ties), then every
other whose bound is above the best score found so far, or equal to it with a lower first node.
Opening a superblock does the same over its blocks, and opening a block scores its nodes with
``fit._score`` (feasibility as everywhere: mask, every column, device-level GPU, spread). A node
replaces the best when its score is strictly higher, or equal with a lower index: the answer and
its score are the full scan's, bit for bit (highest score, lowest index, NaN never chosen). The
work is ``N / (B·S)`` superblock bounds, ``S`` block bounds per opened superblock and ``B`` nodes
per opened block; where bounds prune nothing it degrades to a full scan, never worse.
"""

from __future__ import annotations

import math

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel
from strata_policy.kernels.fit import (
    BALANCED_ALLOCATION,
    BEST_FIT,
    FIRST_FIT,
    GPU,
    MILLI,
    MOST_ALLOCATED,
    _best_fit_devices,
    _gpu_fits,
    _resources_fit,
    _score,
)

_SLACK = 1e-9


@inline_kernel
def _gpu_offer(gpu_free: np.ndarray, n: int) -> int:
    """``1000 × (fully free devices)`` when any device is fully free, else the largest free
    device milli (0 without devices): a GPU request ``g`` fits iff ``offer >= g``."""
    full = 0
    top = 0
    for d in range(gpu_free.shape[1]):
        f = gpu_free[n, d]
        if f == MILLI:
            full += 1
        elif f > top:
            top = f
    if full > 0:
        return full * MILLI
    return top


@inline_kernel
def _summarise_block(
    free: np.ndarray,
    gpu_free: np.ndarray,
    perm: np.ndarray,
    bstart: np.ndarray,
    b: int,
    bmax: np.ndarray,
    bmin: np.ndarray,
    boffer: np.ndarray,
) -> None:
    """Block ``b``'s summary from its nodes."""
    first = perm[bstart[b]]
    for c in range(free.shape[1]):
        bmax[b, c] = free[first, c]
        bmin[b, c] = free[first, c]
    boffer[b] = _gpu_offer(gpu_free, first)
    for j in range(bstart[b] + 1, bstart[b + 1]):
        n = perm[j]
        for c in range(free.shape[1]):
            v = free[n, c]
            if v > bmax[b, c]:
                bmax[b, c] = v
            elif v < bmin[b, c]:
                bmin[b, c] = v
        boffer[b] = max(boffer[b], _gpu_offer(gpu_free, n))


@inline_kernel
def _summarise_super(
    sstart: np.ndarray,
    s: int,
    bmax: np.ndarray,
    bmin: np.ndarray,
    boffer: np.ndarray,
    smax: np.ndarray,
    smin: np.ndarray,
    soffer: np.ndarray,
) -> None:
    """Superblock ``s``'s summary from its blocks'."""
    first = sstart[s]
    for c in range(bmax.shape[1]):
        smax[s, c] = bmax[first, c]
        smin[s, c] = bmin[first, c]
    soffer[s] = boffer[first]
    for b in range(first + 1, sstart[s + 1]):
        for c in range(bmax.shape[1]):
            smax[s, c] = max(smax[s, c], bmax[b, c])
            smin[s, c] = min(smin[s, c], bmin[b, c])
        soffer[s] = max(soffer[s], boffer[b])


@kernel
def _refresh_blocks(
    free: np.ndarray,
    gpu_free: np.ndarray,
    perm: np.ndarray,
    bstart: np.ndarray,
    block_of: np.ndarray,
    sstart: np.ndarray,
    super_of: np.ndarray,
    bmax: np.ndarray,
    bmin: np.ndarray,
    boffer: np.ndarray,
    smax: np.ndarray,
    smin: np.ndarray,
    soffer: np.ndarray,
    rows: np.ndarray,
    n_rows: int,
) -> None:
    """Recompute the summaries holding nodes ``rows[:n_rows]`` (all of them when ``n_rows < 0``)."""
    if n_rows < 0:
        for b in range(bstart.shape[0] - 1):
            _summarise_block(free, gpu_free, perm, bstart, b, bmax, bmin, boffer)
        for s in range(sstart.shape[0] - 1):
            _summarise_super(sstart, s, bmax, bmin, boffer, smax, smin, soffer)
        return
    for i in range(n_rows):
        b = block_of[rows[i]]
        if i > 0 and block_of[rows[i - 1]] == b:
            continue
        _summarise_block(free, gpu_free, perm, bstart, b, bmax, bmin, boffer)
        _summarise_super(sstart, super_of[b], bmax, bmin, boffer, smax, smin, soffer)


@inline_kernel
def _bound(
    policy: int,
    i: int,
    hi: np.ndarray,
    lo: np.ndarray,
    offer: np.ndarray,
    cap: np.ndarray,
    inv: np.ndarray,
    inv_max_cap: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    weight_sum: float,
    trusted: bool,
) -> float:
    """Row ``i``'s bound (module docstring): ``-inf`` when none of its nodes can fit."""
    for c in range(rq.shape[0]):
        if hi[i, c] < rq[c]:
            return -np.inf
    g = rq[GPU]
    if g > 0 and offer[i] < g:
        return -np.inf
    if not trusted:
        return np.inf
    if policy == FIRST_FIT:
        return 0.0
    if policy in (MOST_ALLOCATED, BEST_FIT):
        return _score(policy, lo, cap, inv, inv_max_cap, i, rq, wt, weight_sum)
    if policy != BALANCED_ALLOCATION:
        return _score(policy, hi, cap, inv, inv_max_cap, i, rq, wt, weight_sum)
    k = 0
    same = True
    top_lo = -np.inf
    bottom_hi = np.inf
    for c in range(rq.shape[0]):
        if wt[c] > 0.0:
            k += 1
            if hi[i, c] != lo[i, c]:
                same = False
            x_lo = min(1.0, (cap[i, c] - hi[i, c] + rq[c]) * inv[i, c])
            x_hi = min(1.0, (cap[i, c] - max(lo[i, c], rq[c]) + rq[c]) * inv[i, c])
            top_lo = max(top_lo, x_lo)
            bottom_hi = min(bottom_hi, x_hi)
    if same:
        return _score(policy, hi, cap, inv, inv_max_cap, i, rq, wt, weight_sum)
    gap = top_lo - bottom_hi
    if k == 0 or not gap > 0.0:
        return 100.0
    return (1.0 - gap / math.sqrt(2.0 * k)) * 100.0 + _SLACK


@inline_kernel
def _open_block(
    policy: int,
    b: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    perm: np.ndarray,
    bstart: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    weight_sum: float,
    spread_codes: np.ndarray,
    used: np.ndarray,
    n_used: int,
    best: int,
    best_score: float,
) -> tuple[int, float]:
    """Score block ``b``'s nodes: the better of them and (``best``, ``best_score``).

    ``spread_codes`` (empty: no spread) gives per node the code of its spread label value (-1:
    absent); a node whose code is absent or among ``used[:n_used]`` does not fit."""
    g = rq[GPU]
    for j in range(bstart[b], bstart[b + 1]):
        n = perm[j]
        if not mask[n] or _resources_fit(free, n, rq) >= 0 or not _gpu_fits(gpu_free, n, g):
            continue
        if spread_codes.shape[0] > 0:
            code = spread_codes[n]
            if code < 0:
                continue
            taken = False
            for u in range(n_used):
                if used[u] == code:
                    taken = True
                    break
            if taken:
                continue
        if policy == FIRST_FIT:
            sc = 0.0
        else:
            sc = _score(policy, free, capacity, inv_cap, inv_max_cap, n, rq, wt, weight_sum)
        if sc > best_score or (sc == best_score and best >= 0 and n < best):
            best = n
            best_score = sc
        if policy == FIRST_FIT:
            break  # the block's later nodes have higher indices
    return best, best_score


@kernel
def _blocks_best(
    policy: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    mask_blocks: np.ndarray,
    mask_supers: np.ndarray,
    perm: np.ndarray,
    bstart: np.ndarray,
    sstart: np.ndarray,
    bmax: np.ndarray,
    bmin: np.ndarray,
    boffer: np.ndarray,
    bcap: np.ndarray,
    binv: np.ndarray,
    smax: np.ndarray,
    smin: np.ndarray,
    soffer: np.ndarray,
    scap: np.ndarray,
    sinv: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    spread_codes: np.ndarray,
    used: np.ndarray,
    n_used: int,
) -> tuple[int, float]:
    """The best node for one replica under a resource policy (-1 when none fits) and its
    score, by the search of the module docstring."""
    weight_sum = 0.0
    trusted = True
    for c in range(wt.shape[0]):
        weight_sum += wt[c]
        if not math.isfinite(wt[c]):
            trusted = False
    if weight_sum <= 0.0:
        weight_sum = 1.0
    trusted = trusted and math.isfinite(weight_sum)
    n_super = sstart.shape[0] - 1
    s_bound = np.empty(n_super, dtype=np.float64)
    b_bound = np.empty(bstart.shape[0] - 1, dtype=np.float64)
    top = -np.inf
    top_s = -1
    for s in range(n_super):
        u = -np.inf
        if mask_supers[s]:
            u = _bound(policy, s, smax, smin, soffer, scap, sinv, inv_max_cap, rq, wt, weight_sum,
                       trusted)  # fmt: skip
        s_bound[s] = u
        if u > top or (
            u == top and top_s >= 0 and perm[bstart[sstart[s]]] < perm[bstart[sstart[top_s]]]
        ):
            top = u
            top_s = s
    best = -1
    best_score = -np.inf
    if top_s < 0:
        return best, 0.0
    for step in range(n_super + 1):
        # The first step opens the best superblock, then the others that may hold a better node.
        s = top_s if step == 0 else step - 1
        if step > 0:
            u = s_bound[s]
            if s == top_s or not u > -np.inf:
                continue
            if not (u > best_score or (u == best_score and perm[bstart[sstart[s]]] < best)):
                continue
        b_top = -1
        b_best = -np.inf
        for b in range(sstart[s], sstart[s + 1]):
            u = -np.inf
            if mask_blocks[b]:
                u = _bound(policy, b, bmax, bmin, boffer, bcap, binv, inv_max_cap, rq, wt,
                           weight_sum, trusted)  # fmt: skip
            b_bound[b] = u
            if u > b_best or (u == b_best and b_top >= 0 and perm[bstart[b]] < perm[bstart[b_top]]):
                b_best = u
                b_top = b
        if b_top < 0:
            continue
        best, best_score = _open_block(policy, b_top, free, gpu_free, capacity, inv_cap,
                                       inv_max_cap, mask, perm, bstart, rq, wt, weight_sum,
                                       spread_codes, used, n_used, best,
                                       best_score)  # fmt: skip
        for b in range(sstart[s], sstart[s + 1]):
            u = b_bound[b]
            if b == b_top or not u > -np.inf:
                continue
            if u > best_score or (u == best_score and (best < 0 or perm[bstart[b]] < best)):
                best, best_score = _open_block(policy, b, free, gpu_free, capacity, inv_cap,
                                               inv_max_cap, mask, perm, bstart, rq, wt,
                                               weight_sum, spread_codes, used, n_used, best,
                                               best_score)  # fmt: skip
    if best < 0:
        return -1, 0.0
    return best, best_score


@kernel
def _blocks_place(
    policy: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    mask_blocks: np.ndarray,
    mask_supers: np.ndarray,
    perm: np.ndarray,
    bstart: np.ndarray,
    sstart: np.ndarray,
    bmax: np.ndarray,
    bmin: np.ndarray,
    boffer: np.ndarray,
    bcap: np.ndarray,
    binv: np.ndarray,
    smax: np.ndarray,
    smin: np.ndarray,
    soffer: np.ndarray,
    scap: np.ndarray,
    sinv: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    out_dev: np.ndarray,
) -> tuple[int, float]:
    """One replica, no spread: ``_blocks_best`` and the chosen node's best-fit devices in
    ``out_dev`` (-1 padded), as the batch kernel chooses them."""
    none = np.empty(0, dtype=np.int64)
    best, score = _blocks_best(policy, free, gpu_free, capacity, inv_cap, inv_max_cap, mask,
                               mask_blocks, mask_supers, perm, bstart, sstart, bmax, bmin, boffer,
                               bcap, binv, smax, smin, soffer, scap, sinv, rq, wt, none, none,
                               0)  # fmt: skip
    out_dev[:] = -1
    if best >= 0:
        _best_fit_devices(gpu_free, best, rq[GPU], out_dev)
    return best, score
