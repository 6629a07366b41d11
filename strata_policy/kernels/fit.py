"""Per-node feasibility, device choice and scores, shared by the placement kernels.

Everything here is a small ``@njit`` function over one node's row of the state arrays; the batch
loop in ``place.py`` inlines them. Column 0 is ``cpu`` and column 2 is ``gpu`` (the NodeMatrix
layout). A GPU request ``g`` is a share when ``0 < g < 1000`` (one device with ``>= g`` free) and
``k = g // 1000`` whole, fully free devices otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel

CPU = 0
GPU = 2
MILLI = 1000

FIRST_FIT = 0
BEST_FIT = 1
LEAST_ALLOCATED = 2
MOST_ALLOCATED = 3
BALANCED_ALLOCATION = 4
DOT_PRODUCT = 5
FRAGMENTATION_AWARE = 6
RANDOM = 7

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_DEVICE_SALT = np.uint64(0xD1B54A32D192ED03)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)


@inline_kernel
def _mix64(x: np.uint64) -> np.uint64:
    """SplitMix64's finaliser: a bijective hash of 64 bits (the RANDOM policy's source)."""
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


@inline_kernel
def _node_hash(seed: np.uint64, replica: int, n: int) -> np.uint64:
    """The RANDOM policy's draw for replica ``replica`` on node ``n``."""
    return _mix64(seed ^ _mix64(np.uint64(n) * _GOLDEN + np.uint64(replica)))


@kernel
def _device_draw(h: np.uint64, i: int) -> np.uint64:
    """The ``i``-th device draw derived from a node's hash."""
    return _mix64(h ^ (_DEVICE_SALT + np.uint64(i)))


@inline_kernel
def _resources_fit(free: np.ndarray, n: int, req: np.ndarray) -> int:
    """-1 when every column fits, else the first short column."""
    for c in range(req.shape[0]):
        if free[n, c] < req[c]:
            return c
    return -1


@inline_kernel
def _gpu_fits(gpu_free: np.ndarray, n: int, g: int) -> bool:
    """Device-level GPU fit: a share needs one device with ``>= g``; ``k × 1000`` k free ones."""
    if g == 0:
        return True
    if g < MILLI:
        for d in range(gpu_free.shape[1]):  # noqa: SIM110  # numba compiles loops, not genexps
            if gpu_free[n, d] >= g:
                return True
        return False
    need = g // MILLI
    for d in range(gpu_free.shape[1]):
        if gpu_free[n, d] == MILLI:
            need -= 1
            if need == 0:
                return True
    return False


@kernel
def _best_fit_devices(gpu_free: np.ndarray, n: int, g: int, out: np.ndarray) -> None:
    """Best-fit devices into ``out`` (-1 padded): the share's device with least free that fits
    (lowest index on ties); the lowest-indexed fully free devices for whole ones."""
    out[:] = -1
    if g == 0:
        return
    if g < MILLI:
        best = -1
        for d in range(gpu_free.shape[1]):
            f = gpu_free[n, d]
            if f >= g and (best < 0 or f < gpu_free[n, best]):
                best = d
        out[0] = best
        return
    k = 0
    need = g // MILLI
    for d in range(gpu_free.shape[1]):
        if k < need and gpu_free[n, d] == MILLI:
            out[k] = d
            k += 1


@kernel
def _random_devices(gpu_free: np.ndarray, n: int, g: int, h: np.uint64, out: np.ndarray) -> None:
    """Uniformly random fitting devices (seeded by ``h``), ascending: a partial Fisher–Yates
    shuffle over the fitting devices in index order (in ``out`` itself, which has a slot per
    device), then the chosen ones sorted."""
    out[:] = -1
    if g == 0:
        return
    per = g if g < MILLI else MILLI
    need = 1 if g < MILLI else g // MILLI
    count = 0
    for d in range(gpu_free.shape[1]):
        if gpu_free[n, d] >= per:
            out[count] = d
            count += 1
    for i in range(need):
        j = i + int(_device_draw(h, i) % np.uint64(count - i))
        out[i], out[j] = out[j], out[i]
    for i in range(1, need):  # insertion sort of the chosen few
        x = out[i]
        k = i
        while k > 0 and out[k - 1] > x:
            out[k] = out[k - 1]
            k -= 1
        out[k] = x
    out[need:] = -1


@inline_kernel
def _score(
    policy: int,
    free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    n: int,
    req: np.ndarray,
    weights: np.ndarray,
    weight_sum: float,
) -> float:
    """The score of a feasible node under a resource policy (higher wins); see DESIGN §3.

    ``f`` terms use the node's own capacity (``inv_cap`` holds ``1/cap``, 0 where the node has
    none); BEST_FIT measures what is left over against the cluster's largest node per resource
    (``inv_max_cap``), so that absolute leftovers compare across node sizes.
    """
    s = 0.0
    if policy == LEAST_ALLOCATED:
        for c in range(req.shape[0]):
            if weights[c] > 0.0:
                s += weights[c] * ((free[n, c] - req[c]) * inv_cap[n, c])
        return s * 100.0 / weight_sum
    if policy == MOST_ALLOCATED:
        for c in range(req.shape[0]):
            if weights[c] > 0.0:
                s += weights[c] * ((capacity[n, c] - free[n, c] + req[c]) * inv_cap[n, c])
        return s * 100.0 / weight_sum
    if policy == BEST_FIT:
        for c in range(req.shape[0]):
            if weights[c] > 0.0:
                s += weights[c] * ((free[n, c] - req[c]) * inv_max_cap[c])
        return 100.0 * (1.0 - s / weight_sum)
    if policy == DOT_PRODUCT:
        for c in range(req.shape[0]):
            if weights[c] > 0.0:
                s += weights[c] * ((req[c] * inv_cap[n, c]) * (free[n, c] * inv_cap[n, c]))
        return s
    if policy == BALANCED_ALLOCATION:
        k = 0
        for c in range(req.shape[0]):
            if weights[c] > 0.0:
                s += min(1.0, (capacity[n, c] - free[n, c] + req[c]) * inv_cap[n, c])
                k += 1
        if k == 0:
            return 100.0
        mean = s / k
        var = 0.0
        for c in range(req.shape[0]):
            if weights[c] > 0.0:
                x = min(1.0, (capacity[n, c] - free[n, c] + req[c]) * inv_cap[n, c]) - mean
                var += x * x
        return (1.0 - math.sqrt(var / k)) * 100.0
    return 0.0
