"""Block bounds: the best node for any request without scoring every node.

**Layout.** Nodes of one class (same schedulability, GPU model and capacity row) are consecutive
in ``perm``, in index order, cut into blocks of at most ``B`` nodes; consecutive blocks of one
class form superblocks of at most ``S`` blocks. Every block and superblock therefore has one
capacity row. Each keeps per resource column the largest (``hi``) and the smallest (``lo``) free
amount of its nodes, its best GPU offer (``_gpu_offer``: ``1000 ×`` fully free devices, or the
largest free device when none is fully free, so that a GPU request ``g`` fits at device level
exactly when ``offer >= g``; each node's offer is kept too), and (``sums``) for every
non-empty subset ``T`` of the columns
cpu, memory, gpu the largest and smallest ``Σ_{c∈T} free_c / cap_c`` and the smallest
``Σ_{c∈T} free_c / maxcap_c`` over its nodes. These summaries do not depend on the request: one
set serves every shape, the first call of a shape included, and a committed placement refreshes
one block and one superblock.

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

Those bounds combine each column's extreme from possibly different nodes, which is loose once
the nodes of a block differ (after a while of spreading, say). With *plain* weights (equal and
positive on a subset ``T`` of cpu, memory, gpu, zero elsewhere: the default for such requests)
LEAST_ALLOCATED, MOST_ALLOCATED and BEST_FIT are linear in ``Σ_{c∈T} free_c / cap_c`` (or
``/ maxcap_c``) with one capacity row per block, so the stored sums bound them tightly:
``100·w/Σw · (max Σ − Σ_{c∈T} req_c / cap_c)`` for LEAST_ALLOCATED and alike. These are computed
in floating point with a different order than the scores, so they get a slack of ``1e-9``
(scores are within ``[0, 100]``, rounding errors ``~1e-13``); the bound used is the smaller of
the two, which keeps the exact one for blocks of identical nodes.

**Search.** Bound every superblock; open the best one (lowest first node on ties), then every
other whose bound is above the best score found so far, or equal to it with a lower first node.
Opening a superblock does the same over its blocks, and opening a block scores its nodes with
``fit._score`` (feasibility as everywhere: mask, every column, device-level GPU, spread). A node
replaces the best when its score is strictly higher, or equal with a lower index: the answer and
its score are the full scan's, bit for bit (highest score, lowest index, NaN never chosen). The
work is ``N / (B·S)`` superblock bounds, ``S`` block bounds per opened superblock and ``B`` nodes
per opened block; where bounds prune nothing it degrades to a full scan, never worse.
FIRST_FIT's bounds only say "may fit", so inside a superblock it walks the blocks in node order
and stops at the first that yields a node (a superblock's blocks hold ascending nodes).
"""

from __future__ import annotations

import math

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel
from strata_policy.kernels.fit import (
    BALANCED_ALLOCATION,
    BEST_FIT,
    DOT_PRODUCT,
    FIRST_FIT,
    GPU,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    _best_fit_devices,
    _resources_fit,
    _score,
)
from strata_policy.kernels.summaries import _G_MAX, _G_MIN, _H_MIN, _refresh_blocks

_SLACK = 1e-9


@inline_kernel
def _bound(
    policy: int,
    i: int,
    hi: np.ndarray,
    lo: np.ndarray,
    offer: np.ndarray,
    sums: np.ndarray,
    cap: np.ndarray,
    inv: np.ndarray,
    inv_max_cap: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    weight_sum: float,
    trusted: bool,
    plain: int,
    factor: float,
) -> float:
    """Row ``i``'s bound (module docstring): ``-inf`` when none of its nodes can fit. ``plain``
    is the subset of cpu/memory/gpu carrying plain weights (0: not plain), ``factor``
    ``100·w/Σw``. The monotone bounds are ``fit._score`` itself on the summary rows."""
    if not _may_fit(i, hi, offer, rq):
        return -np.inf
    if not trusted:
        return np.inf
    if policy == FIRST_FIT:
        return 0.0
    if policy == BALANCED_ALLOCATION and not _alike(i, hi, lo, wt):
        return _balanced_bound(i, hi, lo, cap, inv, rq, wt)
    # The score itself on the summary row (BALANCED_ALLOCATION: alike nodes, their own score).
    u = _score(policy, lo if policy in (MOST_ALLOCATED, BEST_FIT) else hi, cap, inv, inv_max_cap,
               i, rq, wt, weight_sum)  # fmt: skip
    if plain == 0 or policy in (DOT_PRODUCT, BALANCED_ALLOCATION):
        return u
    k = 0.0
    kc = 0.0
    for c in range(3):
        if plain & (1 << c):
            if policy == BEST_FIT:
                k += rq[c] * inv_max_cap[c]
            else:
                k += rq[c] * inv[i, c]
                kc += cap[i, c] * inv[i, c]
    a: float = 100.0 - factor * (sums[i, _H_MIN, plain] - k)
    if policy == LEAST_ALLOCATED:
        a = factor * (sums[i, _G_MAX, plain] - k)
    elif policy == MOST_ALLOCATED:
        a = factor * (kc - sums[i, _G_MIN, plain] + k)
    return min(u, a + _SLACK)


