"""Block summaries (``kernels.blocks``' module docstring says what they hold and why): per
block and per superblock, per resource column the largest and smallest free amount, the best
GPU offer, for every subset of cpu, memory, gpu the extremes of ``Σ free_c / cap_c`` and the
smallest ``Σ free_c / maxcap_c``, and for every pair of them the extremes of
``free_c / cap_c − free_c' / cap_c'``; per node its GPU offer. ``_refresh_blocks`` recomputes the
blocks holding given nodes (a committed placement changes one) and their superblocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel
from strata_policy.kernels.fit import MILLI

if TYPE_CHECKING:  # annotations only: numba types the bundles from the values passed
    from strata_policy.kernels.arrays import BlockSummaries, NodeArrays
    from strata_policy.kernels.layout import BlockLayout

_SUBSETS = 8  # subsets of the columns cpu, memory, gpu, as bit masks (0 unused)
_G_MAX = 0  # sums rows: [_G_MAX, T] largest Σ free/cap, [_G_MIN, T] smallest,
_G_MIN = 1  # [_H_MIN, T] smallest Σ free/maxcap
_H_MIN = 2
_D_MIN = 3  # [_D_MIN, P], [_D_MAX, P]: smallest and largest free_c/cap_c − free_c'/cap_c' for
_D_MAX = 4  # the pair P = {c < c'} (P in _PAIRS; the other subsets of these rows stay 0)
_SUM_ROWS = 5
_PAIRS = (3, 5, 6)  # {cpu, memory}, {cpu, gpu}, {memory, gpu}


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
def _subset_sum(t: int, x1: float, x2: float, x4: float) -> float:
    """``Σ x_c`` over the columns in subset ``t`` (bit 0 cpu, 1 memory, 2 gpu), summed in that
    order (the bounds' slack covers the order; see the module docstring)."""
    s = 0.0
    if t & 1:
        s = x1
    if t & 2:
        s = s + x2
    if t & 4:
        s = s + x4
    return s


@inline_kernel
def _pair_difference(t: int, x1: float, x2: float, x4: float) -> float:
    """``x_c − x_c'`` for the pair ``t = {c < c'}`` (bit 0 cpu, 1 memory, 2 gpu)."""
    if t == 3:
        return x1 - x2
    if t == 5:
        return x1 - x4
    return x2 - x4


@inline_kernel
def _summarise_block(
    nodes: NodeArrays, layout: BlockLayout, b: int, summaries: BlockSummaries
) -> None:
    """Block ``b``'s summary rows from its nodes' free amounts and GPU offers
    (``summaries.node_offer``, up to date)."""
    free = nodes.free
    inv_capacity = nodes.inv_capacity
    inv_max_capacity = nodes.inv_max_capacity
    high = summaries.block_high
    low = summaries.block_low
    sums = summaries.block_sums
    node_order = layout.node_order
    first = node_order[layout.block_start[b]]
    for c in range(free.shape[1]):
        high[b, c] = free[first, c]
        low[b, c] = free[first, c]
    summaries.block_offer[b] = 0
    for t in range(1, _SUBSETS):
        sums[b, _G_MAX, t] = -np.inf
        sums[b, _G_MIN, t] = np.inf
        sums[b, _H_MIN, t] = np.inf
    for t in _PAIRS:
        sums[b, _D_MIN, t] = np.inf
        sums[b, _D_MAX, t] = -np.inf
    for j in range(layout.block_start[b], layout.block_start[b + 1]):
        n = node_order[j]
        for c in range(free.shape[1]):
            v = free[n, c]
            high[b, c] = max(high[b, c], v)
            low[b, c] = min(low[b, c], v)
        summaries.block_offer[b] = max(summaries.block_offer[b], summaries.node_offer[n])
        g1 = free[n, 0] * inv_capacity[n, 0]
        g2 = free[n, 1] * inv_capacity[n, 1]
        g4 = free[n, 2] * inv_capacity[n, 2]
        h1 = free[n, 0] * inv_max_capacity[0]
        h2 = free[n, 1] * inv_max_capacity[1]
        h4 = free[n, 2] * inv_max_capacity[2]
        for t in range(1, _SUBSETS):
            g = _subset_sum(t, g1, g2, g4)
            h = _subset_sum(t, h1, h2, h4)
            sums[b, _G_MAX, t] = max(sums[b, _G_MAX, t], g)
            sums[b, _G_MIN, t] = min(sums[b, _G_MIN, t], g)
            sums[b, _H_MIN, t] = min(sums[b, _H_MIN, t], h)
        for t in _PAIRS:
            d = _pair_difference(t, g1, g2, g4)
            sums[b, _D_MIN, t] = min(sums[b, _D_MIN, t], d)
            sums[b, _D_MAX, t] = max(sums[b, _D_MAX, t], d)


@inline_kernel
def _summarise_super(super_start: np.ndarray, s: int, summaries: BlockSummaries) -> None:
    """Superblock ``s``'s summary rows from its blocks'."""
    high, low, offer, sums = (summaries.block_high, summaries.block_low, summaries.block_offer,
                              summaries.block_sums)  # fmt: skip
    s_high, s_low, s_offer, s_sums = (summaries.super_high, summaries.super_low,
                                      summaries.super_offer, summaries.super_sums)  # fmt: skip
    first = super_start[s]
    for c in range(high.shape[1]):  # element by element: a slice copy would allocate
        s_high[s, c] = high[first, c]
        s_low[s, c] = low[first, c]
    s_offer[s] = offer[first]
    for x in range(sums.shape[1]):
        for t in range(_SUBSETS):
            s_sums[s, x, t] = sums[first, x, t]
    for b in range(first + 1, super_start[s + 1]):
        for c in range(high.shape[1]):
            s_high[s, c] = max(s_high[s, c], high[b, c])
            s_low[s, c] = min(s_low[s, c], low[b, c])
        s_offer[s] = max(s_offer[s], offer[b])
        for t in range(1, _SUBSETS):
            s_sums[s, _G_MAX, t] = max(s_sums[s, _G_MAX, t], sums[b, _G_MAX, t])
            s_sums[s, _G_MIN, t] = min(s_sums[s, _G_MIN, t], sums[b, _G_MIN, t])
            s_sums[s, _H_MIN, t] = min(s_sums[s, _H_MIN, t], sums[b, _H_MIN, t])
        for t in _PAIRS:
            s_sums[s, _D_MIN, t] = min(s_sums[s, _D_MIN, t], sums[b, _D_MIN, t])
            s_sums[s, _D_MAX, t] = max(s_sums[s, _D_MAX, t], sums[b, _D_MAX, t])


@kernel
def _refresh_blocks(
    nodes: NodeArrays,
    layout: BlockLayout,
    summaries: BlockSummaries,
    rows: np.ndarray,
    n_rows: int,
) -> None:
    """Recompute the summaries holding nodes ``rows[:n_rows]`` (all of them when ``n_rows < 0``);
    raises ``ValueError`` for a row out of range."""
    # One call site per helper (each is inlined: fewer copies compile faster).
    every = n_rows < 0
    n_nodes = nodes.free.shape[0]
    n_blocks = layout.block_start.shape[0] - 1
    block_of = layout.block_of
    super_of = layout.super_of
    # The GPU offers of the changed nodes first (the others' devices did not move): a block's
    # summary then reads its nodes' offers instead of every node's device row.
    for i in range(n_nodes if every else n_rows):
        n = i if every else rows[i]
        if not 0 <= n < n_nodes:
            raise ValueError("rows out of range")
        summaries.node_offer[n] = _gpu_offer(nodes.gpu_free, n)
    for i in range(n_blocks if every else n_rows):
        if every:
            b = i
        else:
            b = block_of[rows[i]]
            if i > 0 and block_of[rows[i - 1]] == b:
                continue
        _summarise_block(nodes, layout, b, summaries)
        s = super_of[b]
        if every and b + 1 < n_blocks and super_of[b + 1] == s:
            continue  # the superblock is summarised once its last block is
        _summarise_super(layout.super_start, s, summaries)
