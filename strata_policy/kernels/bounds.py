"""Block bounds (``kernels.blocks``): per block or superblock row, the best score any of its
nodes that fit a request can have, from the row's summaries (``kernels.summaries``).

Where the score is monotone in each free amount the bound is ``fit._score`` itself evaluated on
the summary row, with the largest free amounts for the
policies whose score grows with free (LEAST_ALLOCATED, DOT_PRODUCT) and the smallest for those
where it shrinks (MOST_ALLOCATED, BEST_FIT). Every floating-point step of those formulas (``+``,
``-``, ``×`` by a non-negative number, ``/`` by a positive one) is monotone under
round-to-nearest, so the bound is ``>=`` the very float the full scan computes for each fitting
node, and equal to it when the nodes are alike: ties at the top, common in a cluster of one node
type, are pruned exactly.

Those bounds combine each column's extreme from possibly different nodes, which is loose once
the nodes of a block differ (after a while of spreading, say). With *plain* weights (equal and
positive on a subset ``T`` of cpu, memory, gpu, zero elsewhere: the default for such requests)
LEAST_ALLOCATED, MOST_ALLOCATED and BEST_FIT are linear in ``Σ_{c∈T} free_c / cap_c`` (or
``/ maxcap_c``) with one capacity row per block, so the stored sums bound them tightly:
``100·w/Σw · (max Σ − Σ_{c∈T} req_c / cap_c)`` for LEAST_ALLOCATED and alike. These are computed
in floating point with a different order than the scores, so they get a slack of ``1e-9``
(scores are within ``[0, 100]``, rounding errors ``~1e-13``); the bound used is the smaller of
the two, which keeps the exact one for blocks of identical nodes.

BALANCED_ALLOCATION is not monotone: a (super)block whose nodes have equal free amounts gets its
exact score; otherwise the bound is ``100 · (1 − sqrt(V)) + 1e-9`` for a lower bound ``V`` on the
variance of the ``k`` weighted utilisations ``u_c`` after placing (the slack covers rounding;
scores are at most 100). ``V`` is the largest of: ``gap² / 2k`` with ``gap = max low − min high``
over per-column utilisation intervals ``[lo_c, hi_c]`` (two columns that far apart); per pair
``p`` of cpu, memory, gpu, ``e_p² / 2k`` where ``e_p`` is how far from 0 the pair's difference
``u_c − u_c'`` must be, read from the row's extremes of ``free_c/cap_c − free_c'/cap_c'`` (the
request and the capacity row are constant over the row); and ``Σ_p e_p² / k²`` (since
``Σ_{pairs} (u_c − u_c')² = k² · variance``). Nodes whose utilisations move together (the usual
case after a while of one policy) have narrow pair ranges where the per-column box is wide.

DOT_PRODUCT ``Σ a_c · x_c`` (``a_c = w_c·req_c/cap_c``, ``x_c = free_c/cap_c``) is bounded by the
smaller of the score on the ``high`` row and a telescoped sum over nested subsets of cpu, memory,
gpu taken by decreasing ``a_c``: ``(a_1−a_2)·max x_1 + (a_2−a_3)·max (x_1+x_2) + a_3·max Σx``,
read from the stored subset sums, with a slack of ``1e-9·(1 + bound)`` (the terms are
non-negative, so rounding is relative).

A row that cannot hold the request (a column's largest free amount below the request, the GPU
offer too small, no node passing the static mask) gets ``-inf``: it is skipped. With non-finite
weights no bound is trusted and every fitting row gets ``+inf``.
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
    _score,
)
from strata_policy.kernels.summaries import _D_MAX, _D_MIN, _G_MAX, _G_MIN, _H_MIN, _PAIRS

_SLACK = 1e-9


@inline_kernel
def _bound(
    policy: int,
    i: int,
    high: np.ndarray,
    low: np.ndarray,
    offer: np.ndarray,
    sums: np.ndarray,
    capacity: np.ndarray,
    inv_capacity: np.ndarray,
    inv_max_capacity: np.ndarray,
    request: np.ndarray,
    weights: np.ndarray,
    weight_sum: float,
    trusted: bool,
    plain: int,
    factor: float,
) -> float:
    """Row ``i``'s bound (module docstring): ``-inf`` when none of its nodes can fit. ``plain``
    is the subset of cpu/memory/gpu carrying plain weights (0: not plain), ``factor``
    ``100·w/Σw``. The monotone bounds are ``fit._score`` itself on the summary rows."""
    if not _may_fit(i, high, offer, request):
        return -np.inf
    if not trusted:
        return np.inf
    if policy == FIRST_FIT:
        return 0.0
    if policy == BALANCED_ALLOCATION and not _alike(i, high, low, weights):
        return _balanced_bound(i, high, low, sums, capacity, inv_capacity, request, weights)
    # The score itself on the summary row (BALANCED_ALLOCATION: alike nodes, their own score).
    free_row = low if policy in (MOST_ALLOCATED, BEST_FIT) else high
    u = _score(policy, free_row, capacity, inv_capacity, inv_max_capacity, i, request, weights,
               weight_sum)  # fmt: skip
    if policy == DOT_PRODUCT:
        return min(u, _dot_bound(i, high, sums, inv_capacity, request, weights))
    if plain == 0 or policy == BALANCED_ALLOCATION:
        return u
    # Over the plain columns: Σ req_c / cap_c (BEST_FIT: / maxcap_c), and Σ cap_c / cap_c
    # (the count of columns the row has, as the same float the scores' terms sum to).
    request_share = 0.0
    capacity_share = 0.0
    for c in range(3):
        if plain & (1 << c):
            if policy == BEST_FIT:
                request_share += request[c] * inv_max_capacity[c]
            else:
                request_share += request[c] * inv_capacity[i, c]
                capacity_share += capacity[i, c] * inv_capacity[i, c]
    linear: float = 100.0 - factor * (sums[i, _H_MIN, plain] - request_share)
    if policy == LEAST_ALLOCATED:
        linear = factor * (sums[i, _G_MAX, plain] - request_share)
    elif policy == MOST_ALLOCATED:
        linear = factor * (capacity_share - sums[i, _G_MIN, plain] + request_share)
    return min(u, linear + _SLACK)


@inline_kernel
def _may_fit(i: int, high: np.ndarray, offer: np.ndarray, request: np.ndarray) -> bool:
    """Row ``i`` may hold a node that fits: every column's largest free amount and its best GPU
    offer cover the request."""
    for c in range(request.shape[0]):
        if high[i, c] < request[c]:
            return False
    g = request[GPU]
    return not (g > 0 and offer[i] < g)


@inline_kernel
def _alike(i: int, high: np.ndarray, low: np.ndarray, weights: np.ndarray) -> bool:
    """Row ``i``'s nodes have equal free amounts on every weighted column."""
    for c in range(weights.shape[0]):  # noqa: SIM110  # numba compiles loops, not genexps
        if weights[c] > 0.0 and high[i, c] != low[i, c]:
            return False
    return True