@inline_kernel
def _may_fit(i: int, hi: np.ndarray, offer: np.ndarray, rq: np.ndarray) -> bool:
    """Row ``i`` may hold a node that fits: every column's largest free amount and its best GPU
    offer cover the request."""
    for c in range(rq.shape[0]):
        if hi[i, c] < rq[c]:
            return False
    g = rq[GPU]
    return not (g > 0 and offer[i] < g)


@inline_kernel
def _alike(i: int, hi: np.ndarray, lo: np.ndarray, wt: np.ndarray) -> bool:
    """Row ``i``'s nodes have equal free amounts on every weighted column."""
    for c in range(wt.shape[0]):  # noqa: SIM110  # numba compiles loops, not genexps
        if wt[c] > 0.0 and hi[i, c] != lo[i, c]:
            return False
    return True


@inline_kernel
def _balanced_bound(
    i: int,
    hi: np.ndarray,
    lo: np.ndarray,
    cap: np.ndarray,
    inv: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
) -> float:
    """BALANCED_ALLOCATION's bound for a row of unlike nodes (module docstring)."""
    k_cols = 0
    top_lo = -np.inf
    bottom_hi = np.inf
    for c in range(rq.shape[0]):
        if wt[c] > 0.0:
            k_cols += 1
            x_lo = min(1.0, (cap[i, c] - hi[i, c] + rq[c]) * inv[i, c])
            x_hi = min(1.0, (cap[i, c] - max(lo[i, c], rq[c]) + rq[c]) * inv[i, c])
            top_lo = max(top_lo, x_lo)
            bottom_hi = min(bottom_hi, x_hi)
    gap = top_lo - bottom_hi
    if k_cols == 0 or not gap > 0.0:
        return 100.0
    return (1.0 - gap / math.sqrt(2.0 * k_cols)) * 100.0 + _SLACK


