"""Block search: the best node for any request without scoring every node.

**Layout.** Nodes of one class (same schedulability, GPU model and capacity row) are consecutive
in ``node_order``, in index order, cut into blocks of at most ``B`` nodes; consecutive blocks of one
class form superblocks of at most ``S`` blocks. Every block and superblock therefore has one
capacity row. Each keeps per resource column the largest (``high``) and the smallest (``low``) free
amount of its nodes, its best GPU offer (``_gpu_offer``: ``1000 ×`` fully free devices, or the
largest free device when none is fully free, so that a GPU request ``g`` fits at device level
exactly when ``offer >= g``; each node's offer is kept too), and (``sums``) for every
non-empty subset ``T`` of the columns cpu, memory, gpu the largest and smallest
``Σ_{c∈T} free_c / cap_c`` and the smallest ``Σ_{c∈T} free_c / maxcap_c`` over its nodes, and for
every pair of them the extremes of ``free_c / cap_c − free_c' / cap_c'``. These summaries do not
depend on the request: one set serves every shape, the first call of a shape included, and a
committed placement refreshes one block and one superblock.

**Bounds** (``kernels.bounds``). For a request, a (super)block's bound is at least the score of
every node in it that fits: the search below needs nothing else of them.

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

from typing import TYPE_CHECKING

import numpy as np

from strata_policy.kernels.bounds import _bound_rows, _may_fit, _weight_terms
from strata_policy.kernels.config import inline_kernel, kernel
from strata_policy.kernels.fit import FIRST_FIT, GPU, _best_fit_devices, _resources_fit, _score
from strata_policy.kernels.summaries import _refresh_blocks

if TYPE_CHECKING:  # annotations only: numba types the bundles from the values passed
    from strata_policy.kernels.arrays import BlockSummaries, NodeArrays
    from strata_policy.kernels.layout import BlockLayout


@inline_kernel
def _open_block(
    policy: int,
    b: int,
    nodes: NodeArrays,
    mask: np.ndarray,
    node_offer: np.ndarray,
    layout: BlockLayout,
    request: np.ndarray,
    weights: np.ndarray,
    weight_sum: float,
    spread_codes: np.ndarray,
    used: np.ndarray,
    n_used: int,
    bound: float,
    best: int,
    best_score: float,
) -> tuple[int, float]:
    """Score block ``b``'s nodes: the better of them and (``best``, ``best_score``).

    The GPU fits at device level iff the node's offer covers the request (``_gpu_offer``).
    ``spread_codes`` (empty: no spread) gives per node the code of its spread label value (-1:
    absent); a node whose code is absent or among ``used[:n_used]`` does not fit.

    ``bound`` is the block's bound (``kernels.bounds``: at least the score of each of its nodes
    that fits): once the best scores above it, or equal to it with an index no higher than the
    node just scored, no later node of the block (higher indices) can replace it, and the rest
    of the block is skipped. In a block of alike nodes, whose bound is their exact score, that
    is after the first node that fits."""
    gpu_milli = request[GPU]
    free = nodes.free
    for j in range(layout.block_start[b], layout.block_start[b + 1]):
        n = layout.node_order[j]
        if not mask[n] or node_offer[n] < gpu_milli or _resources_fit(free, n, request) >= 0:
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
            sc = _score(policy, free, nodes.capacity, nodes.inv_capacity, nodes.inv_max_capacity,
                        n, request, weights, weight_sum)  # fmt: skip
        if sc > best_score or (sc == best_score and best >= 0 and n < best):
            best = n
            best_score = sc
        if policy == FIRST_FIT:
            break  # the block's later nodes have higher indices
        if best_score > bound or (best_score == bound and best <= n):
            break  # the block's later nodes score at most the bound and have higher indices
    return best, best_score


@kernel
def _blocks_best(
    policy: int,
    nodes: NodeArrays,
    mask: np.ndarray,
    mask_blocks: np.ndarray,
    mask_supers: np.ndarray,
    select_blocks: np.ndarray,
    select_supers: np.ndarray,
    layout: BlockLayout,
    summaries: BlockSummaries,
    request: np.ndarray,
    weights: np.ndarray,
    spread_codes: np.ndarray,
    used: np.ndarray,
    n_used: int,
    bounds: np.ndarray,
) -> tuple[int, float]:
    """The best node for one replica under a resource policy (-1 when none fits) and its
    score, by the search of the module docstring. A block or superblock may hold a node that
    passes ``mask`` when both its ``mask_*`` and its ``select_*`` entry say so: the static
    mask's levels in two parts (the one-replica path passes its nodes' class levels and the
    selector's, both cached, so that a new selector's first call combines nothing; the batch
    passes its mask's levels twice). ``bounds`` is scratch: a float64 per superblock and per
    block."""
    weight_sum, trusted, plain, factor = _weight_terms(weights)
    node_order = layout.node_order
    block_start = layout.block_start
    super_start = layout.super_start
    node_offer = summaries.node_offer
    n_super = super_start.shape[0] - 1
    s_bound = bounds[:n_super]
    b_bound = bounds[n_super:]
    blocks_only = block_start[:0]  # _bound_rows over blocks, not superblocks
    zero: int = np.int64(0)  # type: ignore[assignment]  # run-time int64 (config)
    top_s = _bound_rows(policy, zero, n_super, summaries.super_high, summaries.super_low,
                        summaries.super_offer, summaries.super_sums, layout.super_capacity,
                        layout.super_inv_capacity, nodes.inv_max_capacity, mask_supers,
                        select_supers, node_order, block_start, super_start, request, weights,
                        weight_sum, trusted, plain, factor, s_bound)  # fmt: skip
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
            leader = node_order[block_start[super_start[s]]]
            if not (u > best_score or (u == best_score and leader < best)):
                continue
        first = super_start[s]
        count = super_start[s + 1] - first
        if policy == FIRST_FIT:
            # A superblock's blocks hold ascending nodes: the first block that yields a node
            # holds its lowest fitting one, and a block starting above the best cannot win.
            for b in range(first, first + count):
                if best >= 0 and node_order[block_start[b]] > best:
                    break
                if (
                    mask_blocks[b]
                    and select_blocks[b]
                    and _may_fit(b, summaries.block_high, summaries.block_offer, request)
                ):
                    before = best
                    best, best_score = _open_block(policy, b, nodes, mask, node_offer, layout,
                                                   request, weights, weight_sum, spread_codes,
                                                   used, n_used, np.inf, best,
                                                   best_score)  # fmt: skip
                    if best != before:
                        break
            continue
        b_top = _bound_rows(policy, first, first + count, summaries.block_high,
                            summaries.block_low, summaries.block_offer, summaries.block_sums,
                            layout.block_capacity, layout.block_inv_capacity,
                            nodes.inv_max_capacity, mask_blocks, select_blocks, node_order,
                            block_start, blocks_only, request, weights, weight_sum, trusted,
                            plain, factor, b_bound)  # fmt: skip
        if b_top < 0:
            continue
        for bstep in range(count + 1):
            # Likewise within: its best block first, then the others that may beat the best.
            b = b_top if bstep == 0 else first + bstep - 1
            if bstep > 0:
                u = b_bound[b]
                if b == b_top or not u > -np.inf:
                    continue
                tie = u == best_score and (best < 0 or node_order[block_start[b]] < best)
                if not (u > best_score or tie):
                    continue
            best, best_score = _open_block(policy, b, nodes, mask, node_offer, layout, request,
                                           weights, weight_sum, spread_codes, used, n_used,
                                           b_bound[b], best, best_score)  # fmt: skip
    if best < 0:
        return -1, 0.0
    return best, best_score


@kernel
def _blocks_place(
    nodes: NodeArrays,
    layout: BlockLayout,
    summaries: BlockSummaries,
    policy: int,
    mask: np.ndarray,
    mask_blocks: np.ndarray,
    mask_supers: np.ndarray,
    select_blocks: np.ndarray,
    select_supers: np.ndarray,
    request: np.ndarray,
    weights: np.ndarray,
    rows: np.ndarray,
    first: int,
    n_rows: int,
    out_dev: np.ndarray,
    bounds: np.ndarray,
    weight_row: np.ndarray,
) -> tuple[int, float, int]:
    """One replica, no spread: first the summaries of nodes ``rows[first:first + n_rows]``
    refreshed (all when ``n_rows < 0``, none when 0; one call where two would pay their
    dispatch twice), then ``_blocks_best`` and the chosen node's best-fit devices in ``out_dev``
    (-1 padded), as the batch kernel chooses them. Returns the node (-1: none fits), its score
    and the devices as a bit set (bit ``d`` for device ``d``; -1 when a node has more than 62
    devices: read ``out_dev``). ``bounds`` is ``_blocks_best``'s scratch. An empty ``weights``
    weighs 1 every column the request asks for and 0 the others (``placement.inputs.
    weight_rows`` without weights), written into ``weight_row`` (scratch, a float64 per
    column): a first call of a shape then builds one array, not two."""
    if weights.shape[0] == 0:
        for c in range(request.shape[0]):
            weight_row[c] = 1.0 if request[c] > 0 else 0.0
        weights = weight_row
    if n_rows != 0:
        _refresh_blocks(nodes, layout, summaries, rows[first:], n_rows)
    none = layout.node_order[:0]
    zero: int = np.int64(0)  # type: ignore[assignment]  # run-time int64 (config)
    best, score = _blocks_best(policy, nodes, mask, mask_blocks, mask_supers, select_blocks,
                               select_supers, layout, summaries, request, weights, none, none,
                               zero, bounds)  # fmt: skip
    out_dev[:] = -1
    bits = 0
    if best >= 0:
        _best_fit_devices(nodes.gpu_free, best, request[GPU], out_dev)
        for d in out_dev:
            if d >= 0:
                bits = bits | (1 << d) if d < 63 and bits >= 0 else -1
    return best, score, bits
