"""FGD kernels: per-node fragmentation statistics and the fragmentation increase of a placement.

For a typical task shape ``m`` (cpu ``c_m``, per-device GPU milli ``g_m``, device count ``k_m``)
a node's fragmentation ``F_n(m)`` is all its idle GPU milli when ``m`` cannot run there (CPU-only
shape, GPU model not allowed, fewer than ``k_m`` devices with ``>= g_m`` free, or less than
``c_m`` CPU free), and otherwise the idle milli on devices with less than ``g_m`` free. The node's
expected fragmentation is ``F_n = Σ_m p_m F_n(m)`` (Weng et al., ATC 2023).

A placement changes ``n_changed`` devices of one node from ``f_old`` to ``f_new`` free (one
device for a share, ``k`` devices 1000 → 0 for whole GPUs, none for CPU-only work) and lowers its
CPU. So
``F_n(m)`` after it follows in O(1) from two cached per-(node, shape) statistics: how many
devices have ``>= g_m`` free (``count_ge``) and the free milli on the others (``below``). The
kernels below keep those statistics and evaluate ``ΔF = Σ_m p_m (F_after(m) − F_before(m))``
without touching the device list again.

Three scores (``fgd_mode``), higher wins, ties to the lowest node index:

- ``FGD_UNTRUNCATED``: ``−ΔF``. The strict minimum; on the openb trace it concentrates load and
  allocates about a point less than the paper's score.
- ``FGD_PAPER``: ``int(100 · sigmoid(−ΔF / 1000))``, the paper's. Truncation makes every node
  within a few tens of milli of the best ΔF tie, and the tie goes to node order.
- ``FGD_REFINED``: the paper's truncated score over ``ΔF + ΔS``, plus a device best-fit
  tie-break. ``S_n = max(0, idle_n − cpu_free_n / ρ)`` is the GPU milli that node ``n``'s free
  CPU cannot feed at the mix's CPU per GPU milli ``ρ = Σ p_m c_m / Σ p_m g_m k_m`` (GPU shapes
  only): FGD sees CPU only when it crosses one shape's threshold, so on a CPU-bound trace it lets
  CPU-only and CPU-heavy work eat the CPU that a node's idle GPUs will need, and those GPUs end
  stranded. Among equal truncated scores a share prefers the device (hence the node) it leaves
  with the least free milli, ``+ (1000 − left) / 2048`` (exact in binary, below 0.5, so it never
  reorders truncated scores); CPU-only and whole-GPU work keep the node order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from strata_policy.kernels.config import kernel
from strata_policy.kernels.fit import CPU, GPU, MILLI

if TYPE_CHECKING:  # annotations only: numba types the bundle from the value passed
    from strata_policy.kernels.arrays import FragArrays

FGD_UNTRUNCATED = 0
FGD_PAPER = 1
FGD_REFINED = 2
"""The three scores above (``fgd_mode``), read with ``arrays.FragArrays``."""


@kernel
def _frag_row(
    gpu_free: np.ndarray, n: int, shape_gpu: np.ndarray, count_ge: np.ndarray, below: np.ndarray
) -> None:
    """Recompute node ``n``'s statistics for every shape (``FragArrays.count_ge``/``below``)."""
    for m in range(shape_gpu.shape[0]):
        per_device = shape_gpu[m]
        fitting = 0
        milli_below = 0
        for d in range(gpu_free.shape[1]):
            f = gpu_free[n, d]
            if f < 0:
                continue
            if f >= per_device:
                fitting += 1
            else:
                milli_below += f
        count_ge[n, m] = fitting
        below[n, m] = milli_below


@kernel
def _frag_rows(
    gpu_free: np.ndarray,
    rows: np.ndarray,
    shape_gpu: np.ndarray,
    count_ge: np.ndarray,
    below: np.ndarray,
) -> None:
    """Recompute the statistics of the listed nodes (the stale ones)."""
    for i in range(rows.shape[0]):
        _frag_row(gpu_free, rows[i], shape_gpu, count_ge, below)