@inline_kernel
def _balanced_bound(
    i: int,
    high: np.ndarray,
    low: np.ndarray,
    sums: np.ndarray,
    capacity: np.ndarray,
    inv_capacity: np.ndarray,
    request: np.ndarray,
    weights: np.ndarray,
) -> float:
    """BALANCED_ALLOCATION's bound for a row of unlike nodes (module docstring): the largest of
    three lower bounds on the variance of the utilisations ``u`` after placing, as a score."""
    k_cols = 0
    top_lo = -np.inf
    bottom_hi = np.inf
    for c in range(request.shape[0]):
        if weights[c] > 0.0:
            k_cols += 1
            x_lo = min(1.0, (capacity[i, c] - high[i, c] + request[c]) * inv_capacity[i, c])
            x_hi = min(
                1.0, (capacity[i, c] - max(low[i, c], request[c]) + request[c]) * inv_capacity[i, c]
            )
            top_lo = max(top_lo, x_lo)
            bottom_hi = min(bottom_hi, x_hi)
    if k_cols == 0:
        return 100.0
    k = float(k_cols)
    gap = top_lo - bottom_hi
    var = gap * gap / (2.0 * k) if gap > 0.0 else 0.0
    squares = 0.0
    for t in _PAIRS:
        c = 1 if t == 6 else 0
        d = 1 if t == 3 else 2
        if weights[c] > 0.0 and weights[d] > 0.0:
            # u_c − u_d = (e_c − e_d) + (r_c − r_d) − (x_c − x_d): e is 1 where the row has
            # capacity (0 where inv_capacity is 0, and so is u), r = req / cap, x = free / cap.
            e_c = 1.0 if inv_capacity[i, c] > 0.0 else 0.0
            e_d = 1.0 if inv_capacity[i, d] > 0.0 else 0.0
            base = (e_c - e_d) + (request[c] * inv_capacity[i, c] - request[d] * inv_capacity[i, d])
            least = base - sums[i, _D_MAX, t]
            most = base - sums[i, _D_MIN, t]
            apart = least if least > 0.0 else (-most if most < 0.0 else 0.0)
            squares += apart * apart
            var = max(var, apart * apart / (2.0 * k))
    var = max(var, squares / (k * k))
    if not var > 0.0:
        return 100.0
    return (1.0 - math.sqrt(var)) * 100.0 + _SLACK


