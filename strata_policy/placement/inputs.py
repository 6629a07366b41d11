"""The placement kernels' inputs: a batch's workloads as kernel rows, and the static masks of
which nodes each may use; the one entry point from a placement to the caches of the placement
index (``placement.index``) that make them cheap. FGD's are in ``placement.fgd_inputs``;
the kernels' answers are turned into values by ``placement.outputs``.

* **Kernel rows** (``batch_shapes``, ``request_row``, ``request_and_weights``, ``weight_rows``,
  ``tree_assignment``): built once per distinct shape of a batch (request, selector, model,
  spread key), then spread to its workloads by index arrays.
* **Static masks** (``StaticMask``, ``static_mask``, ``search_levels``): schedulable, node
  selector and GPU model depend only on the (immutable) nodes and the workload's selector and
  model, so each distinct (selector, models, wants-gpu) gets its block levels and its reason
  counts computed once and shared by every copy of the matrix (in the lineage's caches). That
  costs work per block plus per selected node, not per node: the nodes of a block share
  schedulability, model and device count (``LineageCaches.layout``), and a label value's nodes
  are indexed once (``LineageCaches.label_selection``). The per-node mask, which only the batch
  kernel's scans read, is built on first use. The block search needs less than a
  ``StaticMask``: ``search_levels`` gives it a selector's block levels as two cached parts, the
  nodes' classes' and the label value's (no reason counts, not even their ``&``: the kernel
  ands them), so a first placement with a new selector builds nothing per selector; the counts
  are only needed when nothing fits, and that path builds the ``StaticMask``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from strata_policy.model.objects import HOSTNAME_KEY, Workload
from strata_policy.model.resources import GPU, MILLI_PER_GPU
from strata_policy.placement.explain import MODEL_MISMATCH, SELECTOR_MISMATCH, UNSCHEDULABLE
from strata_policy.placement.index import index_of
from strata_policy.placement.lineage import MAX_SHAPES, LineageCaches, MaskKey, remember
from strata_policy.quota.batch import Groups, group
from strata_policy.state.nodes import NodeMatrix

_I64 = np.dtype(np.int64)
_F64 = np.dtype(np.float64)


def spread_codes(matrix: NodeMatrix, key: str) -> np.ndarray:
    """Per node, the code of its value of the spread key (-1 when absent)."""
    return index_of(matrix).lineage.label_codes(matrix, key or HOSTNAME_KEY)[0]


def seed_of(seed: int, workload_id: str) -> int:
    """The RANDOM policy's 64-bit seed for one workload: stable across processes and hosts."""
    digest = hashlib.blake2b(f"{seed}:{workload_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def request_row(matrix: NodeMatrix, request: Mapping[str, int]) -> tuple[np.ndarray, str]:
    """The request as a column vector, and the first resource (by name) no column has.

    Built from a list in one array construction (a first placement of a shape pays it)."""
    amounts = [request.get(r, 0) for r in matrix.resources]
    return np.array(amounts, dtype=np.int64), _missing(matrix, request)


def _missing(matrix: NodeMatrix, request: Mapping[str, int]) -> str:
    """The first resource (by name) that ``request`` asks for and no column has, or ""."""
    col = matrix.resource_index
    if request.keys() <= col.keys():
        return ""
    return min((n for n, a in request.items() if a > 0 and n not in col), default="")


DEFAULT_WEIGHTS = np.zeros(0, dtype=np.float64)
"""``request_and_weights``' weight row without weights: the block search then weighs 1 every
column the request asks for (``kernels.blocks._blocks_place``), as ``weight_rows`` does. Shared
by every query that has no weights: never written to."""


def request_and_weights(
    matrix: NodeMatrix, request: Mapping[str, int], weights: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray, str]:
    """``request_row`` and the block search's weight row: ``weight_rows``' row when
    ``weights`` is given, else ``DEFAULT_WEIGHTS`` (empty: the kernel derives that row from the
    request). A first placement of a shape without weights pays one small array construction
    (``fromiter`` with the dtype, half the cost of ``array`` with one) and no array
    arithmetic.

    The amounts are the first values of ``{**zeros, **request}`` (``zeros``: 0 per column, in
    column order): the request's amount or 0 per column, and the request's other names after
    them, so that one C-level merge gives the row and whether any name has no column (the
    merge is longer than the row), where a lookup per column and a key-set test cost twice
    that."""
    names = matrix.resources
    n = len(names)
    zeros = index_of(matrix).lineage.zero_request(matrix)
    amounts = {**zeros, **request}
    req = np.fromiter(amounts.values(), _I64, n)
    missing = "" if len(amounts) == n else _missing(matrix, request)
    if not weights:
        return req, DEFAULT_WEIGHTS, missing
    row = np.fromiter([float(weights.get(r, 0.0)) for r in names], _F64, n)
    return req, row, missing


def weight_rows(matrix: NodeMatrix, req: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
    """Per workload (a row of ``req``, or ``req`` itself when it is one row), the score weight
    of each column: the options' weights when given (absent = 0), else 1 for every requested
    resource."""
    if not weights:
        return (req > 0).astype(np.float64)
    row = np.array([float(weights.get(r, 0.0)) for r in matrix.resources], dtype=np.float64)
    return np.ascontiguousarray(np.broadcast_to(row, req.shape))


# -- score trees ----------------------------------------------------------------------------

_TREE_BYTES = 64 << 20  # memory the score trees of one call may take


def tree_assignment(n_nodes: int, shapes: BatchShapes, is_random: bool) -> tuple[np.ndarray, int]:
    """Which score tree (``kernels.tree``) serves each workload, -1 for none (the block search
    for the resource policies, a scan for FGD).

    Workloads of one shape (same request, selector, model: same request row, weights row and
    mask) share one tree; a tree costs O(N) to build and then O(log N) per placement, so it
    pays off once its shape is placed at least twice (two workloads, or a gang): only those
    shapes get one, most used first, as many as ``_TREE_BYTES`` allows. Spread gangs (their
    feasibility depends on the gang's earlier replicas) and RANDOM (its score depends on the
    workload) get none.
    """
    n_work = shapes.req.shape[0]
    tree_of = np.full(n_work, -1, dtype=np.int64)
    if is_random or n_nodes == 0 or int(shapes.replicas.sum()) < 2:
        return tree_of, 0
    uses = np.bincount(shapes.shape_id, weights=shapes.replicas, minlength=shapes.n_shapes)
    uses[shapes.shape_scans] = 0
    size = 1 << max(0, (n_nodes - 1).bit_length())
    budget = max(1, _TREE_BYTES // (32 * size))
    order = np.argsort(-uses, kind="stable")
    order = order[uses[order] >= 2][:budget]
    if order.size == 0:
        return tree_of, 0
    slot = np.full(shapes.n_shapes, -1, dtype=np.int64)
    slot[order] = np.arange(order.size)
    return np.ascontiguousarray(slot[shapes.shape_id]), int(order.size)


@dataclass(frozen=True, slots=True)
class BatchShapes:
    """A batch's workloads as kernel rows, built once per distinct shape (request, selector,
    model, spread key) so that a batch of many alike workloads costs a dict lookup each."""

    req: np.ndarray
    replicas: np.ndarray
    mask_id: np.ndarray
    spread_id: np.ndarray
    impossible: np.ndarray
    missing: list[str]
    devices: np.ndarray
    statics: list[StaticMask]
    masks: np.ndarray
    mask_blocks: np.ndarray
    mask_supers: np.ndarray
    spread: np.ndarray
    shape_id: np.ndarray
    n_shapes: int
    shape_scans: np.ndarray
    gangs: bool


def batch_shapes(
    matrix: NodeMatrix, workloads: Sequence[Workload], groups: Groups | None = None
) -> BatchShapes:
    """The kernel rows of ``workloads`` (see ``BatchShapes``); ``groups`` is
    ``quota.batch.group(workloads)`` when the caller has it. Rows are built per distinct
    shape, then spread to the workloads by index arrays: nothing here runs per workload but
    two ``numpy`` gathers and the list of missing resources."""
    if groups is None:
        groups = group(workloads)
    index: dict[object, int] = {}
    group_shape: list[int] = []
    firsts: list[Workload] = []
    for wl in groups.firsts:
        selector = wl.node_selector
        key = (
            tuple(wl.request.items()),
            tuple(selector.items()) if selector else (),
            wl.gpu_model,
            wl.spread_key,
        )
        found = index.get(key)
        if found is None:
            found = index[key] = len(firsts)
            firsts.append(wl)
        group_shape.append(found)
    n_shapes = len(firsts)
    n_res = len(matrix.resources)
    s_req = np.zeros((n_shapes, n_res), dtype=np.int64)
    s_mask = np.empty(n_shapes, dtype=np.int64)
    s_spread = np.full(n_shapes, -1, dtype=np.int64)
    s_missing: list[str] = []
    statics: list[StaticMask] = []
    mask_index: dict[int, int] = {}
    spreads: list[np.ndarray] = []
    spread_index: dict[str, int] = {}
    for i, wl in enumerate(firsts):
        row, missing = request_row(matrix, wl.request)
        s_req[i] = row
        s_missing.append(missing)
        static = static_mask(matrix, wl)
        s_mask[i] = mask_index.setdefault(id(static), len(statics))
        if s_mask[i] == len(statics):
            statics.append(static)
        if wl.spread_key:
            s_spread[i] = spread_index.setdefault(wl.spread_key, len(spreads))
            if s_spread[i] == len(spreads):
                spreads.append(spread_codes(matrix, wl.spread_key))
    s_impossible = np.array([bool(m) for m in s_missing], dtype=np.bool_)
    g = s_req[:, 2]
    s_devices = np.where(g >= MILLI_PER_GPU, g // MILLI_PER_GPU, (g > 0).astype(np.int64))
    of_group = np.asarray(groups.group, dtype=np.int64)
    ids = np.asarray(group_shape, dtype=np.int64)[of_group]
    replicas = np.asarray([w.replicas for w in groups.firsts], dtype=np.int64)[of_group]
    missing_of = [s_missing[i] for i in group_shape]
    return BatchShapes(
        req=np.ascontiguousarray(s_req[ids]),
        replicas=replicas,
        mask_id=np.ascontiguousarray(s_mask[ids]),
        spread_id=np.ascontiguousarray(s_spread[ids]),
        impossible=np.ascontiguousarray(s_impossible[ids]),
        missing=[missing_of[g] for g in groups.group] if any(s_missing) else [""] * len(ids),
        devices=s_devices[ids],
        statics=statics,
        masks=np.stack([st.mask for st in statics]),
        mask_blocks=np.stack([st.blocks for st in statics]),
        mask_supers=np.stack([st.supers for st in statics]),
        spread=np.stack(spreads) if spreads else np.zeros((0, len(matrix)), dtype=np.int64),
        shape_id=ids,
        n_shapes=n_shapes,
        shape_scans=np.flatnonzero((s_spread >= 0) | s_impossible),
        gangs=bool((replicas > 1).any()),
    )


# -- static masks --------------------------------------------------------------------------


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
