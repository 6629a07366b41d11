"""Static masks: which nodes a workload may use at all, whatever their free resources.

Schedulable, node selector and GPU model depend only on the (immutable) nodes and the workload's
selector and model, so each distinct (selector, models, wants-gpu) gets its block levels and
its reason counts computed once and shared by every copy of the matrix (in the lineage's caches
of ``placement.index``). That costs work per
block plus per selected node, not per node: the nodes of a block share schedulability, model
and device count (``LineageCaches.layout``), and a label value's nodes are indexed once
(``LineageCaches.label_selection``). The per-node mask, which only the batch kernel's scans read,
is built on first use.

The block search needs less than a ``StaticMask``: ``search_levels`` gives it a selector's
block levels as two cached parts, the nodes' classes' and the label value's (no reason counts,
not even their ``&``: the kernel ands them), so a first placement with a new selector builds
nothing per selector; the counts are only needed when nothing fits, and that path builds the
``StaticMask``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from strata_policy.model.objects import Workload
from strata_policy.model.resources import GPU
from strata_policy.placement.explain import MODEL_MISMATCH, SELECTOR_MISMATCH, UNSCHEDULABLE
from strata_policy.placement.index import MAX_SHAPES, LineageCaches, MaskKey, index_of, remember
from strata_policy.state.nodes import NodeMatrix


class StaticMask:
    """A workload's static feasibility: schedulable, node selector, GPU model.

    ``counts`` says how many nodes fail first on each of those, ``blocks``/``supers`` per block
    and superblock of the matrix's block layout whether any node passes, ``selected`` per node
    whether it matches the node selector only: inside a block that passes, every node passes
    schedulable and model (a block's nodes are alike in those), so the block search needs no
    more. All of that costs work per block plus per selected node (``kernels.masks.
    _static_blocks`` and ``LineageCaches.label_selection``), paid by a batch or an unplaced answer
    with a new selector (``search_levels`` serves the block search without it). ``mask``,
    every test per node (the batch kernel's scans), is built in one pass over the nodes the
    first time it is read.
    """

    __slots__ = ("_mask", "_source", "blocks", "counts", "selected", "supers")

    def __init__(
        self,
        source: tuple[NodeMatrix, tuple[tuple[str, str], ...], str, bool],
        counts: Mapping[str, int],
        blocks: np.ndarray,
        supers: np.ndarray,
        selected: np.ndarray,
    ) -> None:
        self._source = source
        self._mask: np.ndarray | None = None
        self.counts = counts
        self.blocks = blocks
        self.supers = supers
        self.selected = selected

    @property
    def mask(self) -> np.ndarray:
        """Per node, whether it passes every static test (built on first use)."""
        found = self._mask
        if found is None:
            found = self._mask = _node_mask(*self._source)
        return found


def _model_allowed(
    lineage: LineageCaches, matrix: NodeMatrix, models: str
) -> tuple[np.ndarray, bool]:
    """Per model code whether ``models`` (``A|B``) allows it, and whether any model goes
    (cached per spelling in the lineage)."""
    found = lineage.models_allowed.get(models)
    if found is None:
        names = {m for m in models.split("|") if m}
        allowed = (np.array([m in names for m in matrix.models], dtype=np.bool_), not names)
        found = remember(lineage.models_allowed, models, allowed, MAX_SHAPES)
    return found


def _node_mask(
    matrix: NodeMatrix, selector: tuple[tuple[str, str], ...], models: str, wants_gpu: bool
) -> np.ndarray:
    """The static mask node by node, in one pass (``kernels.search.BlockLayout.static_mask``)."""
    lineage = index_of(matrix).lineage
    n = len(matrix)
    codes = np.empty((len(selector), n), dtype=np.int64)
    wanted = np.empty(len(selector), dtype=np.int64)
    for k, (key, value) in enumerate(selector):
        node_codes, values = lineage.label_codes(matrix, key)
        codes[k] = node_codes
        code = values.get(value)
        wanted[k] = -2 if code is None else code  # -2: no node has the value
    allowed, any_model = _model_allowed(lineage, matrix, models)
    mask, *_ = lineage.layout(matrix).static_mask(
        schedulable=matrix.schedulable, label_codes=codes, wanted=wanted, model_allowed=allowed,
        any_model=any_model, model_code=matrix.model_code, gpu_devices=matrix.gpu_devices,
        wants_gpu=wants_gpu,
    )  # fmt: skip
    return mask


def _build_mask(
    lineage: LineageCaches,
    matrix: NodeMatrix,
    selector: tuple[tuple[str, str], ...],
    models: str,
    wants_gpu: bool,
) -> StaticMask:
    """Block levels and counts from the nodes the selector picks (``LineageCaches.
    label_selection``; with one label, or none, no node is visited)."""
    layout = lineage.layout(matrix)
    n_blocks = layout.block_start.shape[0] - 1
    if not selector:
        hits, selected = lineage.everyone(matrix)
    elif len(selector) == 1:
        one = lineage.label_selection(matrix, *selector[0])
        hits, selected = one.block_hits, one.selected
    else:
        chosen = lineage.label_selection(matrix, *selector[0]).nodes
        for key, value in selector[1:]:
            chosen = chosen[lineage.label_selection(matrix, key, value).selected[chosen]]
        hits = np.bincount(layout.block_of[chosen], minlength=n_blocks).astype(np.int64)
        selected = np.zeros(len(matrix), dtype=np.bool_)
        selected[chosen] = True
    allowed, any_model = _model_allowed(lineage, matrix, models)
    blocks, supers, (unschedulable, selector_miss, model_miss) = layout.static_blocks(
        statics=lineage.block_statics(matrix), hits=hits, model_allowed=allowed,
        any_model=any_model, wants_gpu=wants_gpu,
    )  # fmt: skip
    counts = {
        UNSCHEDULABLE: unschedulable,
        SELECTOR_MISMATCH: selector_miss,
        MODEL_MISMATCH: model_miss,
    }
    return StaticMask((matrix, selector, models, wants_gpu), counts, blocks, supers, selected)


def _class_levels(
    lineage: LineageCaches, matrix: NodeMatrix, models: str, wants_gpu: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per block and per superblock whether its class of nodes passes schedulable and model
    (cached per models and wants-gpu in the lineage): the levels of the ``StaticMask`` without a
    selector, from the same kernel with every node selected; and that selection (every node),
    so that a call without a selector looks up one cached value."""
    found = lineage.class_levels.get((models, wants_gpu))
    if found is None:
        allowed, any_model = _model_allowed(lineage, matrix, models)
        sizes, selected = lineage.everyone(matrix)
        blocks, supers, _ = lineage.layout(matrix).static_blocks(
            statics=lineage.block_statics(matrix), hits=sizes, model_allowed=allowed,
            any_model=any_model, wants_gpu=wants_gpu,
        )  # fmt: skip
        levels = (blocks, supers, selected)
        found = remember(lineage.class_levels, (models, wants_gpu), levels, MAX_SHAPES)
    return found


def search_levels(
    matrix: NodeMatrix, workload: Workload
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What the block search reads of ``static_mask(matrix, workload)``: ``selected``, and its
    ``blocks`` and ``supers`` in two parts, ``blocks == b1 & b2`` and ``supers == s1 & s2`` for
    the returned ``selected, b1, s1, b2, s2`` (the kernel ands them as it reads them; do not
    write to the arrays).

    A block passes when its class of nodes passes schedulable and model and it holds a selected
    node; a superblock, whose blocks are of one class, when its class passes and any of its
    blocks holds one. Without a selector, or with one label, both parts are cached (per models
    and wants-gpu, and per label value with its index), so nothing is built per selector, not
    even their ``&``: a new selector's first call looks up two cached values. Without a
    selector the class levels are both parts (``x & x == x``); several labels take the cached
    ``StaticMask``'s levels, twice likewise."""
    labels = workload.node_selector
    if len(labels) > 1:
        found = static_mask(matrix, workload)
        return found.selected, found.blocks, found.supers, found.blocks, found.supers
    lineage = index_of(matrix).lineage
    blocks, supers, everyone = _class_levels(
        lineage, matrix, workload.gpu_model, workload.request.get(GPU, 0) > 0
    )
    if not labels:
        return everyone, blocks, supers, blocks, supers
    ((key, value),) = labels.items()
    one = lineage.label_selection(matrix, key, value)
    return one.selected, blocks, supers, one.block_any, one.super_any


def static_mask(matrix: NodeMatrix, workload: Workload) -> StaticMask:
    """The workload's static mask (cached per selector/models/wants-gpu in the lineage)."""
    labels = workload.node_selector
    selector = tuple(labels.items()) if len(labels) < 2 else tuple(sorted(labels.items()))
    key: MaskKey = (selector, workload.gpu_model, workload.request.get(GPU, 0) > 0)
    lineage = index_of(matrix).lineage
    found = lineage.masks.get(key)
    if found is None:
        built = _build_mask(lineage, matrix, selector, workload.gpu_model, key[2])
        found = remember(lineage.masks, key, built, MAX_SHAPES)
    return found