@inline_kernel
def _dot_bound(
    i: int,
    high: np.ndarray,
    sums: np.ndarray,
    inv_capacity: np.ndarray,
    request: np.ndarray,
    weights: np.ndarray,
) -> float:
    """DOT_PRODUCT's bound from the subset sums (module docstring): with ``a_c = w_c·req_c/cap_c``
    sorted ``a_1 >= a_2 >= a_3`` over cpu, memory, gpu and ``x = free / capacity``,
    ``Σ a_c·x_c = (a_1−a_2)·x_1 + (a_2−a_3)·(x_1+x_2) + a_3·(x_1+x_2+x_3)``, each term at most
    its coefficient times the row's largest sum over that subset; other columns at their
    largest free amount."""
    extra = 0.0
    for c in range(3, request.shape[0]):
        if weights[c] > 0.0:
            extra += weights[c] * (
                (request[c] * inv_capacity[i, c]) * (high[i, c] * inv_capacity[i, c])
            )
    a1 = weights[0] * (request[0] * inv_capacity[i, 0]) if weights[0] > 0.0 else 0.0
    a2 = weights[1] * (request[1] * inv_capacity[i, 1]) if weights[1] > 0.0 else 0.0
    a4 = weights[2] * (request[2] * inv_capacity[i, 2]) if weights[2] > 0.0 else 0.0
    # Sort (a, bit) descending: three compare-and-swaps.
    v1, b1, v2, b2, v3, b3 = a1, 1, a2, 2, a4, 4
    if v2 > v1:
        v1, b1, v2, b2 = v2, b2, v1, b1
    if v3 > v2:
        v2, b2, v3, b3 = v3, b3, v2, b2
    if v2 > v1:
        v1, b1, v2, b2 = v2, b2, v1, b1
    bound: float = (v1 - v2) * sums[i, _G_MAX, b1] + extra
    if v2 > 0.0:
        bound += (v2 - v3) * sums[i, _G_MAX, b1 | b2]
    if v3 > 0.0:
        bound += v3 * sums[i, _G_MAX, 7]
    return bound + _SLACK * (1.0 + abs(bound))


@kernel
def _weight_terms(weights: np.ndarray) -> tuple[float, bool, int, float]:
    """What the bounds take from a weight row: the weight sum (1 when not positive), whether
    every weight is finite (``trusted``: else no bound is trusted), the subset of cpu, memory,
    gpu carrying plain weights (0: not plain) and ``factor = 100·w/Σw`` (module docstring)."""
    weight_sum = 0.0
    trusted = True
    for c in range(weights.shape[0]):
        weight_sum += weights[c]
        if not math.isfinite(weights[c]):
            trusted = False
    if weight_sum <= 0.0:
        weight_sum = 1.0
    trusted = trusted and math.isfinite(weight_sum)
    plain = 0  # the subset of cpu/memory/gpu with plain weights (module docstring)
    w_plain = 0.0
    for c in range(weights.shape[0]):
        w = weights[c]
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
    return weight_sum, trusted, plain, factor


@kernel
def _bound_rows(
    policy: int,
    first: int,
    stop: int,
    high: np.ndarray,
    low: np.ndarray,
    offer: np.ndarray,
    sums: np.ndarray,
    capacity: np.ndarray,
    inv_capacity: np.ndarray,
    inv_max_capacity: np.ndarray,
    row_mask: np.ndarray,
    row_select: np.ndarray,
    node_order: np.ndarray,
    block_start: np.ndarray,
    super_start: np.ndarray,
    request: np.ndarray,
    weights: np.ndarray,
    weight_sum: float,
    trusted: bool,
    plain: int,
    factor: float,
    out: np.ndarray,
) -> int:
    """Bounds of rows ``first:stop`` of one level into ``out``; the row with the largest bound
    (the lowest first node on ties), -1 when none can fit. A row is bounded when both
    ``row_mask`` and ``row_select`` hold for it (a static mask's levels in two parts: its
    nodes' class and the selector; ``kernels.blocks._blocks_best``), else it gets ``-inf``.
    Rows are superblocks when ``super_start`` is given (their first block's first node leads them),
    else blocks. One function for both levels, so that ``_bound`` is compiled once."""
    top = -np.inf
    top_row = -1
    top_node = -1
    for i in range(first, stop):
        u = -np.inf
        if row_mask[i] and row_select[i]:
            u = _bound(policy, i, high, low, offer, sums, capacity, inv_capacity,
                       inv_max_capacity, request, weights, weight_sum, trusted, plain,
                       factor)  # fmt: skip
        out[i] = u
        node = node_order[block_start[super_start[i] if super_start.shape[0] > 0 else i]]
        if u > top or (u == top and top_row >= 0 and node < top_node):
            top = u
            top_row = i
            top_node = node
    return top_row
