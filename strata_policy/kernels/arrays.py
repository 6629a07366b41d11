"""The batch kernel's validating wrapper (``place_batch_arrays``), the typed bundles of arrays
the kernels take, and the one dtype/shape check every wrapper makes (``check_arrays``).

A bundle is a ``typing.NamedTuple`` of arrays: numba passes it as a tuple (its arrays unboxed
one by one, as separate arguments would be) and the kernel reads its fields by name, so a call
names a handful of bundles, not a positional list of forty arrays. Each is built in one place
(``FragArrays`` by ``placement.fgd_inputs``, ``BlockSummaries`` by the placement index's
``BlockIndex``, the batch's by ``place_batch_arrays``, or ``empty``) and checked by one call
checking all its arrays (``NodeArrays.check``, ``FragArrays.check``, ``BlockSummaries.check``).

Nothing here knows about nodes or workloads (``placement.place`` turns those into arrays). A
wrong shape or dtype is a bug in the caller and raises ``ValueError`` before any kernel runs (a
kernel would otherwise read out of bounds or silently cast). The one-replica wrappers are
``score_tree.ScoreTree`` and ``placement.index.BlockIndex``; ``warmup`` compiles them all.

Units: resource columns are integers in base units (column 0 cpu in millicores, column 1 memory
in bytes, column 2 gpu in milli-GPUs, then the extended resources); GPU devices hold free milli
(1000 = a whole device, -1 = no such device). ``N`` nodes, ``R`` resource columns, ``D`` device
slots per node, ``M`` typical task shapes (FGD), ``W`` workloads of a batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from strata_policy.kernels.fit import DOT_PRODUCT
from strata_policy.kernels.frag import FGD_REFINED, FGD_UNTRUNCATED, _frag_rows
from strata_policy.kernels.place import _place_batch
from strata_policy.kernels.summaries import _SUBSETS, _SUM_ROWS

if TYPE_CHECKING:
    from strata_policy.kernels.layout import BlockLayout

I64 = np.dtype(np.int64)
F64 = np.dtype(np.float64)
BOOL = np.dtype(np.bool_)
U64 = np.dtype(np.uint64)
_NO_ROWS = np.zeros(0, dtype=np.int64)

Spec = tuple[str, np.ndarray, np.dtype, tuple[int | None, ...]]
"""An argument's name, the array passed, and the dtype and shape it must have."""


def check_arrays(*specs: Spec) -> None:
    """Each ``(name, a, dtype, shape)``: ``a`` has ``dtype``, is C-contiguous and has ``shape``
    (``None``: any length on that axis); else ``ValueError`` naming the argument. A kernel
    would otherwise read out of bounds or silently cast."""
    for name, a, dtype, shape in specs:
        if a.dtype != dtype:
            raise ValueError(f"{name}: dtype {a.dtype}, expected {dtype}")
        got = a.shape
        if len(got) != len(shape) or not a.flags.c_contiguous:
            raise ValueError(f"{name}: shape {got} (C-contiguous), expected {shape}")
        for want, have in zip(shape, got, strict=True):
            if want is not None and want != have:
                raise ValueError(f"{name}: shape {got}, expected {shape}")


def check_array(name: str, a: np.ndarray, dtype: np.dtype, shape: tuple[int | None, ...]) -> None:
    """``check_arrays`` of one array."""
    check_arrays((name, a, dtype, shape))


class NodeArrays(NamedTuple):
    """One node state as the kernels read it (held by reference: the kernels that apply a
    placement write ``free`` and ``gpu_free``)."""

    free: np.ndarray
    """int64 ``[N, R]``: free amount per node and resource column."""
    gpu_free: np.ndarray
    """int64 ``[N, D]``: free milli per device (-1: the node has no such device)."""
    capacity: np.ndarray
    """int64 ``[N, R]``: allocatable amount per node and column."""
    inv_capacity: np.ndarray
    """float64 ``[N, R]``: ``1 / capacity`` (0 where the node has none of the column)."""
    inv_max_capacity: np.ndarray
    """float64 ``[R]``: ``1 / `` the cluster's largest capacity per column (BEST_FIT)."""

    def check(self) -> None:
        """Shapes and dtypes agree (raises ``ValueError``); the first three columns must be
        cpu, memory, gpu."""
        n, r = self.free.shape
        check_arrays(
            ("free", self.free, I64, (n, r)),
            ("gpu_free", self.gpu_free, I64, (n, None)),
            ("capacity", self.capacity, I64, (n, r)),
            ("inv_cap", self.inv_capacity, F64, (n, r)),
            ("inv_max_cap", self.inv_max_capacity, F64, (r,)),
        )
        if r < 3:
            raise ValueError("the first three columns must be cpu, memory, gpu")


