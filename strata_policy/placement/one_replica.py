"""``place_one``'s fast paths: one replica, no spread key, no resource outside the columns.

**Resource policies** (all but FRAGMENTATION_AWARE and RANDOM) are answered by the block search
(``kernels.blocks``) over the matrix's block summaries (``PlacementIndex.block_index``), which
serve every request shape and are kept up to date a block per committed replica: no call of a
shape, first or later, pays for more than the summaries and the few blocks whose bound can beat
the best node found. The per-shape inputs (request row, weights, static mask and its block
levels, built once in the dtypes and shapes the kernel takes) are cached in the lineage's caches
(``placement.index``), keyed by the shape. An earlier design kept a score tree per shape and
built it on the shape's second call: O(N), ~100 × a ``numpy.sum`` of the matrix for that one
call, to save work the block search no longer has to do.

**FRAGMENTATION_AWARE** keeps a score tree (``kernels.tree``) per shape (request, selector,
model, FGD score and mix) in ``PlacementIndex.trees``: its score depends on the typical shapes'
cached statistics, which block summaries do not bound. A call replays the matrix's journal since
the tree last looked (usually a handful of nodes), rescoring only those, and reads the best node
at the root; the answer is the linear scan's, bit for bit. Trees are bounded in memory (least
recently used go first) and guarded by the index's ``trees_lock`` (kernels run without the GIL).

RANDOM's score depends on the workload id, so it is never served here. When nothing fits,
``None`` sends the caller to the general path, which also counts the reasons.
"""

from __future__ import annotations

from collections.abc import Mapping

from strata_policy import kernels
from strata_policy.model.objects import Placement, Workload
from strata_policy.placement import inputs
from strata_policy.placement.fgd_inputs import frag_arrays
from strata_policy.placement.index import BlockQuery, PlacementIndex, TreeKey, device_set, index_of
from strata_policy.placement.lineage import MAX_PLACEMENTS, MAX_SHAPES, Mix, QueryKey, remember
from strata_policy.placement.outputs import placement_of
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType


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


def place_blocks(
    matrix: NodeMatrix, workload: Workload, policy: int, weights: Mapping[str, float]
) -> tuple[tuple[Placement, ...], float] | None:
    """The placement of one replica of ``workload`` under a resource policy and its score, or
    None when nothing fits (or the request names a resource no node has)."""
    selector = workload.node_selector
    key: QueryKey = (
        policy,
        tuple(workload.request.items()),
        tuple(selector.items()) if selector else (),
        workload.gpu_model,
        tuple(sorted(weights.items())) if weights else (),
    )
    index = index_of(matrix)
    queries = index.lineage.queries
    query = queries.get(key, _ABSENT)
    if query is _ABSENT:
        query = remember(queries, key, _block_query(matrix, workload, policy, weights), MAX_SHAPES)
    if query is None:
        return None
    best, score, bits = index.block_search(matrix, query)  # type: ignore[arg-type]  # not _ABSENT
    if best < 0:
        return None
    found = index.lineage.chosen.get(bits << 32 | best) if bits >= 0 else None
    if found is None:
        found = _chosen(index, matrix, query, best, bits)  # type: ignore[arg-type]  # not _ABSENT
    return found, score


_ABSENT: object = object()


def _chosen(
    index: PlacementIndex, matrix: NodeMatrix, query: BlockQuery, best: int, bits: int
) -> tuple[Placement]:
    """The shared one-replica answer for node ``best`` on the devices of bit set ``bits``
    (``BlockIndex.search``), kept per (node, bit set) so that a placement builds no tuple;
    a node with more than 62 devices (``bits`` -1) asks the index for its devices instead."""
    if bits < 0:
        devices = index.block_index(matrix).place(query)[2]
        return (placement_of(matrix, best, devices),)
    found = (placement_of(matrix, best, device_set(bits)),)
    return remember(index.lineage.chosen, bits << 32 | best, found, MAX_PLACEMENTS)


