"""The placement loop: a batch of gangs, each all-or-nothing, in order, in one kernel call.

For each workload, for each replica: the best feasible node (highest score, ties to the lowest
index; FIRST_FIT: the first feasible node). A shape that repeats in the batch is served by its
own score tree (``kernels.tree``: O(log N) per placement once built); the resource policies'
other workloads by the block search (``kernels.blocks``; its summaries catch up with the
replicas applied since its last use just before it runs, so a batch of repeated shapes never
pays for them); RANDOM and FGD's one-off shapes by one pass over the nodes. Feasible = the
workload's static mask (schedulable, selector, model), every column fits, the GPU fits at device
level, and the spread code is present and unused by the gang's earlier replicas. The chosen
replica is applied to ``free``/``gpu_free`` (and the FGD statistics) so that later replicas and
later workloads see it; when a later replica of the gang finds no node, the earlier ones are
rolled back and the per-node reasons are counted against the state at that moment. The caller
passes copies when anything is to be applied; with a single one-replica workload and
``apply_last=False`` nothing is written.
"""

from __future__ import annotations

import numpy as np

from strata_policy.kernels.blocks import _blocks_best
from strata_policy.kernels.config import inline_kernel, kernel
from strata_policy.kernels.fit import (
    CPU,
    FIRST_FIT,
    FRAGMENTATION_AWARE,
    GPU,
    MILLI,
    RANDOM,
    _best_fit_devices,
    _gpu_fits,
    _node_hash,
    _random_devices,
    _resources_fit,
    _score,
)
from strata_policy.kernels.frag import _frag_best, _frag_row
from strata_policy.kernels.summaries import _refresh_blocks
from strata_policy.kernels.tree import _tree_sync


@inline_kernel
def _spread_ok(spread: np.ndarray, s: int, n: int, used: np.ndarray, r: int) -> bool:
    """The node carries the spread label and no earlier replica took its value."""
    if s < 0:
        return True
    code = spread[s, n]
    if code < 0:
        return False
    for i in range(r):  # noqa: SIM110  # numba compiles loops, not generator expressions
        if used[i] == code:
            return False
    return True


@kernel
def _apply(
    free: np.ndarray,
    gpu_free: np.ndarray,
    n: int,
    req: np.ndarray,
    devices: np.ndarray,
    sign: int,
) -> None:
    """Take (``sign=1``) or give back (``sign=-1``) one replica on node ``n``."""
    for c in range(req.shape[0]):
        free[n, c] -= sign * req[c]
    g = req[GPU]
    per = g if g < MILLI else MILLI
    for i in range(devices.shape[0]):
        if devices[i] >= 0:
            gpu_free[n, devices[i]] -= sign * per


@kernel
def _count_reasons(
    free: np.ndarray,
    gpu_free: np.ndarray,
    mask: np.ndarray,
    spread: np.ndarray,
    s: int,
    used: np.ndarray,
    r: int,
    req: np.ndarray,
    impossible: bool,
    counts: np.ndarray,
) -> None:
    """Per node passing the static mask, its first failing reason: a short column (``counts[c]``;
    a device-level GPU shortfall counts as the gpu column), a resource no node has
    (``counts[R + 1]``), then a spread conflict (``counts[R]``)."""
    n_res = req.shape[0]
    for n in range(free.shape[0]):
        if not mask[n]:
            continue
        c = _resources_fit(free, n, req)
        if c >= 0:
            counts[c] += 1
        elif not _gpu_fits(gpu_free, n, req[GPU]):
            counts[GPU] += 1
        elif impossible:
            counts[n_res + 1] += 1
        elif not _spread_ok(spread, s, n, used, r):
            counts[n_res] += 1


