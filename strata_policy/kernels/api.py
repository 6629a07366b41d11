"""Validating wrappers around the kernels: arrays in, arrays out, shapes and dtypes checked.

Nothing here knows about nodes or workloads; ``strata_policy.placement.place`` turns those into
the arrays below. A wrong shape or dtype is a bug in the caller and raises ``ValueError`` before
any kernel runs (a kernel would otherwise read out of bounds or silently cast).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from strata_policy.kernels import snapshot_wire
from strata_policy.kernels.fit import DOT_PRODUCT
from strata_policy.kernels.frag import FGD_REFINED, FGD_UNTRUNCATED, _frag_rows
from strata_policy.kernels.place import _place_batch
from strata_policy.kernels.proto_records import scan_records, write_records
from strata_policy.kernels.search import BlockIndex, BlockLayout
from strata_policy.kernels.tree import _tree_place

I64 = np.dtype(np.int64)
F64 = np.dtype(np.float64)
BOOL = np.dtype(np.bool_)
U64 = np.dtype(np.uint64)


@dataclass(frozen=True, slots=True)
class FragArrays:
    """FGD inputs: per typical shape its cpu, per-device milli, device count and weight; per
    (node, shape) whether the model is allowed and the two cached statistics (mutated when the
    kernel applies a placement, so pass copies unless nothing is applied)."""

    t_cpu: np.ndarray
    t_gpu: np.ndarray
    t_k: np.ndarray
    t_w: np.ndarray
    model_ok: np.ndarray
    count_ge: np.ndarray
    below: np.ndarray

    def check(self, n_nodes: int) -> None:
        """Shapes and dtypes, against ``n_nodes`` nodes (raises ``ValueError``)."""
        t = self.t_gpu.shape[0]
        for name, a, dt, shape in (
            ("t_cpu", self.t_cpu, I64, (t,)),
            ("t_gpu", self.t_gpu, I64, (t,)),
            ("t_k", self.t_k, I64, (t,)),
            ("t_w", self.t_w, F64, (t,)),
            ("model_ok", self.model_ok, BOOL, (n_nodes, t)),
            ("count_ge", self.count_ge, I64, (n_nodes, t)),
            ("below", self.below, I64, (n_nodes, t)),
        ):
            _check(name, a, dt, shape)

    @staticmethod
    def empty(n_nodes: int) -> FragArrays:
        """No shapes (every other policy)."""
        z = np.zeros(0, dtype=np.int64)
        return FragArrays(
            z,
            z,
            z,
            np.zeros(0, dtype=np.float64),
            np.zeros((n_nodes, 0), dtype=np.bool_),
            np.zeros((n_nodes, 0), dtype=np.int64),
            np.zeros((n_nodes, 0), dtype=np.int64),
        )


@dataclass(frozen=True, slots=True)
class BatchArrays:
    """Kernel outputs: per replica (rows ``offsets[w]:offsets[w]+replicas[w]``) the node (-1
    when unplaced) and devices (-1 padded); per workload the last score, how many replicas fit
    before the gang failed, and per-node reason counts (columns, then spread, then absent)."""

    node: np.ndarray
    devices: np.ndarray
    score: np.ndarray
    fit: np.ndarray
    counts: np.ndarray
    offsets: np.ndarray


def _check_mode(fgd_mode: int) -> None:
    if not FGD_UNTRUNCATED <= fgd_mode <= FGD_REFINED:
        raise ValueError(f"fgd_mode {fgd_mode}: expected 0, 1 or 2 (see kernels.frag)")


def _check(name: str, a: np.ndarray, dtype: np.dtype, shape: tuple[int | None, ...]) -> None:
    if a.dtype != dtype:
        raise ValueError(f"{name}: dtype {a.dtype}, expected {dtype}")
    got = a.shape
    if len(got) != len(shape) or not a.flags.c_contiguous:
        raise ValueError(f"{name}: shape {got} (C-contiguous), expected {shape}")
    for want, have in zip(shape, got, strict=True):
        if want is not None and want != have:
            raise ValueError(f"{name}: shape {got}, expected {shape}")


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
    something is applied (more than one replica in all, or ``apply_last``).

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
    n, r = free.shape
    d = gpu_free.shape[1]
    w = req.shape[0]
    for name, a, dt, shape in (
        ("free", free, I64, (n, r)),
        ("gpu_free", gpu_free, I64, (n, d)),
        ("capacity", capacity, I64, (n, r)),
        ("inv_cap", inv_cap, F64, (n, r)),
        ("inv_max_cap", inv_max_cap, F64, (r,)),
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
    frag.check(n)
    if r < 3:
        raise ValueError("the first three columns must be cpu, memory, gpu")
    _check_mode(fgd_mode)
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
    size = 1 << max(0, (n - 1).bit_length()) if n_trees else 1
    tval = np.empty((n_trees, 2 * size), dtype=np.float64)
    tidx = np.empty((n_trees, 2 * size), dtype=np.int64)
    offsets = np.zeros(w, dtype=np.int64)
    if w > 1:
        np.cumsum(replicas[:-1], out=offsets[1:])
    total = int(replicas.sum())
    node = np.full(total, -1, dtype=np.int64)
    devices = np.full((total, d), -1, dtype=np.int64)
    score = np.zeros(w, dtype=np.float64)
    fit = np.zeros(w, dtype=np.int64)
    counts = np.zeros((w, r + 2), dtype=np.int64)
    journal = np.empty(2 * total + 1, dtype=np.int64)
    use_blocks = blocks is not None
    if blocks is None:
        blocks = _no_blocks(r)
        mask_blocks = mask_supers = np.ones((masks.shape[0], 0), dtype=np.bool_)
    else:
        if not 0 <= policy <= DOT_PRODUCT:
            raise ValueError("blocks serve the resource policies (0-5) only")
        if blocks.state[0] is not free or blocks.state[1] is not gpu_free:
            raise ValueError("blocks must summarise the free/gpu_free passed")
    lay = blocks.layout
    if mask_blocks is None or mask_supers is None:
        raise ValueError("blocks need mask_blocks and mask_supers")
    _check(
        "mask_blocks",
        mask_blocks,
        BOOL,
        (masks.shape[0], lay.bstart.shape[0] - 1 if use_blocks else 0),
    )
    _check(
        "mask_supers",
        mask_supers,
        BOOL,
        (masks.shape[0], lay.sstart.shape[0] - 1 if use_blocks else 0),
    )
    _place_batch(
        free, gpu_free, capacity, inv_cap, inv_max_cap, masks, mask_id, spread, spread_id,
        req, replicas, offsets, weights, seeds, impossible, policy, apply_last,
        frag.t_cpu, frag.t_gpu, frag.t_k, frag.t_w, frag.model_ok, frag.count_ge, frag.below,
        fgd_mode, tree_of, tval, tidx, journal, use_blocks, mask_blocks, mask_supers,
        lay.perm, lay.bstart, lay.block_of, lay.sstart, lay.super_of, lay.bcap, lay.binv,
        lay.scap, lay.sinv, *blocks.summaries, np.empty(n_trees, dtype=np.int64),
        np.empty(int(replicas.max()) if w else 0, dtype=np.int64),
        np.empty(lay.bstart.shape[0] + lay.sstart.shape[0] - 2, dtype=np.float64), node,
        devices, score, fit, counts,
    )  # fmt: skip
    return BatchArrays(node, devices, score, fit, counts, offsets)


class ScoreTree:
    """A persistent score tree (``kernels.tree``) for one request on one node state.

    The state arrays are held by reference: the owner mutates them in place and tells
    ``place`` which nodes changed since the last call. Shapes and dtypes are checked once, here.
    """

    __slots__ = ("_args", "_dev", "_size", "_tidx", "_tval", "built")

    def __init__(
        self,
        *,
        policy: int,
        free: np.ndarray,
        gpu_free: np.ndarray,
        capacity: np.ndarray,
        inv_cap: np.ndarray,
        inv_max_cap: np.ndarray,
        mask: np.ndarray,
        req: np.ndarray,
        weights: np.ndarray,
        frag: FragArrays,
        fgd_mode: int,
    ) -> None:
        n, r = free.shape
        d = gpu_free.shape[1]
        for name, a, dt, shape in (
            ("free", free, I64, (n, r)),
            ("gpu_free", gpu_free, I64, (n, d)),
            ("capacity", capacity, I64, (n, r)),
            ("inv_cap", inv_cap, F64, (n, r)),
            ("inv_max_cap", inv_max_cap, F64, (r,)),
            ("mask", mask, BOOL, (n,)),
            ("req", req, I64, (r,)),
            ("weights", weights, F64, (r,)),
        ):
            _check(name, a, dt, shape)
        frag.check(n)
        if r < 3 or not 0 <= policy < 7:
            raise ValueError("bad columns or policy (RANDOM has no tree)")
        _check_mode(fgd_mode)
        self._size = 1 << max(0, (n - 1).bit_length())
        self._tval = np.empty((1, 2 * self._size), dtype=np.float64)
        self._tidx = np.empty((1, 2 * self._size), dtype=np.int64)
        self._dev = np.empty(d, dtype=np.int64)
        self._args = (policy, free, gpu_free, capacity, inv_cap, inv_max_cap, mask, req, weights,
                      frag.t_cpu, frag.t_gpu, frag.t_k, frag.t_w, frag.model_ok, frag.count_ge,
                      frag.below, fgd_mode)  # fmt: skip
        self.built = False

    @property
    def nbytes(self) -> int:
        """Memory the tree itself takes."""
        return int(self._tval.nbytes + self._tidx.nbytes)

    def place(self, changed: np.ndarray | None) -> tuple[int, float, tuple[int, ...]]:
        """Best node for one replica (-1 when none fits), its score and devices; ``changed``
        lists the nodes whose state moved since the last call (None: rebuild)."""
        if changed is None or not self.built:
            rows, n_rows = _NO_ROWS, -1
        else:
            _check("changed", changed, I64, (None,))
            if changed.size and (changed.min() < 0 or changed.max() >= self._args[1].shape[0]):
                raise ValueError("changed rows out of range")
            rows, n_rows = changed, changed.shape[0]
        best, score = _tree_place(*self._args, self._tval, self._tidx, rows, n_rows, self._dev)
        self.built = True
        if best < 0:
            return -1, 0.0, ()
        return best, score, tuple(int(x) for x in self._dev if x >= 0)


_NO_ROWS = np.zeros(0, dtype=np.int64)


@functools.lru_cache(maxsize=16)
def _no_blocks(r: int) -> BlockIndex:
    """An index of one empty block, for batch calls that do not use the block search."""
    z = np.zeros((0, r), dtype=np.int64)
    lay = BlockLayout(_NO_ROWS, np.zeros(1, dtype=np.int64), _NO_ROWS, np.zeros(1, dtype=np.int64),
                      _NO_ROWS, z, np.zeros((0, r)), z, np.zeros((0, r)))  # fmt: skip
    return BlockIndex(layout=lay, free=np.zeros((0, r), dtype=np.int64),
                      gpu_free=np.zeros((0, 1), dtype=np.int64), capacity=z,
                      inv_cap=np.zeros((0, r)), inv_max_cap=np.zeros(r))  # fmt: skip


def refresh_frag_rows(
    gpu_free: np.ndarray, rows: np.ndarray, t_gpu: np.ndarray, count_ge: np.ndarray,
    below: np.ndarray,
) -> None:  # fmt: skip
    """Recompute the FGD statistics of nodes ``rows`` in place."""
    n, d = gpu_free.shape
    t = t_gpu.shape[0]
    _check("gpu_free", gpu_free, I64, (n, d))
    _check("rows", rows, I64, (None,))
    _check("t_gpu", t_gpu, I64, (t,))
    _check("count_ge", count_ge, I64, (n, t))
    _check("below", below, I64, (n, t))
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise ValueError("rows out of range")
    _frag_rows(gpu_free, rows, t_gpu, count_ge, below)


def warmup() -> None:
    """Compile (or load from the cache) every kernel by running each policy on tiny inputs."""
    snapshot_wire.warmup()
    record = np.array([0x12, 3, 0x0A, 0, 7], dtype=np.uint8)
    scan_records(record, 0, 5, record[4:])
    ends = np.array([1], dtype=np.int64)
    write_records(b"\x0a", b"\x0a", b"w", b"\x20", ends, b"\x39", np.ones(1))
    free = np.array([[4000, 1 << 30, 2000], [8000, 1 << 30, 1000]], dtype=np.int64)
    gpu_free = np.array([[1000, 1000], [1000, -1]], dtype=np.int64)
    t_gpu = np.array([500, 1000], dtype=np.int64)
    frag = FragArrays(
        np.array([1000, 1000], dtype=np.int64),
        t_gpu,
        np.array([1, 1], dtype=np.int64),
        np.array([0.5, 0.5]),
        np.ones((2, 2), dtype=np.bool_),
        np.zeros((2, 2), dtype=np.int64),
        np.zeros((2, 2), dtype=np.int64),
    )
    refresh_frag_rows(gpu_free, np.arange(2, dtype=np.int64), t_gpu, frag.count_ge, frag.below)
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
    index = BlockIndex(layout=layout, free=free, gpu_free=gpu_free, capacity=free, inv_cap=inv,
                       inv_max_cap=np.ones(3))  # fmt: skip
    index.refresh(np.array([1], dtype=np.int64))
    index.place(index.query(policy=2, req=req, weights=np.ones(3), mask=ones))
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
        blocks = index.with_state(batch_free, batch_gpu) if policy < 6 else None
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
            blocks=blocks,
            mask_blocks=levels[0][None, :],
            mask_supers=levels[1][None, :],
        )