@kernel
def _frag_delta(
    free: np.ndarray,
    n: int,
    cpu_req: int,
    gpu_req: int,
    f_old: int,
    f_new: int,
    n_changed: int,
    frag: FragArrays,
) -> float:
    """``ΔF_n`` when ``n_changed`` devices of node ``n`` go from ``f_old`` to ``f_new`` free
    milli and its CPU drops by ``cpu_req`` (``gpu_req`` milli in all)."""
    cpu_b = free[n, CPU]
    cpu_a = cpu_b - cpu_req
    tot_b = free[n, GPU]
    tot_a = tot_b - gpu_req
    delta = 0.0
    for m in range(frag.shape_gpu.shape[0]):
        per_device = frag.shape_gpu[m]
        weight = frag.shape_weight[m]
        if per_device == 0 or not frag.model_allowed[n, m]:
            delta += weight * (tot_a - tot_b)
            continue
        fitting = frag.count_ge[n, m]
        milli_below = frag.below[n, m]
        runs = cpu_b >= frag.shape_cpu[m] and fitting >= frag.shape_devices[m]
        fb = milli_below if runs else tot_b
        if f_old >= per_device:
            fitting -= n_changed
        else:
            milli_below -= n_changed * f_old
        if f_new >= per_device:
            fitting += n_changed
        else:
            milli_below += n_changed * f_new
        runs = cpu_a >= frag.shape_cpu[m] and fitting >= frag.shape_devices[m]
        fa = milli_below if runs else tot_a
        delta += weight * (fa - fb)
    return delta


@kernel
def _cpu_per_gpu(frag: FragArrays) -> float:
    """``ρ``: the GPU shapes' expected CPU per GPU milli (0 when the mix has no GPU shape)."""
    cpu = 0.0
    gpu = 0.0
    for m in range(frag.shape_gpu.shape[0]):
        if frag.shape_gpu[m] > 0:
            cpu += frag.shape_weight[m] * frag.shape_cpu[m]
            gpu += frag.shape_weight[m] * (frag.shape_gpu[m] * frag.shape_devices[m])
    return cpu / gpu if gpu > 0.0 else 0.0


@kernel
def _stranded(cpu: int, idle: int, rho: float) -> float:
    """GPU milli of ``idle`` that ``cpu`` free cannot feed at ``ρ`` CPU per GPU milli."""
    if rho <= 0.0:
        return 0.0
    return max(0.0, idle - cpu / rho)


@kernel
def _frag_score(
    delta: float, fgd_mode: int, free: np.ndarray, n: int, cpu_req: int, gpu_req: int,
    left: int, rho: float,
) -> float:  # fmt: skip
    """Higher wins (see the module docstring): ``−ΔF``, the paper's truncated score, or the
    refined one for a placement taking ``cpu_req``/``gpu_req`` from node ``n`` and leaving its
    device ``left`` free milli (a share; -1 otherwise)."""
    if fgd_mode == FGD_UNTRUNCATED:
        return -delta
    if fgd_mode == FGD_REFINED:
        cpu_b = free[n, CPU]
        tot_b = free[n, GPU]
        delta += _stranded(cpu_b - cpu_req, tot_b - gpu_req, rho) - _stranded(cpu_b, tot_b, rho)
    score = float(int(100.0 / (1.0 + np.exp(delta / 1000.0))))
    if fgd_mode == FGD_REFINED and left >= 0:
        score += (MILLI - left) / 2048.0
    return score


@kernel
def _frag_best(
    free: np.ndarray,
    gpu_free: np.ndarray,
    n: int,
    cpu_req: int,
    gpu_req: int,
    frag: FragArrays,
    fgd_mode: int,
) -> tuple[float, int]:
    """The best FGD score on node ``n`` for a replica of ``cpu_req`` millicores and ``gpu_req``
    milli-GPUs and, for a share, the device giving it.

    A share tries every device that fits (the first index wins ties; devices with equal free
    milli give equal scores, so only the first of each is evaluated); whole GPUs take the
    lowest-indexed fully free devices; CPU-only work changes no device. Returns device -1 when
    no device is chosen by FGD.
    """
    rho = _cpu_per_gpu(frag) if fgd_mode == FGD_REFINED else 0.0
    if gpu_req == 0:
        d0 = _frag_delta(free, n, cpu_req, 0, 0, 0, 0, frag)
        return _frag_score(d0, fgd_mode, free, n, cpu_req, 0, -1, rho), -1
    if gpu_req >= MILLI:
        d1 = _frag_delta(free, n, cpu_req, gpu_req, MILLI, 0, gpu_req // MILLI, frag)
        return _frag_score(d1, fgd_mode, free, n, cpu_req, gpu_req, -1, rho), -1
    best = -np.inf
    best_dev = -1
    for d in range(gpu_free.shape[1]):
        f = gpu_free[n, d]
        if f < gpu_req:
            continue
        seen = False
        for e in range(d):
            if gpu_free[n, e] == f:
                seen = True
                break
        if seen:
            continue
        delta = _frag_delta(free, n, cpu_req, gpu_req, f, f - gpu_req, 1, frag)
        s = _frag_score(delta, fgd_mode, free, n, cpu_req, gpu_req, f - gpu_req, rho)
        if s > best:
            best = s
            best_dev = d
    return best, best_dev
