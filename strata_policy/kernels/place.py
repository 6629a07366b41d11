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
``apply_last=False`` nothing is written. The arrays come in the bundles of ``kernels.arrays``
(what each holds, its shape and unit are documented there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from strata_policy.kernels.tree import _tree_sync, _weight_sum

if TYPE_CHECKING:  # annotations only: numba types the bundles from the values passed
    from strata_policy.kernels.arrays import (
        BatchArrays,
        BatchInputs,
        BatchScratch,
        BlockSummaries,
        FragArrays,
        NodeArrays,
    )
    from strata_policy.kernels.layout import BlockLayout


@inline_kernel
def _spread_ok(spread: np.ndarray, spread_row: int, n: int, used: np.ndarray, n_used: int) -> bool:
    """Node ``n`` carries the spread label (``spread[spread_row]``; -1: no spread) and none of
    the gang's earlier replicas took its value (``used[:n_used]``)."""
    if spread_row < 0:
        return True
    code = spread[spread_row, n]
    if code < 0:
        return False
    for i in range(n_used):  # noqa: SIM110  # numba compiles loops, not generator expressions
        if used[i] == code:
            return False
    return True


@kernel
def _apply(
    free: np.ndarray,
    gpu_free: np.ndarray,
    n: int,
    request: np.ndarray,
    devices: np.ndarray,
    sign: int,
) -> None:
    """Take (``sign=1``) or give back (``sign=-1``) one replica of ``request`` on node ``n``
    and its ``devices`` (-1 padded)."""
    for c in range(request.shape[0]):
        free[n, c] -= sign * request[c]
    gpu_milli = request[GPU]
    per_device = gpu_milli if gpu_milli < MILLI else MILLI
    for i in range(devices.shape[0]):
        if devices[i] >= 0:
            gpu_free[n, devices[i]] -= sign * per_device


@kernel
def _count_reasons(
    free: np.ndarray,
    gpu_free: np.ndarray,
    mask: np.ndarray,
    spread: np.ndarray,
    spread_row: int,
    used: np.ndarray,
    n_used: int,
    request: np.ndarray,
    impossible: bool,
    counts: np.ndarray,
) -> None:
    """Per node passing the static mask, its first failing reason: a short column (``counts[c]``;
    a device-level GPU shortfall counts as the gpu column), a resource no node has
    (``counts[R + 1]``), then a spread conflict (``counts[R]``)."""
    n_res = request.shape[0]
    for n in range(free.shape[0]):
        if not mask[n]:
            continue
        c = _resources_fit(free, n, request)
        if c >= 0:
            counts[c] += 1
        elif not _gpu_fits(gpu_free, n, request[GPU]):
            counts[GPU] += 1
        elif impossible:
            counts[n_res + 1] += 1
        elif not _spread_ok(spread, spread_row, n, used, n_used):
            counts[n_res] += 1


@kernel
def _place_batch(
    policy: int,
    fgd_mode: int,
    apply_last: bool,
    use_blocks: bool,
    nodes: NodeArrays,
    frag: FragArrays,
    batch: BatchInputs,
    layout: BlockLayout,
    summaries: BlockSummaries,
    scratch: BatchScratch,
    out: BatchArrays,
) -> None:
    """Place every workload of the batch in order (see the module docstring), into ``out``.

    ``nodes.free``/``gpu_free`` and ``frag``'s statistics take what is applied; ``use_blocks``
    (resource policies only) finds each replica by the block search over ``layout`` and
    ``summaries`` (kept up to date here, lazily, from the journal of applied replicas);
    workloads with a score tree (``batch.tree_of >= 0``) use it whatever ``use_blocks`` says.
    """
    free = nodes.free
    gpu_free = nodes.gpu_free
    n_nodes = free.shape[0]
    n_work = batch.request.shape[0]
    fgd = policy == FRAGMENTATION_AWARE
    tree_synced_at = scratch.tree_synced_at
    tree_synced_at[:] = -1
    journal = scratch.journal
    jlen = 0
    no_codes = batch.offsets[:0]
    blocks_synced_at = 0  # the journal position the block summaries have caught up with
    take: int = np.int64(1)  # type: ignore[assignment]  # run-time int64 (config)
    give_back: int = np.int64(-1)  # type: ignore[assignment]  # run-time int64 (config)
    for w in range(n_work):
        request = batch.request[w]
        weights = batch.weights[w]
        weight_sum = _weight_sum(weights)
        mask = batch.masks[batch.mask_id[w]]
        spread_row = batch.spread_id[w]
        gpu_milli = request[GPU]
        replicas = batch.replicas[w]
        first_row = batch.offsets[w]
        used = scratch.spread_used[:replicas]
        placed = 0
        last_score = 0.0
        tree = batch.tree_of[w]
        for r in range(replicas):
            if batch.impossible[w]:
                break
            best = -1
            best_score = -np.inf
            best_dev = -1
            if tree >= 0:
                start = tree_synced_at[tree]
                if start < 0 or start < jlen:
                    _tree_sync(policy, nodes, mask, request, weights, frag, fgd_mode,
                               scratch.tree_score, scratch.tree_node, tree,
                               journal[max(start, 0) : jlen],
                               jlen - start if start >= 0 else -1)  # fmt: skip
                    tree_synced_at[tree] = jlen
                if scratch.tree_score[tree, 1] > -np.inf:
                    best = scratch.tree_node[tree, 1]
                    if fgd:
                        best_score, best_dev = _frag_best(free, gpu_free, best, request[CPU],
                                                          gpu_milli, frag, fgd_mode)  # fmt: skip
                    elif policy == FIRST_FIT:
                        best_score = 0.0
                    else:
                        best_score = _score(policy, free, nodes.capacity, nodes.inv_capacity,
                                            nodes.inv_max_capacity, best, request, weights,
                                            weight_sum)  # fmt: skip
            elif use_blocks:
                if blocks_synced_at < jlen:
                    _refresh_blocks(nodes, layout, summaries, journal[blocks_synced_at:jlen],
                                    jlen - blocks_synced_at)  # fmt: skip
                    blocks_synced_at = jlen
                m = batch.mask_id[w]
                codes = batch.spread[spread_row] if spread_row >= 0 else no_codes
                levels, supers = batch.mask_blocks[m], batch.mask_supers[m]  # one part: twice
                best, best_score = _blocks_best(policy, nodes, mask, levels, supers, levels,
                                                supers, layout, summaries, request, weights,
                                                codes, used, r, scratch.bounds)  # fmt: skip
            for n in range(n_nodes if tree < 0 and not use_blocks else 0):
                if not mask[n]:
                    continue
                if _resources_fit(free, n, request) >= 0:
                    continue
                if not _gpu_fits(gpu_free, n, gpu_milli):
                    continue
                if not _spread_ok(batch.spread, spread_row, n, used, r):
                    continue
                if policy == FIRST_FIT:
                    best = n
                    best_score = 0.0
                    break
                dev = -1
                if fgd:
                    sc, dev = _frag_best(free, gpu_free, n, request[CPU], gpu_milli, frag,
                                         fgd_mode)  # fmt: skip
                elif policy == RANDOM:
                    draw = _node_hash(batch.seeds[w], r, n) >> np.uint64(11)
                    sc = float(draw) * 2.0**-53
                else:
                    sc = _score(policy, free, nodes.capacity, nodes.inv_capacity,
                                nodes.inv_max_capacity, n, request, weights,
                                weight_sum)  # fmt: skip
                if sc > best_score:
                    best = n
                    best_score = sc
                    best_dev = dev
            if best < 0:
                break
            row = out.devices[first_row + r]
            if policy == RANDOM:
                node_hash = _node_hash(batch.seeds[w], r, best)
                _random_devices(gpu_free, best, gpu_milli, node_hash, row)
            elif fgd and best_dev >= 0:
                row[:] = -1
                row[0] = best_dev
            else:
                _best_fit_devices(gpu_free, best, gpu_milli, row)
            out.node[first_row + r] = best
            if spread_row >= 0:
                used[r] = batch.spread[spread_row, best]
            last_score = best_score
            placed += 1
            if apply_last or w < n_work - 1 or r < replicas - 1:
                _apply(free, gpu_free, best, request, row, take)
                journal[jlen] = best
                jlen += 1
                if fgd:
                    _frag_row(gpu_free, best, frag.shape_gpu, frag.count_ge, frag.below)
        out.fit[w] = placed
        if placed == replicas:
            out.score[w] = last_score
            continue
        _count_reasons(free, gpu_free, mask, batch.spread, spread_row, used, placed, request,
                       batch.impossible[w], out.counts[w])  # fmt: skip
        for r in range(placed):
            n = out.node[first_row + r]
            _apply(free, gpu_free, n, request, out.devices[first_row + r], give_back)
            journal[jlen] = n
            jlen += 1
            if fgd:
                _frag_row(gpu_free, n, frag.shape_gpu, frag.count_ge, frag.below)
            out.node[first_row + r] = -1
            out.devices[first_row + r] = -1