class FragArrays(NamedTuple):
    """FRAGMENTATION_AWARE's inputs (``kernels.frag``): the typical task shapes ``m`` and two
    statistics per (node, shape) that the kernels keep up to date when they apply a placement
    (pass copies unless nothing is applied)."""

    shape_cpu: np.ndarray
    """int64 ``[M]``: the shape's cpu request, millicores."""
    shape_gpu: np.ndarray
    """int64 ``[M]``: the shape's free milli needed per device (0: a CPU-only shape)."""
    shape_devices: np.ndarray
    """int64 ``[M]``: how many devices the shape takes."""
    shape_weight: np.ndarray
    """float64 ``[M]``: the shape's share of the task mix (its probability ``p_m``)."""
    model_allowed: np.ndarray
    """bool ``[N, M]``: the node's GPU model is one the shape accepts."""
    count_ge: np.ndarray
    """int64 ``[N, M]``: devices of the node with at least ``shape_gpu[m]`` free milli."""
    below: np.ndarray
    """int64 ``[N, M]``: free milli on the node's devices with less than ``shape_gpu[m]``."""

    def check(self, n_nodes: int, fgd_mode: int) -> None:
        """Shapes and dtypes, against ``n_nodes`` nodes, and the score they are read by
        (``fgd_mode``: ``FGD_UNTRUNCATED``, ``FGD_PAPER`` or ``FGD_REFINED``); raises
        ``ValueError``."""
        if not FGD_UNTRUNCATED <= fgd_mode <= FGD_REFINED:
            raise ValueError(f"fgd_mode {fgd_mode}: expected 0, 1 or 2 (see kernels.frag)")
        m = self.shape_gpu.shape[0]
        check_arrays(
            ("shape_cpu", self.shape_cpu, I64, (m,)),
            ("shape_gpu", self.shape_gpu, I64, (m,)),
            ("shape_devices", self.shape_devices, I64, (m,)),
            ("shape_weight", self.shape_weight, F64, (m,)),
            ("model_allowed", self.model_allowed, BOOL, (n_nodes, m)),
            ("count_ge", self.count_ge, I64, (n_nodes, m)),
            ("below", self.below, I64, (n_nodes, m)),
        )

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


class BlockSummaries(NamedTuple):
    """The block search's per-state summaries (``kernels.summaries`` says what each holds):
    per block (``B`` of them) and per superblock (``S``), then per node."""

    block_high: np.ndarray
    """int64 ``[B, R]``: the largest free amount per column over the block's nodes."""
    block_low: np.ndarray
    """int64 ``[B, R]``: the smallest."""
    block_offer: np.ndarray
    """int64 ``[B]``: the best GPU offer of its nodes (``summaries._gpu_offer``)."""
    block_sums: np.ndarray
    """float64 ``[B, 5, 8]``: extremes of the per-subset sums of ``free / capacity``."""
    super_high: np.ndarray
    """int64 ``[S, R]``: as ``block_high``, per superblock."""
    super_low: np.ndarray
    """int64 ``[S, R]``."""
    super_offer: np.ndarray
    """int64 ``[S]``."""
    super_sums: np.ndarray
    """float64 ``[S, 5, 8]``."""
    node_offer: np.ndarray
    """int64 ``[N]``: each node's GPU offer."""

    @staticmethod
    def empty(n_blocks: int, n_supers: int, n_nodes: int, n_columns: int) -> BlockSummaries:
        """Summaries to be filled by ``summaries._refresh_blocks`` (of every block)."""
        b, s, r = n_blocks, n_supers, n_columns
        return BlockSummaries(
            block_high=np.empty((b, r), dtype=np.int64),
            block_low=np.empty((b, r), dtype=np.int64),
            block_offer=np.empty(b, dtype=np.int64),
            block_sums=np.zeros((b, _SUM_ROWS, _SUBSETS), dtype=np.float64),  # subset 0 unused
            super_high=np.empty((s, r), dtype=np.int64),
            super_low=np.empty((s, r), dtype=np.int64),
            super_offer=np.empty(s, dtype=np.int64),
            super_sums=np.zeros((s, _SUM_ROWS, _SUBSETS), dtype=np.float64),
            node_offer=np.empty(n_nodes, dtype=np.int64),
        )

    def check(self, layout: BlockLayout, n_nodes: int, n_columns: int) -> None:
        """Shapes and dtypes against ``layout`` (whose own index arrays are checked with them)
        and ``n_nodes`` × ``n_columns``; raises ``ValueError``."""
        b = layout.block_start.shape[0] - 1
        s = layout.super_start.shape[0] - 1
        n, r = n_nodes, n_columns
        check_arrays(
            ("node_order", layout.node_order, I64, (n,)),
            ("block_of", layout.block_of, I64, (n,)),
            ("super_of", layout.super_of, I64, (b,)),
            ("block_high", self.block_high, I64, (b, r)),
            ("block_low", self.block_low, I64, (b, r)),
            ("block_offer", self.block_offer, I64, (b,)),
            ("block_sums", self.block_sums, F64, (b, _SUM_ROWS, _SUBSETS)),
            ("super_high", self.super_high, I64, (s, r)),
            ("super_low", self.super_low, I64, (s, r)),
            ("super_offer", self.super_offer, I64, (s,)),
            ("super_sums", self.super_sums, F64, (s, _SUM_ROWS, _SUBSETS)),
            ("node_offer", self.node_offer, I64, (n,)),
        )