@kernel
def _place_batch(
    free: np.ndarray,
    gpu_free: np.ndarray,
    capacity: np.ndarray,
    inv_cap: np.ndarray,
    inv_max_cap: np.ndarray,
    masks: np.ndarray,
    mask_id: np.ndarray,
    spread: np.ndarray,
    spread_id: np.ndarray,
    req: np.ndarray,
    replicas: np.ndarray,
    offsets: np.ndarray,
    weights: np.ndarray,
    seeds: np.ndarray,
    impossible: np.ndarray,
    policy: int,
    apply_last: bool,
    t_cpu: np.ndarray,
    t_gpu: np.ndarray,
    t_k: np.ndarray,
    t_w: np.ndarray,
    model_ok: np.ndarray,
    count_ge: np.ndarray,
    below: np.ndarray,
    fgd_mode: int,
    tree_of: np.ndarray,
    tval: np.ndarray,
    tidx: np.ndarray,
    journal: np.ndarray,
    use_blocks: bool,
    mask_blocks: np.ndarray,
    mask_supers: np.ndarray,
    perm: np.ndarray,
    bstart: np.ndarray,
    block_of: np.ndarray,
    sstart: np.ndarray,
    super_of: np.ndarray,
    bcap: np.ndarray,
    binv: np.ndarray,
    scap: np.ndarray,
    sinv: np.ndarray,
    hi: np.ndarray,
    lo: np.ndarray,
    offer: np.ndarray,
    sums: np.ndarray,
    s_hi: np.ndarray,
    s_lo: np.ndarray,
    s_offer: np.ndarray,
    s_sums: np.ndarray,
    node_offer: np.ndarray,
    tsync: np.ndarray,
    used_rows: np.ndarray,
    bounds: np.ndarray,
    out_node: np.ndarray,
    out_dev: np.ndarray,
    out_score: np.ndarray,
    out_fit: np.ndarray,
    out_counts: np.ndarray,
) -> None:
    """Place every workload of the batch in order (see the module docstring). Scratch:
    ``tsync`` an int64 per tree, ``used_rows`` one per replica of the largest gang,
    ``bounds`` a float64 per superblock and per block (``_blocks_best``)."""
    n_nodes = free.shape[0]
    n_work = req.shape[0]
    fgd = policy == FRAGMENTATION_AWARE
    tsync[:] = -1
    jlen = 0
    no_codes = offsets[:0]
    bsync = 0  # the journal position the block summaries have caught up with
    take: int = np.int64(1)  # type: ignore[assignment]  # run-time int64 (config)
    give_back: int = np.int64(-1)  # type: ignore[assignment]  # run-time int64 (config)
    for w in range(n_work):
        rq = req[w]
        wt = weights[w]
        weight_sum = 0.0
        for c in range(wt.shape[0]):
            weight_sum += wt[c]
        if weight_sum <= 0.0:
            weight_sum = 1.0
        mask = masks[mask_id[w]]
        s = spread_id[w]
        g = rq[GPU]
        reps = replicas[w]
        base = offsets[w]
        used = used_rows[:reps]
        placed = 0
        last_score = 0.0
        k = tree_of[w]
        for r in range(reps):
            if impossible[w]:
                break
            best = -1
            best_score = -np.inf
            best_dev = -1
            if k >= 0:
                start = tsync[k]
                if start < 0 or start < jlen:
                    _tree_sync(policy, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, rq,
                               wt, t_cpu, t_gpu, t_k, t_w, model_ok, count_ge, below, fgd_mode,
                               tval, tidx, k, journal[max(start, 0) : jlen],
                               jlen - start if start >= 0 else -1)  # fmt: skip
                    tsync[k] = jlen
                if tval[k, 1] > -np.inf:
                    best = tidx[k, 1]
                    if fgd:
                        best_score, best_dev = _frag_best(free, gpu_free, best, rq[CPU], g, t_cpu,
                                                          t_gpu, t_k, t_w, model_ok, count_ge,
                                                          below, fgd_mode)  # fmt: skip
                    elif policy == FIRST_FIT:
                        best_score = 0.0
                    else:
                        best_score = _score(policy, free, capacity, inv_cap, inv_max_cap, best,
                                            rq, wt, weight_sum)  # fmt: skip
            elif use_blocks:
                if bsync < jlen:
                    _refresh_blocks(free, gpu_free, inv_cap, inv_max_cap, perm, bstart, block_of,
                                    sstart, super_of, hi, lo, offer, sums, s_hi, s_lo, s_offer,
                                    s_sums, node_offer, journal[bsync:jlen],
                                    jlen - bsync)  # fmt: skip
                    bsync = jlen
                m = mask_id[w]
                codes = spread[s] if s >= 0 else no_codes
                levels, supers = mask_blocks[m], mask_supers[m]  # one part: passed twice
                best, best_score = _blocks_best(policy, free, gpu_free, capacity, inv_cap,
                                                inv_max_cap, mask, levels, supers, levels,
                                                supers, perm, bstart, sstart, hi, lo, offer,
                                                sums, bcap, binv, s_hi, s_lo, s_offer, s_sums,
                                                scap, sinv, node_offer, rq, wt,
                                                codes, used, r, bounds)  # fmt: skip
            for n in range(n_nodes if k < 0 and not use_blocks else 0):
                if not mask[n]:
                    continue
                if _resources_fit(free, n, rq) >= 0:
                    continue
                if not _gpu_fits(gpu_free, n, g):
                    continue
                if not _spread_ok(spread, s, n, used, r):
                    continue
                if policy == FIRST_FIT:
                    best = n
                    best_score = 0.0
                    break
                dev = -1
                if fgd:
                    sc, dev = _frag_best(free, gpu_free, n, rq[CPU], g, t_cpu, t_gpu, t_k,
                                         t_w, model_ok, count_ge, below, fgd_mode)  # fmt: skip
                elif policy == RANDOM:
                    sc = float(_node_hash(seeds[w], r, n) >> np.uint64(11)) * 2.0**-53
                else:
                    sc = _score(policy, free, capacity, inv_cap, inv_max_cap, n, rq, wt,
                                weight_sum)  # fmt: skip
                if sc > best_score:
                    best = n
                    best_score = sc
                    best_dev = dev
            if best < 0:
                break
            row = out_dev[base + r]
            if policy == RANDOM:
                _random_devices(gpu_free, best, g, _node_hash(seeds[w], r, best), row)
            elif fgd and best_dev >= 0:
                row[:] = -1
                row[0] = best_dev
            else:
                _best_fit_devices(gpu_free, best, g, row)
            out_node[base + r] = best
            if s >= 0:
                used[r] = spread[s, best]
            last_score = best_score
            placed += 1
            if apply_last or w < n_work - 1 or r < reps - 1:
                _apply(free, gpu_free, best, rq, row, take)
                journal[jlen] = best
                jlen += 1
                if fgd:
                    _frag_row(gpu_free, best, t_gpu, count_ge, below)
        out_fit[w] = placed
        if placed == reps:
            out_score[w] = last_score
            continue
        _count_reasons(free, gpu_free, mask, spread, s, used, placed, rq, impossible[w],
                       out_counts[w])  # fmt: skip
        for r in range(placed):
            n = out_node[base + r]
            _apply(free, gpu_free, n, rq, out_dev[base + r], give_back)
            journal[jlen] = n
            jlen += 1
            if fgd:
                _frag_row(gpu_free, n, t_gpu, count_ge, below)
            out_node[base + r] = -1
            out_dev[base + r] = -1
