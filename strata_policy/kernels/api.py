"""Validating wrappers around the batch kernel: arrays in, arrays out, shapes and dtypes checked.

Nothing here knows about nodes or workloads; ``strata_policy.placement.place`` turns those into
the arrays below. A wrong shape or dtype is a bug in the caller and raises ``ValueError`` before
any kernel runs (a kernel would otherwise read out of bounds or silently cast). The one-replica
wrappers are ``score_tree.ScoreTree`` and ``search.BlockIndex``; ``warmup`` compiles them all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from strata_policy.kernels.arrays import (
    BOOL,
    F64,
    FGD_REFINED,
    I64,
    U64,
    BatchArrays,
    BatchInputs,
    BatchScratch,
    FragArrays,
    NodeArrays,
)
from strata_policy.kernels.arrays import check_array as _check
from strata_policy.kernels.fit import DOT_PRODUCT
from strata_policy.kernels.frag import _frag_rows
from strata_policy.kernels.layout import BlockLayout, _compiled
from strata_policy.kernels.place import _place_batch
from strata_policy.kernels.search import BlockIndex

_NO_ROWS = np.zeros(0, dtype=np.int64)

# The batch kernel's machine code, resolved on the first call (``layout._compiled``): numba types
# each NamedTuple bundle in Python on every dispatcher call, some 10 µs for the seven bundles,
# which a one-workload call (a gang, RANDOM, an unplaced answer's reasons) would pay each time.
# Every array is checked here or built here (dtype, dimensions, C order), so every call has the
# types of the first; a read-only array is refused where the kernel writes.
_PLACE_BATCH: list[Callable[..., None] | None] = [None]


def place_batch_arrays(
    *,
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
    weights: np.ndarray,
    seeds: np.ndarray,
    impossible: np.ndarray,
    policy: int,
    apply_last: bool,
    frag: FragArrays,
    fgd_mode: int = FGD_REFINED,
    tree_of: np.ndarray | None = None,
    n_trees: int = 0,
    blocks: BlockIndex | None = None,
    mask_blocks: np.ndarray | None = None,
    mask_supers: np.ndarray | None = None,
) -> BatchArrays:
    """Run the batch kernel; ``free``/``gpu_free``/``frag`` statistics are mutated only when
    something is applied (more than one replica in all, or ``apply_last``). The arguments are
    the fields of ``kernels.arrays``' bundles (``inv_cap`` is ``NodeArrays.inv_capacity``,
    ``req`` ``BatchInputs.request``), which this function builds, once, after checking them.

    ``tree_of[w]`` names the score tree (``0 <= k < n_trees``, see ``kernels.tree``) serving
    workload ``w``, or -1 for a linear scan. Workloads sharing a tree must share their request
    row, weights row and mask, have no spread key, and the policy must not be RANDOM.
    ``fgd_mode`` is FRAGMENTATION_AWARE's score (``FGD_UNTRUNCATED``, ``FGD_PAPER``,
    ``FGD_REFINED``; see ``kernels.frag``).

    ``blocks`` (resource policies 0-5 only; its state must be ``free``/``gpu_free``, and its
    summaries are mutated with them) makes the kernel find each replica's node with the block
    search; ``mask_blocks``/``mask_supers`` are then ``blocks.layout.mask_levels`` of each row
    of ``masks``. Workloads with a tree (``tree_of >= 0``) still use it. The journal the
    kernel keeps of applied replicas brings the summaries up to date lazily."""
    nodes = NodeArrays(free, gpu_free, capacity, inv_cap, inv_max_cap)
    nodes.check()
    n, r = free.shape
    w = req.shape[0]
    for name, a, dt, shape in (
        ("masks", masks, BOOL, (None, n)),
        ("mask_id", mask_id, I64, (w,)),
        ("spread", spread, I64, (None, n)),
        ("spread_id", spread_id, I64, (w,)),
        ("req", req, I64, (w, r)),
        ("replicas", replicas, I64, (w,)),
        ("weights", weights, F64, (w, r)),
        ("seeds", seeds, U64, (w,)),
        ("impossible", impossible, BOOL, (w,)),
    ):
        _check(name, a, dt, shape)
    frag.check(n, fgd_mode)
    for name, a in (("free", free), ("gpu_free", gpu_free), ("count_ge", frag.count_ge),
                    ("below", frag.below)):  # fmt: skip
        if not a.flags.writeable:
            raise ValueError(f"{name}: read-only, but the kernel writes what it applies")
    if w > 1 and (mask_id.min() < 0 or mask_id.max() >= masks.shape[0]):
        raise ValueError("mask_id out of range")
    if w > 1 and (spread_id.min() < -1 or spread_id.max() >= spread.shape[0]):
        raise ValueError("spread_id out of range")
    if w == 1 and not (0 <= mask_id[0] < masks.shape[0] and -1 <= spread_id[0] < len(spread)):
        raise ValueError("mask_id or spread_id out of range")
    if w and replicas.min() < 1:
        raise ValueError("replicas must be at least 1")
    if tree_of is None:
        tree_of = np.full(w, -1, dtype=np.int64)
        n_trees = 0
    _check("tree_of", tree_of, I64, (w,))
    if w and (tree_of.min() < -1 or tree_of.max() >= n_trees):
        raise ValueError("tree_of out of range")
    use_blocks = blocks is not None
    if blocks is None:
        blocks = _no_blocks(r)
        mask_blocks = mask_supers = np.ones((masks.shape[0], 0), dtype=np.bool_)
    else:
        if not 0 <= policy <= DOT_PRODUCT:
            raise ValueError("blocks serve the resource policies (0-5) only")
        if blocks.state[0] is not free or blocks.state[1] is not gpu_free:
            raise ValueError("blocks must summarise the free/gpu_free passed")
    layout = blocks.layout
    if mask_blocks is None or mask_supers is None:
        raise ValueError("blocks need mask_blocks and mask_supers")
    n_blocks = layout.block_start.shape[0] - 1
    n_supers = layout.super_start.shape[0] - 1
    _check("mask_blocks", mask_blocks, BOOL, (masks.shape[0], n_blocks if use_blocks else 0))
    _check("mask_supers", mask_supers, BOOL, (masks.shape[0], n_supers if use_blocks else 0))
    offsets = np.zeros(w, dtype=np.int64)
    if w > 1:
        np.cumsum(replicas[:-1], out=offsets[1:])
    total = int(replicas.sum())
    batch = BatchInputs(masks, mask_id, mask_blocks, mask_supers, spread, spread_id, req,
                        replicas, offsets, weights, seeds, impossible, tree_of)  # fmt: skip
    leaves = 1 << max(0, (n - 1).bit_length()) if n_trees else 1
    scratch = BatchScratch(
        tree_score=np.empty((n_trees, 2 * leaves), dtype=np.float64),
        tree_node=np.empty((n_trees, 2 * leaves), dtype=np.int64),
        tree_synced_at=np.empty(n_trees, dtype=np.int64),
        journal=np.empty(2 * total + 1, dtype=np.int64),
        spread_used=np.empty(int(replicas.max()) if w else 0, dtype=np.int64),
        bounds=np.empty(n_blocks + n_supers, dtype=np.float64),
    )
    out = BatchArrays(
        node=np.full(total, -1, dtype=np.int64),
        devices=np.full((total, gpu_free.shape[1]), -1, dtype=np.int64),
        score=np.zeros(w, dtype=np.float64),
        fit=np.zeros(w, dtype=np.int64),
        counts=np.zeros((w, r + 2), dtype=np.int64),
        offsets=offsets,
    )
    args = (int(policy), int(fgd_mode), bool(apply_last), use_blocks, nodes, frag, batch, layout,
            blocks.summaries, scratch, out)  # fmt: skip
    fn = _PLACE_BATCH[0]
    if fn is None:
        _place_batch(*args)
        _PLACE_BATCH[0] = _compiled(_place_batch, args)
    else:
        fn(*args)
    return out


@functools.lru_cache(maxsize=16)
def _no_blocks(r: int) -> BlockIndex:
    """An index of one empty block, for batch calls that do not use the block search."""
    z = np.zeros((0, r), dtype=np.int64)
    layout = BlockLayout(_NO_ROWS, np.zeros(1, dtype=np.int64), _NO_ROWS,
                         np.zeros(1, dtype=np.int64), _NO_ROWS, z, np.zeros((0, r)), z,
                         np.zeros((0, r)))  # fmt: skip
    return BlockIndex(layout=layout, free=np.zeros((0, r), dtype=np.int64),
                      gpu_free=np.zeros((0, 1), dtype=np.int64), capacity=z,
                      inv_cap=np.zeros((0, r)), inv_max_cap=np.zeros(r))  # fmt: skip


def refresh_frag_rows(
    gpu_free: np.ndarray, rows: np.ndarray, shape_gpu: np.ndarray, count_ge: np.ndarray,
    below: np.ndarray,
) -> None:  # fmt: skip
    """Recompute the FGD statistics (``FragArrays.count_ge``/``below``) of nodes ``rows`` in
    place, for the shapes' per-device milli ``shape_gpu``."""
    n, d = gpu_free.shape
    m = shape_gpu.shape[0]
    _check("gpu_free", gpu_free, I64, (n, d))
    _check("rows", rows, I64, (None,))
    _check("shape_gpu", shape_gpu, I64, (m,))
    _check("count_ge", count_ge, I64, (n, m))
    _check("below", below, I64, (n, m))
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise ValueError("rows out of range")
    _frag_rows(gpu_free, rows, shape_gpu, count_ge, below)
