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
def _device_draw(node_hash: np.uint64, i: int) -> np.uint64:
    """The ``i``-th device draw derived from a node's hash."""
    return _mix64(node_hash ^ (_DEVICE_SALT + np.uint64(i)))


@inline_kernel
def _resources_fit(free: np.ndarray, n: int, request: np.ndarray) -> int:
    """-1 when every column fits, else the first short column."""
    for c in range(request.shape[0]):
        if free[n, c] < request[c]:
            return c
    return -1


@inline_kernel
def _gpu_fits(gpu_free: np.ndarray, n: int, gpu_milli: int) -> bool:
    """Device-level GPU fit: a share needs one device with ``>= gpu_milli`` free; ``k × 1000``
    needs k fully free ones."""
    if gpu_milli == 0:
        return True
    if gpu_milli < MILLI:
        for d in range(gpu_free.shape[1]):  # noqa: SIM110  # numba compiles loops, not genexps
            if gpu_free[n, d] >= gpu_milli:
                return True
        return False
    need = gpu_milli // MILLI
    for d in range(gpu_free.shape[1]):
        if gpu_free[n, d] == MILLI:
            need -= 1
            if need == 0:
                return True
    return False


@kernel
def _best_fit_devices(gpu_free: np.ndarray, n: int, gpu_milli: int, out: np.ndarray) -> None:
    """Best-fit devices of node ``n`` into ``out`` (-1 padded): the share's device with least
    free that fits (lowest index on ties); the lowest-indexed fully free devices for whole
    ones."""
    out[:] = -1
    if gpu_milli == 0:
        return
    if gpu_milli < MILLI:
        best = -1
        for d in range(gpu_free.shape[1]):
            f = gpu_free[n, d]
            if f >= gpu_milli and (best < 0 or f < gpu_free[n, best]):
                best = d
        out[0] = best
        return
    taken = 0
    need = gpu_milli // MILLI
    for d in range(gpu_free.shape[1]):
        if taken < need and gpu_free[n, d] == MILLI:
            out[taken] = d
            taken += 1


@kernel
def _random_devices(
    gpu_free: np.ndarray, n: int, gpu_milli: int, node_hash: np.uint64, out: np.ndarray
) -> None:
    """Uniformly random fitting devices of node ``n`` (seeded by ``node_hash``), ascending: a
    partial Fisher–Yates shuffle over the fitting devices in index order (in ``out`` itself,
    which has a slot per device), then the chosen ones sorted."""
    out[:] = -1
    if gpu_milli == 0:
        return
    per = gpu_milli if gpu_milli < MILLI else MILLI
    need = 1 if gpu_milli < MILLI else gpu_milli // MILLI
    count = 0
    for d in range(gpu_free.shape[1]):
        if gpu_free[n, d] >= per:
            out[count] = d
            count += 1
    for i in range(need):
        j = i + int(_device_draw(node_hash, i) % np.uint64(count - i))
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
    inv_capacity: np.ndarray,
    inv_max_capacity: np.ndarray,
    n: int,
    request: np.ndarray,
    weights: np.ndarray,
    weight_sum: float,
) -> float:
    """The score of a feasible node under a resource policy (higher wins); see DESIGN §3.

    ``f`` terms use the node's own capacity (``inv_capacity`` holds ``1/cap``, 0 where the node has
    none); BEST_FIT measures what is left over against the cluster's largest node per resource
    (``inv_max_capacity``), so that absolute leftovers compare across node sizes.
    """
    s = 0.0
    if policy == LEAST_ALLOCATED:
        for c in range(request.shape[0]):
            if weights[c] > 0.0:
                s += weights[c] * ((free[n, c] - request[c]) * inv_capacity[n, c])
        return s * 100.0 / weight_sum
    if policy == MOST_ALLOCATED:
        for c in range(request.shape[0]):
            if weights[c] > 0.0:
                s += weights[c] * ((capacity[n, c] - free[n, c] + request[c]) * inv_capacity[n, c])
        return s * 100.0 / weight_sum
    if policy == BEST_FIT:
        for c in range(request.shape[0]):
            if weights[c] > 0.0:
                s += weights[c] * ((free[n, c] - request[c]) * inv_max_capacity[c])
        return 100.0 * (1.0 - s / weight_sum)
    if policy == DOT_PRODUCT:
        for c in range(request.shape[0]):
            if weights[c] > 0.0:
                s += weights[c] * (
                    (request[c] * inv_capacity[n, c]) * (free[n, c] * inv_capacity[n, c])
                )
        return s
    if policy == BALANCED_ALLOCATION:
        n_weighted = 0
        for c in range(request.shape[0]):
            if weights[c] > 0.0:
                s += min(1.0, (capacity[n, c] - free[n, c] + request[c]) * inv_capacity[n, c])
                n_weighted += 1
        if n_weighted == 0:
            return 100.0
        mean = s / n_weighted
        var = 0.0
        for c in range(request.shape[0]):
            if weights[c] > 0.0:
                x = min(1.0, (capacity[n, c] - free[n, c] + request[c]) * inv_capacity[n, c]) - mean
                var += x * x
        return (1.0 - math.sqrt(var / n_weighted)) * 100.0
    return 0.0
