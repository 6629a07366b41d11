"""``warmup()``: compile (or load from the cache) every kernel before the server says SERVING."""

from __future__ import annotations

import numpy as np

from strata_policy.kernels import byte_strings, snapshot_nodes, snapshot_running, snapshot_wire
from strata_policy.kernels.arrays import (
    BlockSummaries,
    FragArrays,
    NodeArrays,
    place_batch_arrays,
    refresh_frag_rows,
)
from strata_policy.kernels.proto_records import scan_kernel, write_kernel
from strata_policy.kernels.score_tree import ScoreTree
from strata_policy.kernels.search import BlockLayout, refresh_blocks, search_blocks


def warmup() -> None:
    """Compile (or load from the cache) every kernel by running each policy on tiny inputs."""
    snapshot_wire.warmup()
    snapshot_nodes.warmup()
    snapshot_running.warmup()
    byte_strings.warmup()
    # read-only byte rows, as the codecs' wrappers pass them (``np.frombuffer`` of bytes)
    record, key, one = (
        np.frombuffer(b, dtype=np.uint8) for b in (b"\x12\x03\x0a\x00\x07", b"\x0a", b"w")
    )
    at = np.empty(2, dtype=np.int64)
    scan_kernel(record, 0, 5, record[4:], at, at.copy(), np.empty(5, dtype=np.uint8))
    out, ends = np.empty(32, dtype=np.uint8), np.ones(1, dtype=np.int64)
    write_kernel(out, key, key, one, one, ends, key, np.ones(1).view(np.uint8))
    free = np.array([[4000, 1 << 30, 2000], [8000, 1 << 30, 1000]], dtype=np.int64)
    gpu_free = np.array([[1000, 1000], [1000, -1]], dtype=np.int64)
    shape_gpu = np.array([500, 1000], dtype=np.int64)
    frag = FragArrays(
        np.array([1000, 1000], dtype=np.int64),
        shape_gpu,
        np.array([1, 1], dtype=np.int64),
        np.array([0.5, 0.5]),
        np.ones((2, 2), dtype=np.bool_),
        np.zeros((2, 2), dtype=np.int64),
        np.zeros((2, 2), dtype=np.int64),
    )
    refresh_frag_rows(gpu_free, np.arange(2, dtype=np.int64), shape_gpu, frag.count_ge, frag.below)
    inv = 1.0 / free
    ones = np.ones(2, dtype=np.bool_)
    req = np.array([1000, 0, 500], dtype=np.int64)
    for policy in (2, 6):  # one compilation serves every policy code
        tree = ScoreTree(
            policy=policy, free=free, gpu_free=gpu_free, capacity=free, inv_cap=inv,
            inv_max_cap=np.ones(3), mask=ones, req=req, weights=np.ones(3), frag=frag,
            fgd_mode=policy % 3,
        )  # fmt: skip
        tree.place(None)
        tree.place(np.array([1], dtype=np.int64))
    layout = BlockLayout.build(free, free, inv, 1, 1)
    # the block search, called as placement.index.BlockIndex calls it
    state = NodeArrays(free, gpu_free, free, inv, np.ones(3))
    n_blocks, n_supers = layout.block_start.shape[0] - 1, layout.super_start.shape[0] - 1
    summaries = BlockSummaries.empty(n_blocks, n_supers, 2, 3)
    none = np.zeros(0, dtype=np.int64)
    refresh_blocks(state, layout, summaries, none, -1)
    refresh_blocks(state, layout, summaries, np.array([1], dtype=np.int64), 1)
    scratch = (np.empty(2, dtype=np.int64), np.empty(n_blocks + n_supers), np.empty(3))
    everyone = layout.mask_levels(ones)
    search_blocks(state, layout, summaries, 2, ones, *everyone, *everyone, req, np.ones(3), none,
                  0, 0, *scratch)  # fmt: skip
    mask, *_ = layout.static_mask(
        schedulable=ones, label_codes=np.zeros((1, 2), dtype=np.int64),
        wanted=np.zeros(1, dtype=np.int64), model_allowed=ones, any_model=False,
        model_code=np.zeros(2, dtype=np.int64), gpu_devices=np.ones(2, dtype=np.int64),
        wants_gpu=True,
    )  # fmt: skip
    layout.static_blocks(
        statics=np.ones((2, 3), dtype=np.int64), hits=np.ones(2, dtype=np.int64),
        model_allowed=ones, any_model=False, wants_gpu=True,
    )  # fmt: skip
    levels = layout.mask_levels(mask)
    for policy in range(8):
        batch_free, batch_gpu = free.copy(), gpu_free.copy()
        copied = BlockSummaries._make(map(np.ndarray.copy, summaries))
        place_batch_arrays(
            free=batch_free,
            gpu_free=batch_gpu,
            capacity=free,
            inv_cap=inv,
            inv_max_cap=np.ones(3),
            masks=np.ones((1, 2), dtype=np.bool_),
            mask_id=np.zeros(2, dtype=np.int64),
            spread=np.arange(2, dtype=np.int64).reshape(1, 2),
            spread_id=np.array([-1, 0], dtype=np.int64),
            req=np.array([[1000, 0, 500], [1000, 0, 1000]], dtype=np.int64),
            replicas=np.array([1, 2], dtype=np.int64),
            weights=np.ones((2, 3)),
            seeds=np.arange(2, dtype=np.uint64),
            impossible=np.zeros(2, dtype=np.bool_),
            policy=policy,
            apply_last=True,
            frag=frag,
            fgd_mode=policy % 3,
            tree_of=np.array([0, -1] if policy == 6 else [-1, -1], dtype=np.int64),
            n_trees=1,
            layout=layout if policy < 6 else None,
            summaries=copied if policy < 6 else None,
            mask_blocks=levels[0][None, :],
            mask_supers=levels[1][None, :],
        )
