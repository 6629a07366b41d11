"""The placement index: every cache placement keeps for a node matrix, each a typed field with
its lifetime stated here and pinned by tests/test_placement_index.py.

Reached with ``index_of(matrix)``: built on a matrix's first placement and kept on it
(``NodeMatrix.placement_index``; the matrix carries it without knowing it, so ``state`` stays
below ``placement``). Two parts, by what they are derived from:

* ``LineageCaches``, from the immutable node data alone: the block layout and per-block
  statics, label codes and label-value selections, static masks and their pieces, block-search
  queries per request shape, the FGD mix arrays, and the shared ``Placement`` values. One per
  matrix lineage (``NodeMatrix.lineage``): a matrix and every copy of it share it, whichever
  builds an entry first, and a new snapshot or node change (``matrix_build.assemble``) starts a
  new one. Nothing in it is ever stale. Its keys come from requests, so each map is bounded
  and emptied when full (``remember``): a client naming many shapes costs time, not memory.
  Races between readers are benign: both build the same value and the last store wins.
* ``PlacementIndex``, from one matrix's state: the block summaries (brought up to date from the
  matrix's journal, under ``lock``), the FGD statistics (per node a stamp of
  ``matrix.version``: a read refreshes just the rows whose version moved; the last
  ``MAX_FRAG_STATS`` mixes, oldest out first) and the FGD score trees (per shape, least recently
  used out first beyond ``TREE_BYTES``, under ``trees_lock``; they replay the journal). A copy
  (``for_copy``) shares the lineage, copies the FGD statistics and the block summaries (small
  per-block arrays) and starts without trees, which are O(N) each.

The index holds no reference to its matrix (a cycle would leave every scratch copy to the
cyclic collector): what reads the state takes the matrix, which must be the index's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from strata_policy import kernels
from strata_policy.kernels import search
from strata_policy.kernels.search import BlockIndex, BlockLayout, BlockQuery
from strata_policy.model.objects import Placement
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType

if TYPE_CHECKING:
    from strata_policy.placement.inputs import StaticMask

MAX_LABEL_KEYS = 64
MAX_SELECTIONS = 128
MAX_SHAPES = 1024
MAX_PLACEMENTS = 1 << 17
MAX_FRAG_STATS = 8
TREE_BYTES = 64 << 20
_NO_ROWS = np.zeros(0, dtype=np.int64)

Items = tuple[tuple[str, int], ...]
Selector = tuple[tuple[str, str], ...]
Weights = tuple[tuple[str, float], ...]
QueryKey = tuple[int, Items, Selector, str, Weights]
"""policy code, request items, node selector items, GPU model, resource weights (sorted)"""
TreeKey = tuple[Items, Selector, str, int, int]
"""request items, node selector items, GPU model, FGD score mode, size of the FGD mix"""
MaskKey = tuple[Selector, str, bool]
"""node selector items (sorted when several), GPU models, whether it wants a GPU"""
LabelCodes = tuple[np.ndarray, dict[str, int]]
Levels = tuple[np.ndarray, np.ndarray, np.ndarray]
Mix = tuple[TaskType, ...]
MixArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]
"""per shape of a mix: cpu milli, per-device GPU milli, device count, weight; their models"""


_K = TypeVar("_K")
_V = TypeVar("_V")


def remember(cache: dict[_K, _V], key: _K, value: _V, bound: int) -> _V:
    """Store ``value`` under ``key`` in a map of at most ``bound`` entries, emptied when full."""
    if len(cache) >= bound:
        cache.clear()
    cache[key] = value
    return value


@dataclass(frozen=True, slots=True)
class LabelSelection:
    """The nodes with one label value (``LineageCaches.label_selection``): their indices, how
    many in each block, a bool per node, and per block and per superblock whether it holds
    any (do not write to the arrays)."""

    nodes: np.ndarray
    block_hits: np.ndarray
    selected: np.ndarray
    block_any: np.ndarray
    super_any: np.ndarray


class LineageCaches:
    """What placement derives from the immutable node data of a matrix lineage (module docs).

    Builders take a matrix of the lineage: they read only its immutable part, alike in all. A
    field named like a method plus ``_`` is that method's cache; the other maps are read and
    filled (``remember``) by the placement module that builds their values.
    """

    __slots__ = (
        "block_statics_", "chosen", "class_levels", "everyone_", "fgd_models", "fgd_weights",
        "label_codes_", "last_mix", "layout_", "masks", "mixes", "models_allowed", "node_ids_",
        "placements", "queries", "replica_tuples", "selections", "zero_request_",
    )  # fmt: skip

    def __init__(self) -> None:
        self.layout_: BlockLayout | None = None
        self.block_statics_: np.ndarray | None = None
        self.everyone_: tuple[np.ndarray, np.ndarray] | None = None
        self.node_ids_: list[str] | None = None
        self.zero_request_: dict[str, int] | None = None
        self.label_codes_: dict[str, LabelCodes] = {}  # MAX_LABEL_KEYS
        self.selections: dict[tuple[str, str], LabelSelection] = {}  # MAX_SELECTIONS
        self.models_allowed: dict[str, tuple[np.ndarray, bool]] = {}  # MAX_SHAPES
        self.class_levels: dict[tuple[str, bool], Levels] = {}  # MAX_SHAPES
        self.masks: dict[MaskKey, StaticMask] = {}  # MAX_SHAPES
        self.queries: dict[QueryKey, BlockQuery | None] = {}  # MAX_SHAPES; None: no column
        self.chosen: dict[int, tuple[Placement]] = {}  # MAX_PLACEMENTS; devices << 32 | node
        self.placements: dict[tuple[int, tuple[int, ...]], Placement] = {}  # MAX_PLACEMENTS
        self.replica_tuples: dict[int, tuple[Placement, ...]] = {}  # MAX_PLACEMENTS
        self.mixes: dict[Mix, MixArrays] = {}  # MAX_FRAG_STATS
        self.last_mix: tuple[Mix, MixArrays] | None = None  # the same tuple again: no hashing
        self.fgd_models: dict[tuple[str, ...], np.ndarray] = {}  # MAX_FRAG_STATS
        self.fgd_weights: dict[tuple[tuple[str, ...], bytes], np.ndarray] = {}  # MAX_FRAG_STATS

    def layout(self, matrix: NodeMatrix) -> BlockLayout:
        """Blocks of alike nodes (same schedulability, GPU model and capacity row)."""
        found = self.layout_
        if found is None:
            groups = np.column_stack((~matrix.schedulable, matrix.model_code, matrix.capacity))
            found = self.layout_ = BlockLayout.build(
                groups.astype(np.int64), matrix.capacity, matrix.inv_capacity,
                search.BLOCK_SIZE, search.SUPER_SIZE,  # read per build: tests set them
            )  # fmt: skip
        return found

    def block_statics(self, matrix: NodeMatrix) -> np.ndarray:
        """Per block of the layout, its nodes' schedulability (0/1), GPU model code and device
        count (alike within a block), as one contiguous int64 array: what a new static mask
        reads instead of every node (``BlockLayout.static_blocks``)."""
        found = self.block_statics_
        if found is None:
            layout = self.layout(matrix)
            firsts = layout.node_order[layout.block_start[:-1]]
            columns = (matrix.schedulable[firsts], matrix.model_code[firsts],
                       matrix.gpu_devices[firsts])  # fmt: skip
            found = self.block_statics_ = np.ascontiguousarray(
                np.column_stack(columns), dtype=np.int64
            )
        return found

    def everyone(self, matrix: NodeMatrix) -> tuple[np.ndarray, np.ndarray]:
        """Without a node selector: per block its size (every node matches), and every node
        selected."""
        found = self.everyone_
        if found is None:
            sizes = np.ascontiguousarray(np.diff(self.layout(matrix).block_start))
            found = self.everyone_ = (sizes, np.ones(len(matrix), dtype=np.bool_))
        return found

    def node_ids(self, matrix: NodeMatrix) -> list[str]:
        """The nodes' ids in matrix order."""
        found = self.node_ids_
        if found is None:
            found = self.node_ids_ = [nd.id for nd in matrix.nodes]
        return found

    def zero_request(self, matrix: NodeMatrix) -> dict[str, int]:
        """0 per resource column, in column order (``inputs.request_and_weights``)."""
        found = self.zero_request_
        if found is None:
            found = self.zero_request_ = dict.fromkeys(matrix.resources, 0)
        return found

    def label_codes(self, matrix: NodeMatrix, key: str) -> LabelCodes:
        """Per node, a code for its value of label ``key`` (-1 when absent), and the code map."""
        found = self.label_codes_.get(key)
        if found is None:
            values: dict[str, int] = {}
            codes = np.empty(len(matrix), dtype=np.int64)
            for n, nd in enumerate(matrix.nodes):
                value = nd.label(key)
                codes[n] = -1 if value is None else values.setdefault(value, len(values))
            found = remember(self.label_codes_, key, (codes, values), MAX_LABEL_KEYS)
        return found

    def label_selection(self, matrix: NodeMatrix, key: str, value: str) -> LabelSelection:
        """The nodes whose label ``key`` is ``value`` (``LabelSelection``), from
        ``label_codes``: once per key and value, so that a node selector naming it costs
        nothing per node after that."""
        found = self.selections.get((key, value))
        if found is None:
            codes, values = self.label_codes(matrix, key)
            code = values.get(value)
            nodes = _NO_ROWS if code is None else np.flatnonzero(codes == code)
            selected = np.zeros(len(matrix), dtype=np.bool_)
            selected[nodes] = True
            layout = self.layout(matrix)
            hits = np.bincount(layout.block_of[nodes], minlength=layout.block_start.shape[0] - 1)
            block_any = hits > 0
            super_any = (
                np.logical_or.reduceat(block_any, layout.super_start[:-1])
                if block_any.size
                else np.zeros(0, dtype=np.bool_)
            )
            one = LabelSelection(nodes, hits.astype(np.int64), selected, block_any, super_any)
            found = remember(self.selections, (key, value), one, MAX_SELECTIONS)
        return found


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


class TreeEntry:
    """One FGD score tree (``kernels.ScoreTree``) with the mix and statistics it was built on,
    and where in which journal it last looked (``epoch`` -1: never)."""

    __slots__ = ("epoch", "frag", "seen", "tree", "types")

    def __init__(self, tree: kernels.ScoreTree, types: Mix, frag: kernels.FragArrays) -> None:
        self.tree = tree
        self.types = types
        self.frag = frag
        self.epoch = -1
        self.seen = 0


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
        """The block summaries of ``matrix``'s state (``kernels.search``): built on first use
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
                    lineage = matrix.lineage.caches = LineageCaches()
                found = matrix.placement_index = PlacementIndex(lineage)
    return found  # type: ignore[return-value]  # only this function sets the slot