def _block_query(
    matrix: NodeMatrix,
    workload: Workload,
    policy: int,
    weights: Mapping[str, float],
) -> BlockQuery | None:
    """The query of ``workload``'s shape, or None when it names a resource no node has.

    Built with ``BlockQuery``'s constructor, which checks nothing: every array here is made
    with the dtype and shape ``BlockIndex.query`` checks (``request_and_weights``' rows by
    ``fromiter`` with the dtype and length, or its shared empty weight row; the levels and the
    selection are cached arrays of the matrix's layout), and ``policy`` is a resource policy's
    code (``place_one`` sends no other here). The checks cost a first call of a shape about
    1.5 µs; tests/test_block_query_inputs.py says the query passes them and places like the
    validating one."""
    req, row, missing = inputs.request_and_weights(matrix, workload.request, weights)
    if missing:
        return None
    # schedulable and model are decided per block (StaticMask): ``selected`` is the selector's
    selected, blocks, supers, select_blocks, select_supers = inputs.search_levels(matrix, workload)
    return BlockQuery(index_of(matrix).lineage.layout(matrix), policy, req, row,
                              selected, blocks, supers, select_blocks,
                              select_supers)  # fmt: skip


def place_cached(
    matrix: NodeMatrix,
    workload: Workload,
    types: tuple[TaskType, ...],
    fgd_mode: int,
) -> tuple[tuple[Placement, ...], float] | None:
    """The FRAGMENTATION_AWARE placement of one replica of ``workload`` and its score, or None
    when nothing fits (or the request names a resource no node has). ``types`` is the FGD mix
    and ``fgd_mode`` its score."""
    selector = workload.node_selector
    key: TreeKey = (
        tuple(workload.request.items()),
        tuple(selector.items()) if selector else (),
        workload.gpu_model,
        fgd_mode,
        len(types),
    )
    index = index_of(matrix)
    trees = index.trees
    with index.trees_lock:
        entry = trees.pop(key, None)
        refined = fgd_mode == kernels.FGD_REFINED
        frag = frag_arrays(matrix, types, private=False, per_capacity=refined)
        if entry is not None and not (
            (entry.types is types or entry.types == types) and entry.frag.count_ge is frag.count_ge
        ):
            entry = None
        if entry is None:
            entry = _new_entry(index, matrix, workload, types, fgd_mode, frag)
            if entry is None:
                return None
        trees[key] = entry  # most recently used last
        if entry.epoch != matrix.epoch or matrix.journal_len - entry.seen > max(
            64, len(matrix) // 8
        ):
            changed = None
        else:
            changed = matrix.journal_since(entry.seen).copy()
        best, score, devices = entry.tree.place(changed)
        entry.epoch = matrix.epoch
        entry.seen = matrix.journal_len
    if best < 0:
        return None
    return (placement_of(matrix, best, devices),), score


def _new_entry(
    index: PlacementIndex,
    matrix: NodeMatrix,
    workload: Workload,
    types: tuple[TaskType, ...],
    fgd_mode: int,
    frag: kernels.FragArrays,
) -> TreeEntry | None:
    """A score tree of ``workload``'s shape on ``matrix``'s state, room made for it in
    ``index``, or None when the request names a resource no node has."""
    req, missing = inputs.request_row(matrix, workload.request)
    if missing:
        return None
    index.make_room_for_tree(len(matrix))
    tree = kernels.ScoreTree(
        policy=kernels.FRAGMENTATION_AWARE,
        free=matrix.free,
        gpu_free=matrix.gpu_free,
        capacity=matrix.capacity,
        inv_cap=matrix.inv_capacity,
        inv_max_cap=matrix.inv_max_capacity,
        mask=inputs.static_mask(matrix, workload).mask,
        req=req,
        weights=inputs.weight_rows(matrix, req, {}),
        frag=frag,
        fgd_mode=fgd_mode,
    )
    return TreeEntry(tree, types, frag)