@inline_kernel
def _open_block(
    policy: int,
    b: int,
    free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    node_offer: np.ndarray,
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

    The GPU fits at device level iff the node's offer covers the request (``_gpu_offer``).
    ``spread_codes`` (empty: no spread) gives per node the code of its spread label value (-1:
    absent); a node whose code is absent or among ``used[:n_used]`` does not fit."""
    g = rq[GPU]
    for j in range(bstart[b], bstart[b + 1]):
        n = perm[j]
        if not mask[n] or node_offer[n] < g or _resources_fit(free, n, rq) >= 0:
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
def _bound_rows(
    policy: int,
    first: int,
    stop: int,
    hi: np.ndarray,
    lo: np.ndarray,
    offer: np.ndarray,
    sums: np.ndarray,
    cap: np.ndarray,
    inv: np.ndarray,
    inv_max_cap: np.ndarray,
    row_mask: np.ndarray,
    perm: np.ndarray,
    bstart: np.ndarray,
    sstart: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    weight_sum: float,
    trusted: bool,
    plain: int,
    factor: float,
    out: np.ndarray,
) -> int:
    """Bounds of rows ``first:stop`` of one level into ``out``; the row with the largest bound
    (the lowest first node on ties), -1 when none can fit. Rows are superblocks when ``sstart``
    is given (their first block's first node leads them), else blocks. One function for both
    levels, so that ``_bound`` is compiled once."""
    top = -np.inf
    top_row = -1
    top_node = -1
    for i in range(first, stop):
        u = -np.inf
        if row_mask[i]:
            u = _bound(policy, i, hi, lo, offer, sums, cap, inv, inv_max_cap, rq, wt, weight_sum,
                       trusted, plain, factor)  # fmt: skip
        out[i] = u
        node = perm[bstart[sstart[i] if sstart.shape[0] > 0 else i]]
        if u > top or (u == top and top_row >= 0 and node < top_node):
            top = u
            top_row = i
            top_node = node
    return top_row


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
    hi: np.ndarray,
    lo: np.ndarray,
    offer: np.ndarray,
    sums: np.ndarray,
    bcap: np.ndarray,
    binv: np.ndarray,
    s_hi: np.ndarray,
    s_lo: np.ndarray,
    s_offer: np.ndarray,
    s_sums: np.ndarray,
    scap: np.ndarray,
    sinv: np.ndarray,
    node_offer: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    spread_codes: np.ndarray,
    used: np.ndarray,
    n_used: int,
    bounds: np.ndarray,
) -> tuple[int, float]:
    """The best node for one replica under a resource policy (-1 when none fits) and its
    score, by the search of the module docstring. ``bounds`` is scratch: a float64 per
    superblock and per block."""
    weight_sum = 0.0
    trusted = True
    for c in range(wt.shape[0]):
        weight_sum += wt[c]
        if not math.isfinite(wt[c]):
            trusted = False
    if weight_sum <= 0.0:
        weight_sum = 1.0
    trusted = trusted and math.isfinite(weight_sum)
    plain = 0  # the subset of cpu/memory/gpu with plain weights (module docstring)
    w_plain = 0.0
    for c in range(wt.shape[0]):
        w = wt[c]
        if w == 0.0:
            continue
        if c >= 3 or not w > 0.0 or (plain != 0 and w != w_plain):
            plain = -1
            break
        w_plain = w
        plain |= 1 << c
    if plain < 0 or not trusted:
        plain = 0
    factor = w_plain * 100.0 / weight_sum
    n_super = sstart.shape[0] - 1
    s_bound = bounds[:n_super]
    b_bound = bounds[n_super:]
    blocks_only = bstart[:0]  # _bound_rows over blocks, not superblocks
    zero: int = np.int64(0)  # type: ignore[assignment]  # run-time int64 (config)
    top_s = _bound_rows(policy, zero, n_super, s_hi, s_lo, s_offer, s_sums, scap, sinv,
                        inv_max_cap, mask_supers, perm, bstart, sstart, rq, wt, weight_sum,
                        trusted, plain, factor, s_bound)  # fmt: skip
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
        first = sstart[s]
        count = sstart[s + 1] - first
        if policy == FIRST_FIT:
            # A superblock's blocks hold ascending nodes: the first block that yields a node
            # holds its lowest fitting one, and a block starting above the best cannot win.
            for b in range(first, first + count):
                if best >= 0 and perm[bstart[b]] > best:
                    break
                if mask_blocks[b] and _may_fit(b, hi, offer, rq):
                    before = best
                    best, best_score = _open_block(policy, b, free, capacity, inv_cap,
                                                   inv_max_cap, mask, node_offer, perm, bstart,
                                                   rq, wt, weight_sum, spread_codes, used,
                                                   n_used, best, best_score)  # fmt: skip
                    if best != before:
                        break
            continue
        b_top = _bound_rows(policy, first, first + count, hi, lo, offer, sums, bcap, binv,
                            inv_max_cap, mask_blocks, perm, bstart, blocks_only, rq, wt,
                            weight_sum, trusted, plain, factor, b_bound)  # fmt: skip
        if b_top < 0:
            continue
        for bstep in range(count + 1):
            # Likewise within: its best block first, then the others that may beat the best.
            b = b_top if bstep == 0 else first + bstep - 1
            if bstep > 0:
                u = b_bound[b]
                if b == b_top or not u > -np.inf:
                    continue
                tie = u == best_score and (best < 0 or perm[bstart[b]] < best)
                if not (u > best_score or tie):
                    continue
            best, best_score = _open_block(policy, b, free, capacity, inv_cap, inv_max_cap, mask,
                                           node_offer, perm, bstart, rq, wt, weight_sum,
                                           spread_codes, used, n_used, best,
                                           best_score)  # fmt: skip
    if best < 0:
        return -1, 0.0
    return best, best_score


@kernel
def _blocks_place(
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    perm: np.ndarray,
    bstart: np.ndarray,
    sstart: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
    offer: np.ndarray,
    sums: np.ndarray,
    bcap: np.ndarray,
    binv: np.ndarray,
    s_hi: np.ndarray,
    s_lo: np.ndarray,
    s_offer: np.ndarray,
    s_sums: np.ndarray,
    scap: np.ndarray,
    sinv: np.ndarray,
    node_offer: np.ndarray,
    block_of: np.ndarray,
    super_of: np.ndarray,
    policy: int,
    mask: np.ndarray,
    mask_blocks: np.ndarray,
    mask_supers: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    rows: np.ndarray,
    first: int,
    n_rows: int,
    out_dev: np.ndarray,
    bounds: np.ndarray,
) -> tuple[int, float, int]:
    """One replica, no spread: first the summaries of nodes ``rows[first:first + n_rows]``
    refreshed (all when ``n_rows < 0``, none when 0; one call where two would pay their
    dispatch twice), then ``_blocks_best`` and the chosen node's best-fit devices in ``out_dev``
    (-1 padded), as the batch kernel chooses them. Returns the node (-1: none fits), its score
    and the devices as a bit set (bit ``d`` for device ``d``; -1 when a node has more than 62
    devices: read ``out_dev``). ``bounds`` is ``_blocks_best``'s scratch."""
    if n_rows != 0:
        _refresh_blocks(free, gpu_free, inv_cap, inv_max_cap, perm, bstart, block_of, sstart,
                        super_of, hi, lo, offer, sums, s_hi, s_lo, s_offer, s_sums, node_offer,
                        rows[first:], n_rows)  # fmt: skip
    none = perm[:0]
    zero: int = np.int64(0)  # type: ignore[assignment]  # run-time int64 (config)
    best, score = _blocks_best(policy, free, gpu_free, capacity, inv_cap, inv_max_cap, mask,
                               mask_blocks, mask_supers, perm, bstart, sstart, hi, lo, offer,
                               sums, bcap, binv, s_hi, s_lo, s_offer, s_sums, scap, sinv,
                               node_offer, rq, wt, none, none, zero, bounds)  # fmt: skip
    out_dev[:] = -1
    bits = 0
    if best >= 0:
        _best_fit_devices(gpu_free, best, rq[GPU], out_dev)
        for d in out_dev:
            if d >= 0:
                bits = bits | (1 << d) if d < 63 and bits >= 0 else -1
    return best, score, bits