class BatchInputs(NamedTuple):
    """The workloads of one batch (``W``), each with its row indices into the shared masks."""

    masks: np.ndarray
    """bool ``[K, N]``: the distinct static masks (schedulable, selector, GPU model)."""
    mask_id: np.ndarray
    """int64 ``[W]``: the workload's row of ``masks``."""
    mask_blocks: np.ndarray
    """bool ``[K, B]``: per mask, whether a block holds a node passing it (empty: no blocks)."""
    mask_supers: np.ndarray
    """bool ``[K, S]``: the same per superblock."""
    spread: np.ndarray
    """int64 ``[L, N]``: per spread key, each node's code of its label value (-1: absent)."""
    spread_id: np.ndarray
    """int64 ``[W]``: the workload's row of ``spread`` (-1: no spread)."""
    request: np.ndarray
    """int64 ``[W, R]``: one replica's request per column."""
    replicas: np.ndarray
    """int64 ``[W]``: the gang's replica count (all or nothing)."""
    offsets: np.ndarray
    """int64 ``[W]``: the workload's first row in the per-replica outputs."""
    weights: np.ndarray
    """float64 ``[W, R]``: the score's weight per column."""
    seeds: np.ndarray
    """uint64 ``[W]``: the RANDOM policy's seed per workload."""
    impossible: np.ndarray
    """bool ``[W]``: the workload asks for a resource no node has (it fits nowhere)."""
    tree_of: np.ndarray
    """int64 ``[W]``: the score tree serving the workload (-1: none; ``kernels.tree``)."""


class BatchScratch(NamedTuple):
    """Working arrays of the batch kernel (no meaning outside one call): the score trees'
    values and nodes (``[T, 2P]``, ``kernels.tree``) and the journal length each has caught up
    with (``[T]``, -1: not built); the node of every replica applied or rolled back, in order;
    the spread codes a gang's earlier replicas took; the block search's bounds (``[S + B]``,
    ``blocks._blocks_best``)."""

    tree_score: np.ndarray
    tree_node: np.ndarray
    tree_synced_at: np.ndarray
    journal: np.ndarray
    spread_used: np.ndarray
    bounds: np.ndarray


