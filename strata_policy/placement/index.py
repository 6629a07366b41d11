"""The placement index: every cache placement keeps for a node matrix, each a typed field with
its lifetime stated here and pinned by tests/test_placement_index.py, and the block search it
owns (``BlockIndex``, the Python side of the block-search kernels in ``kernels.search``).

Reached with ``index_of(matrix)``: built on a matrix's first placement and kept on it
(``NodeMatrix.placement_index``; the matrix carries it without knowing it, so ``state`` stays
below ``placement``). Two parts, by what they are derived from:

* ``LineageCaches`` (``placement.lineage``), from the immutable node data alone: one per matrix
  lineage, shared by a matrix and its copies, never stale, each map bounded.
* ``PlacementIndex``, from one matrix's state: the block summaries (a ``BlockIndex``, brought up
  to date from the matrix's journal, under ``lock``), the FGD statistics (per node a stamp of
  ``matrix.version``: a read refreshes just the rows whose version moved; the last
  ``MAX_FRAG_STATS`` mixes, oldest out first) and the FGD score trees (per shape, least recently
  used out first beyond ``TREE_BYTES``, under ``trees_lock``; they replay the journal). A copy
  (``for_copy``) shares the lineage, copies the FGD statistics and the block summaries (small
  per-block arrays) and starts without trees, which are O(N) each.

The index holds no reference to its matrix (a cycle would leave every scratch copy to the
cyclic collector): what reads the state takes the matrix, which must be the index's own.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from strata_policy import kernels
from strata_policy.kernels import search
from strata_policy.kernels.arrays import BOOL, F64, I64, BlockSummaries, NodeArrays, check_arrays
from strata_policy.kernels.fit import DOT_PRODUCT, FIRST_FIT
from strata_policy.kernels.layout import BlockLayout
from strata_policy.placement.lineage import MAX_FRAG_STATS, Items, LineageCaches, Selector
from strata_policy.state.nodes import NodeMatrix

if TYPE_CHECKING:
    from strata_policy.placement.one_replica import TreeEntry

TREE_BYTES = 64 << 20
_NO_ROWS = np.zeros(0, dtype=np.int64)

TreeKey = tuple[Items, Selector, str, int, int]
"""request items, node selector items, GPU model, FGD score mode, size of the FGD mix"""


class FragStats:
    """FGD statistics of one tuple of per-device milli ``shape_gpu``: per (node, shape) ``count_ge``
    and ``below`` (``kernels.refresh_frag_rows``), and per node the ``matrix.version`` they
    were computed at (-1: never)."""

    __slots__ = ("below", "count_ge", "shape_gpu", "stamp")

    def __init__(self, shape_gpu: np.ndarray, n_nodes: int) -> None:
        self.shape_gpu = shape_gpu
        self.count_ge = np.zeros((n_nodes, shape_gpu.shape[0]), dtype=np.int64)
        self.below = np.zeros((n_nodes, shape_gpu.shape[0]), dtype=np.int64)
        self.stamp = np.full(n_nodes, -1, dtype=np.int64)

    def copy(self) -> FragStats:
        """Statistics of their own with the same values and stamps (for a copied matrix)."""
        other = FragStats.__new__(FragStats)
        other.shape_gpu = self.shape_gpu
        other.count_ge = self.count_ge.copy()
        other.below = self.below.copy()
        other.stamp = self.stamp.copy()
        return other


class PlacementIndex:
    """What placement keeps for one matrix (module docs): its lineage's caches, the block
    summaries of its state, its FGD statistics and score trees."""

    __slots__ = ("blocks", "blocks_at", "frag", "lineage", "lock", "trees", "trees_lock")

    def __init__(self, lineage: LineageCaches) -> None:
        self.lineage = lineage
        self.blocks: BlockIndex | None = None
        self.blocks_at: tuple[int, int] = (0, 0)  # (epoch, journal length) they reflect
        self.lock = threading.Lock()  # guards building and refreshing the block summaries
        self.frag: dict[tuple[int, ...], FragStats] = {}  # by shape_gpu; MAX_FRAG_STATS, FIFO
        self.trees: dict[TreeKey, TreeEntry] = {}  # least recently used first; TREE_BYTES
        self.trees_lock = threading.Lock()

    def for_copy(self, original: NodeMatrix, copy: NodeMatrix) -> PlacementIndex:
        """The index of ``copy``, just copied from ``original`` (this index's matrix): the
        lineage shared, the FGD statistics and block summaries copied (still valid: the copy
        has the original's state and versions), no trees."""
        other = PlacementIndex(self.lineage)
        other.frag = {key: stats.copy() for key, stats in self.frag.items()}
        if self.blocks is not None:
            summaries = self.block_index(original)
            other.blocks = summaries.with_state(copy.free, copy.gpu_free)
            other.blocks_at = (copy.epoch, 0)  # as of the copy's empty journal
        return other

    # -- block summaries -------------------------------------------------------------------

    def block_index(self, matrix: NodeMatrix) -> BlockIndex:
        """The block summaries of ``matrix``'s state (``BlockIndex``): built on first use
        (the layout is the lineage's), then brought up to date from the journal, a block per
        changed node. Safe for concurrent readers."""
        idx = self.blocks
        if idx is not None and self.blocks_at == (matrix.epoch, matrix.journal_len):
            return idx
        with self.lock:
            return self._sync(matrix, None)

    def block_search(self, matrix: NodeMatrix, query: BlockQuery) -> tuple[int, float, int]:
        """``block_index(matrix).search(query)`` (node, score, devices as a bit set), bringing
        the summaries up to date in the same kernel call when the state moved since they last
        looked."""
        idx = self.blocks
        epoch, seen = self.blocks_at
        if idx is not None and epoch == matrix.epoch:
            now = matrix.journal_len
            if seen == now:
                return idx.search(query)
            with self.lock:  # the common case after a commit: refresh its block, then search
                if self.blocks_at == (epoch, seen):
                    found = idx.search(query, matrix.journal, seen, now - seen)
                    self.blocks_at = (epoch, now)
                    return found
        with self.lock:
            out: list[tuple[int, float, int]] = []
            self._sync(matrix, lambda idx, changed: out.append(idx.search(query, changed)))
            return out[0]

    def _sync(
        self, matrix: NodeMatrix, then: Callable[[BlockIndex, np.ndarray | None], None] | None
    ) -> BlockIndex:
        """Build or refresh the block summaries (under ``lock``); ``then`` gets the index and
        the changed nodes (None: all) to refresh within its own kernel call instead."""
        idx = self.blocks
        epoch, seen = self.blocks_at
        changed: np.ndarray | None = _NO_ROWS
        if idx is None:
            idx = BlockIndex(layout=self.lineage.layout(matrix), free=matrix.free,
                             gpu_free=matrix.gpu_free, capacity=matrix.capacity,
                             inv_cap=matrix.inv_capacity,
                             inv_max_cap=matrix.inv_max_capacity)  # fmt: skip
        elif epoch != matrix.epoch:
            changed = None
        elif seen < matrix.journal_len:
            changed = matrix.journal[seen : matrix.journal_len]
        if then is not None:
            then(idx, changed)
        elif changed is None or changed.size:
            idx.refresh(changed)
        self.blocks = idx
        self.blocks_at = (matrix.epoch, matrix.journal_len)
        return idx

    # -- FGD ---------------------------------------------------------------------------------

    def frag_stats(self, matrix: NodeMatrix, shape_gpu: np.ndarray) -> FragStats:
        """The FGD statistics of per-device milli ``shape_gpu`` on ``matrix``'s state: the rows
        whose version moved since they were computed refreshed (one node per committed
        replica), so a read costs O(changed nodes · shapes), not O(N · shapes · devices)."""
        key = tuple(shape_gpu.tolist())
        stats = self.frag.get(key)
        if stats is None:
            if len(self.frag) >= MAX_FRAG_STATS:
                self.frag.pop(next(iter(self.frag)))
            stats = self.frag[key] = FragStats(shape_gpu, len(matrix))
        stale = np.flatnonzero(stats.stamp != matrix.version)
        if stale.size:
            kernels.refresh_frag_rows(
                matrix.gpu_free, stale, shape_gpu, stats.count_ge, stats.below
            )
            stats.stamp[stale] = matrix.version[stale]
        return stats

    def make_room_for_tree(self, n_nodes: int) -> None:
        """Drop the least recently used trees until they and one more of ``n_nodes`` leaves
        take at most ``TREE_BYTES`` (call under ``trees_lock``)."""
        size = 1 << max(0, (n_nodes - 1).bit_length())
        trees = self.trees
        while trees and (len(trees) + 1) * 32 * size > TREE_BYTES:
            del trees[next(iter(trees))]


_MAKING = threading.Lock()  # makes an index or a lineage's caches once, for concurrent readers


def index_of(matrix: NodeMatrix) -> PlacementIndex:
    """``matrix``'s placement index, made on first use on the lineage's caches (made then too
    when no matrix of the lineage had an index yet)."""
    found = matrix.placement_index
    if found is None:
        with _MAKING:
            found = matrix.placement_index
            if found is None:
                lineage = matrix.lineage.caches
                if not isinstance(lineage, LineageCaches):
                    lineage = matrix.lineage.caches = LineageCaches(matrix)
                found = matrix.placement_index = PlacementIndex(lineage)
    return found  # type: ignore[return-value]  # only this function sets the slot


# -- the block search ------------------------------------------------------------------------------


class BlockQuery:
    """One request shape on a layout: policy code (0-5), request row, weight row (empty: 1 for
    every column the request asks for), static mask, per block and per superblock whether any
    of its nodes may pass the mask (in two parts, both of which must hold: ``mask_*`` and
    ``select_*``), and how many GPU devices one replica takes. Immutable by contract;
    ``args`` are its arguments of the search kernel (``search.search_blocks``), in order.

    The constructor checks nothing: ``BlockIndex.query`` is the validating way to make one.
    Only code that builds every array itself with the dtypes and shapes ``query`` checks calls
    it directly (``placement.one_replica``: the first call of a shape would otherwise pay
    about 1.5 µs for checks its own construction already guarantees)."""

    __slots__ = ("args", "devices", "layout")

    def __init__(
        self,
        layout: BlockLayout,
        policy: int,
        req: np.ndarray,
        weights: np.ndarray,
        mask: np.ndarray,
        mask_blocks: np.ndarray,
        mask_supers: np.ndarray,
        select_blocks: np.ndarray,
        select_supers: np.ndarray,
    ) -> None:
        self.layout = layout
        self.args = (policy, mask, mask_blocks, mask_supers, select_blocks, select_supers, req,
                     weights)  # fmt: skip
        g = req.item(2)  # the gpu column: a share takes one device, k × 1000 takes k
        self.devices = 0 if g <= 0 else 1 if g < 1000 else g // 1000


class BlockIndex:
    """Block summaries of one node state (``kernels.blocks``), answering one replica at a time.

    The state arrays are held by reference: the owner mutates them in place and calls
    ``refresh`` with the nodes that changed before the next ``place``. Not safe against a
    ``refresh`` running beside a ``place``; the owner serialises them.
    """

    __slots__ = (
        "_n_bounds",
        "_place_fn",
        "_refresh_fn",
        "_scratch",
        "_state",
        "layout",
        "summaries",
    )

    summaries: BlockSummaries
    """Per block and per superblock the high, low, offer and sums rows, per node its GPU offer
    (``kernels.blocks``; the batch kernel mutates a copy's)."""

    def __init__(
        self,
        *,
        layout: BlockLayout,
        free: np.ndarray,
        gpu_free: np.ndarray,
        capacity: np.ndarray,
        inv_cap: np.ndarray,
        inv_max_cap: np.ndarray,
    ) -> None:
        n, r = capacity.shape
        nb = layout.block_start.shape[0] - 1
        ns = layout.super_start.shape[0] - 1
        self._state = NodeArrays(free, gpu_free, capacity, inv_cap, inv_max_cap)
        self._state.check()
        check_arrays(
            ("block_start", layout.block_start, I64, (nb + 1,)),
            ("super_start", layout.super_start, I64, (ns + 1,)),
            ("block_capacity", layout.block_capacity, I64, (nb, r)),
            ("block_inv_capacity", layout.block_inv_capacity, F64, (nb, r)),
            ("super_capacity", layout.super_capacity, I64, (ns, r)),
            ("super_inv_capacity", layout.super_inv_capacity, F64, (ns, r)),
        )
        self.layout = layout
        self.summaries = BlockSummaries.empty(nb, ns, n, r)
        self.summaries.check(layout, n, r)  # and the layout's node and block indexes
        self._bind()
        self.refresh(None)

    def _bind(self) -> None:
        lay = self.layout
        self._place_fn: Callable[..., tuple[int, float, int]] | None = None
        self._refresh_fn: Callable[..., None] | None = None
        self._n_bounds = lay.block_start.shape[0] + lay.super_start.shape[0] - 2
        self._scratch = threading.local()  # the kernel's scratch and device rows, per thread

    def with_state(self, free: np.ndarray, gpu_free: np.ndarray) -> BlockIndex:
        """The same summaries over a copy of the state (``free``/``gpu_free`` equal to ours)."""
        check_arrays(("free", free, I64, self._state.free.shape),
                     ("gpu_free", gpu_free, I64, self._state.gpu_free.shape))  # fmt: skip
        other = BlockIndex.__new__(BlockIndex)
        other.layout = self.layout
        other._state = self._state._replace(free=free, gpu_free=gpu_free)
        other.summaries = BlockSummaries._make(map(np.ndarray.copy, self.summaries))
        other._bind()
        return other

    @property
    def state(self) -> NodeArrays:
        """``free, gpu_free, capacity, inv_capacity, inv_max_capacity`` (held by reference)."""
        return self._state

    def refresh(self, rows: np.ndarray | None) -> None:
        """Recompute the blocks of nodes ``rows`` (int64 node indices, ``ValueError`` when out
        of range), or every block."""
        if rows is None:
            rows, count = _NO_ROWS, -1
        elif rows.dtype != I64 or rows.ndim != 1:
            raise ValueError("rows: expected int64 node indices")
        else:
            count = rows.shape[0]
        args = (self._state, self.layout, self.summaries, rows, count)
        fn = self._refresh_fn
        if fn is None or not (rows.flags.c_contiguous and rows.flags.writeable):
            search.refresh_blocks(*args)  # the dispatcher types ``rows`` of any layout
            if fn is None and rows.flags.c_contiguous and rows.flags.writeable:
                self._refresh_fn = search.compiled(search.refresh_blocks, args)
        else:
            fn(*args)

    def query(
        self,
        *,
        policy: int,
        req: np.ndarray,
        weights: np.ndarray,
        mask: np.ndarray,
        levels: tuple[np.ndarray, np.ndarray] | None = None,
        select: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> BlockQuery:
        """A validated request shape for ``place`` (policy: a resource policy, 0-5; ``weights``
        a float64 per column, or empty for 1 on every column ``req`` asks for); ``levels`` is
        ``layout.mask_levels(mask)`` when the caller has it already, or a part of it whose
        ``&`` with ``select`` (block and superblock levels, too) is."""
        n, r = self._state.free.shape
        flat = (0,) if weights.shape == (0,) else (r,)
        check_arrays(("req", req, I64, (r,)), ("weights", weights, F64, flat),
                     ("mask", mask, BOOL, (n,)))  # fmt: skip
        if not FIRST_FIT <= policy <= DOT_PRODUCT:
            raise ValueError(f"policy {policy}: expected a resource policy (0-5)")
        blocks, supers = self.layout.mask_levels(mask) if levels is None else levels
        select_blocks, select_supers = (blocks, supers) if select is None else select
        nb = self.layout.block_start.shape[0] - 1
        ns = self.layout.super_start.shape[0] - 1
        check_arrays(
            ("mask blocks", blocks, BOOL, (nb,)),
            ("mask superblocks", supers, BOOL, (ns,)),
            ("select blocks", select_blocks, BOOL, (nb,)),
            ("select superblocks", select_supers, BOOL, (ns,)),
        )
        return BlockQuery(self.layout, policy, req, weights, mask, blocks, supers, select_blocks,
                          select_supers)  # fmt: skip

    def place(
        self, q: BlockQuery, rows: np.ndarray | None = _NO_ROWS, first: int = 0, count: int = -1
    ) -> tuple[int, float, tuple[int, ...]]:
        """The best node for one replica of ``q`` (-1 when none fits), its score and devices;
        first the summaries of nodes ``rows[first:first + count]`` refreshed in the same kernel
        call (``count`` -1: to the end; ``rows`` None: every block)."""
        best, score, bits = self.search(q, rows, first, count)
        if best < 0:
            return -1, 0.0, ()
        if not q.devices:
            return best, score, ()
        if bits < 0:
            return best, score, tuple(self._scratch.arrays[0][: q.devices].tolist())
        return best, score, device_set(bits)

    def search(
        self, q: BlockQuery, rows: np.ndarray | None = _NO_ROWS, first: int = 0, count: int = -1
    ) -> tuple[int, float, int]:
        """``place`` with the devices as a bit set (bit ``d``: device ``d``; 0 when the request
        takes none, -1 when the node has more than 62 devices: ``place`` lists them), for a
        caller that keys its own shared values by node and bit set."""
        if q.layout is not self.layout:
            raise ValueError("the query was made for another layout")
        if rows is _NO_ROWS:  # the common call: nothing to refresh
            first = count = 0
        elif rows is None:
            rows, first, count = _NO_ROWS, 0, -1
        else:
            if rows.dtype != I64 or rows.ndim != 1:
                raise ValueError("rows: expected int64 node indices")
            if count < 0:
                count = rows.shape[0] - first
            if not 0 <= first <= first + count <= rows.shape[0]:
                raise ValueError("rows: first and count out of range")
        try:
            scratch = self._scratch.arrays
        except AttributeError:  # the first call on this thread
            scratch = self._scratch.arrays = (
                np.empty(self._state.gpu_free.shape[1], dtype=np.int64),  # devices
                np.empty(self._n_bounds, dtype=np.float64),  # bounds
                np.empty(self._state.free.shape[1], dtype=np.float64),  # default weights
            )
        args = (self._state, self.layout, self.summaries, *q.args, rows, first, count, *scratch)
        fn = self._place_fn
        if fn is None:
            found: tuple[int, float, int] = search.search_blocks(*args)
            self._place_fn = search.compiled(search.search_blocks, args)
            return found
        return fn(*args)


@functools.lru_cache(maxsize=4096)
def device_set(bits: int) -> tuple[int, ...]:
    """The device indices of a bit set, ascending (shared tuples: few distinct sets occur).
    ``int``: without the JIT (``NUMBA_DISABLE_JIT=1``) the kernel's bit set is a numpy int64,
    which has no ``bit_length``."""
    bits = int(bits)
    return tuple(d for d in range(bits.bit_length()) if bits >> d & 1)
