"""What placement derives from a matrix lineage's immutable node data (``LineageCaches``), one
per lineage, shared by a matrix and its copies; the part of the placement index
(``placement.index``) that no commit invalidates. Its lifetimes are pinned with the index's by
tests/test_placement_index.py.

Reached as ``index_of(matrix).lineage`` (``NodeMatrix.lineage.caches``; the lineage carries it
without knowing it, so ``state`` stays below ``placement``): the block layout and per-block
statics, the nodes' ids, label codes and label-value selections, static masks and their pieces,
block-search queries per request shape, the FGD mix arrays, and the shared ``Placement``
values. A matrix and every copy of it share one, whichever builds an entry first, and a new
snapshot or node change (``NodeMatrix.assemble``) starts a new one. Nothing in it is ever
stale. Its keys come from requests, so each map is bounded and emptied when full
(``remember``): a client naming many shapes costs time, not memory. Races between readers are
benign: both build the same value and the last store wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from strata_policy.kernels import search
from strata_policy.kernels.layout import BlockLayout
from strata_policy.model.objects import Placement
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType

if TYPE_CHECKING:
    from strata_policy.placement.index import BlockQuery
    from strata_policy.placement.inputs import StaticMask

MAX_LABEL_KEYS = 64
MAX_SELECTIONS = 128
MAX_SHAPES = 1024
MAX_PLACEMENTS = 1 << 17
MAX_FRAG_STATS = 8
_NO_ROWS = np.zeros(0, dtype=np.int64)

Items = tuple[tuple[str, int], ...]
Selector = tuple[tuple[str, str], ...]
Weights = tuple[tuple[str, float], ...]
QueryKey = tuple[int, Items, Selector, str, Weights]
"""policy code, request items, node selector items, GPU model, resource weights (sorted)"""
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
        "label_codes_", "last_mix", "layout_", "masks", "mixes", "models_allowed", "node_ids",
        "placements", "queries", "replica_tuples", "selections", "zero_request_",
    )  # fmt: skip

    def __init__(self, matrix: NodeMatrix) -> None:
        self.node_ids = [nd.id for nd in matrix.nodes]
        """The nodes' ids in matrix order (the answer's names for the kernel's node indices)."""
        self.layout_: BlockLayout | None = None
        self.block_statics_: np.ndarray | None = None
        self.everyone_: tuple[np.ndarray, np.ndarray] | None = None
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