class BatchArrays(NamedTuple):
    """Kernel outputs: per replica (rows ``offsets[w]:offsets[w]+replicas[w]``) the node (-1
    when unplaced; int64 ``[replicas in all]``) and devices (-1 padded; ``[replicas in all,
    D]``); per workload (``[W]``) the last score (float64), how many replicas fit before the
    gang failed, and per-node reason counts (``[W, R + 2]``: columns, then spread, then
    absent); ``offsets`` as ``BatchInputs.offsets``."""

    node: np.ndarray
    devices: np.ndarray
    score: np.ndarray
    fit: np.ndarray
    counts: np.ndarray
    offsets: np.ndarray


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
    layout: BlockLayout | None = None,
    summaries: BlockSummaries | None = None,
    mask_blocks: np.ndarray | None = None,
    mask_supers: np.ndarray | None = None,
) -> BatchArrays:
    """Run the batch kernel; ``free``/``gpu_free``/``frag`` statistics are mutated only when
    something is applied (more than one replica in all, or ``apply_last``). The arguments are
    the fields of the bundles above (``inv_cap`` is ``NodeArrays.inv_capacity``, ``req``
    ``BatchInputs.request``), which this function builds, once, after checking them.

    ``tree_of[w]`` names the score tree (``0 <= k < n_trees``, see ``kernels.tree``) serving
    workload ``w``, or -1 for a linear scan. Workloads sharing a tree must share their request
    row, weights row and mask, have no spread key, and the policy must not be RANDOM.
    ``fgd_mode`` is FRAGMENTATION_AWARE's score (``FGD_UNTRUNCATED``, ``FGD_PAPER``,
    ``FGD_REFINED``; see ``kernels.frag``).

    ``layout`` and ``summaries`` (resource policies 0-5 only; the summaries must be those of
    ``free``/``gpu_free``, and are mutated with them) make the kernel find each replica's node
    with the block search; ``mask_blocks``/``mask_supers`` are then ``layout.mask_levels`` of
    each row of ``masks``. Workloads with a tree (``tree_of >= 0``) still use it. The journal
    the kernel keeps of applied replicas brings the summaries up to date lazily."""
    nodes = NodeArrays(free, gpu_free, capacity, inv_cap, inv_max_cap)
    nodes.check()
    n, r = free.shape
    w = req.shape[0]
    if tree_of is None:
        tree_of = np.full(w, -1, dtype=np.int64)
        n_trees = 0
    use_blocks = layout is not None
    if layout is None or summaries is None:
        if summaries is not None:
            raise ValueError("summaries need their layout")
        layout, summaries = _no_blocks(r)
        mask_blocks = mask_supers = np.ones((masks.shape[0], 0), dtype=np.bool_)
    else:
        if not 0 <= policy <= DOT_PRODUCT:
            raise ValueError("blocks serve the resource policies (0-5) only")
        summaries.check(layout, n, r)
    if mask_blocks is None or mask_supers is None:
        raise ValueError("blocks need mask_blocks and mask_supers")
    n_blocks = layout.block_start.shape[0] - 1
    n_supers = layout.super_start.shape[0] - 1
    check_arrays(
        ("masks", masks, BOOL, (None, n)),
        ("mask_id", mask_id, I64, (w,)),
        ("spread", spread, I64, (None, n)),
        ("spread_id", spread_id, I64, (w,)),
        ("req", req, I64, (w, r)),
        ("replicas", replicas, I64, (w,)),
        ("weights", weights, F64, (w, r)),
        ("seeds", seeds, U64, (w,)),
        ("impossible", impossible, BOOL, (w,)),
        ("tree_of", tree_of, I64, (w,)),
        ("mask_blocks", mask_blocks, BOOL, (masks.shape[0], n_blocks if use_blocks else 0)),
        ("mask_supers", mask_supers, BOOL, (masks.shape[0], n_supers if use_blocks else 0)),
    )
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
    if w and (tree_of.min() < -1 or tree_of.max() >= n_trees):
        raise ValueError("tree_of out of range")
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
            summaries, scratch, out)  # fmt: skip
    fn = _PLACE_BATCH[0]
    if fn is None:
        _place_batch(*args)
        from strata_policy.kernels.layout import _compiled  # noqa: PLC0415  # layout imports us

        _PLACE_BATCH[0] = _compiled(_place_batch, args)
    else:
        fn(*args)
    return out


@functools.lru_cache(maxsize=16)
def _no_blocks(r: int) -> tuple[BlockLayout, BlockSummaries]:
    """A layout of one empty block and its summaries, for batch calls without the block
    search."""
    from strata_policy.kernels.layout import BlockLayout  # noqa: PLC0415  # layout imports us

    z = np.zeros((0, r), dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    layout = BlockLayout(_NO_ROWS, one, _NO_ROWS, one, _NO_ROWS, z, np.zeros((0, r)), z,
                         np.zeros((0, r)))  # fmt: skip
    return layout, BlockSummaries.empty(0, 0, 0, r)


def refresh_frag_rows(
    gpu_free: np.ndarray, rows: np.ndarray, shape_gpu: np.ndarray, count_ge: np.ndarray,
    below: np.ndarray,
) -> None:  # fmt: skip
    """Recompute the FGD statistics (``FragArrays.count_ge``/``below``) of nodes ``rows`` in
    place, for the shapes' per-device milli ``shape_gpu``."""
    n, d = gpu_free.shape
    m = shape_gpu.shape[0]
    check_arrays(
        ("gpu_free", gpu_free, I64, (n, d)),
        ("rows", rows, I64, (None,)),
        ("shape_gpu", shape_gpu, I64, (m,)),
        ("count_ge", count_ge, I64, (n, m)),
        ("below", below, I64, (n, m)),
    )
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise ValueError("rows out of range")
    _frag_rows(gpu_free, rows, shape_gpu, count_ge, below)
