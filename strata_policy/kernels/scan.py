"""One replica, one fused pass: feasibility, score and argmax over every node.

The first ``place_one`` call of a request shape does not build a score tree (``kernels.tree``,
O(N) work plus a tree's worth of memory traffic, worth it only when the shape comes again): it
scans the nodes once, keeping the best feasible node (strictly higher score wins, so ties go to
the lowest index and a NaN or ``-inf`` score is never chosen; FIRST_FIT stops at the first
feasible node). The per-node checks and scores are the very helpers the batch kernel and the
trees use, so the answer and its score are bit-equal to theirs.

The policy is fixed per loop: ``_scan_policy`` is inlined once per policy with a literal code,
so the compiler folds the policy tests out of the per-node body (a run-time policy test in the
loop costs about 3×).
"""

from __future__ import annotations

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
    _gpu_fits,
    _resources_fit,
    _score,
)


@inline_kernel
def _scan_policy(
    policy: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    weight_sum: float,
) -> tuple[int, float]:
    """The best feasible node (-1 when none) and its score, ``policy`` a compile-time code."""
    best = -1
    best_score = -np.inf
    g = rq[GPU]
    for n in range(free.shape[0]):
        if not mask[n] or _resources_fit(free, n, rq) >= 0 or not _gpu_fits(gpu_free, n, g):
            continue
        if policy == FIRST_FIT:
            return n, 0.0
        sc = _score(policy, free, capacity, inv_cap, inv_max_cap, n, rq, wt, weight_sum)
        if sc > best_score:
            best = n
            best_score = sc
    return best, best_score


@kernel
def _scan_one(
    policy: int,
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    mask: np.ndarray,
    rq: np.ndarray,
    wt: np.ndarray,
    out_dev: np.ndarray,
) -> tuple[int, float]:
    """One replica under a resource policy (not FGD, not RANDOM; no spread): the best node
    (-1 when none fits), its score, and its best-fit devices in ``out_dev`` (-1 padded)."""
    weight_sum = 0.0
    for c in range(wt.shape[0]):
        weight_sum += wt[c]
    if weight_sum <= 0.0:
        weight_sum = 1.0
    if policy == FIRST_FIT:
        best, sc = _scan_policy(
            FIRST_FIT, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, rq, wt, weight_sum
        )
    elif policy == BEST_FIT:
        best, sc = _scan_policy(
            BEST_FIT, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, rq, wt, weight_sum
        )
    elif policy == LEAST_ALLOCATED:
        best, sc = _scan_policy(
            LEAST_ALLOCATED,
            free,
            gpu_free,
            capacity,
            inv_cap,
            inv_max_cap,
            mask,
            rq,
            wt,
            weight_sum,
        )
    elif policy == MOST_ALLOCATED:
        best, sc = _scan_policy(
            MOST_ALLOCATED, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, rq, wt, weight_sum
        )
    elif policy == BALANCED_ALLOCATION:
        best, sc = _scan_policy(
            BALANCED_ALLOCATION,
            free,
            gpu_free,
            capacity,
            inv_cap,
            inv_max_cap,
            mask,
            rq,
            wt,
            weight_sum,
        )
    elif policy == DOT_PRODUCT:
        best, sc = _scan_policy(
            DOT_PRODUCT, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, rq, wt, weight_sum
        )
    else:
        best, sc = -1, 0.0
    out_dev[:] = -1
    if best < 0:
        return -1, 0.0
    _best_fit_devices(gpu_free, best, rq[GPU], out_dev)
    return best, sc
