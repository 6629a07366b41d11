"""A node matrix for changed nodes, carrying the allocations of the old one: UpdateSnapshot's
node upserts and removals without re-allocating every running replica.

``rebuilt`` is given the new node list and, per new row, the old row it continues (-1 for a new
node) and whether its node data changed. Node data of unchanged rows is gathered from the old
arrays; only changed rows are read off their ``Node``. The allocations (``allocated``,
``gpu_free`` per device, replica counts) of every continued row are carried over as they are, so
the result is the very matrix ``matrix_build.matrix_from_nodes`` followed by allocating every
running replica would give (the arrays are sums of what runs on each node and device, whatever
the order), provided what runs still fits: a node whose new capacity is below what it holds, or
that lost a GPU device in use, gives ``None`` and the caller takes the full path, which names
the replica.

The immutable part is new (fresh index maps, block layout, label codes and masks, built lazily
on first use), because the placement caches are keyed by it; the running state is what carries.
Cost: a few vectorised passes over the matrix (copying its rows) plus the changed nodes in
Python; the columns are scanned from every node only when a change may add or drop one.
"""

from __future__ import annotations

import numpy as np

from strata_policy.model.objects import Node
from strata_policy.model.resources import MILLI_PER_GPU, RESERVED
from strata_policy.state.matrix_build import assemble, resource_columns
from strata_policy.state.nodes import GPU_COL, NodeMatrix


def rebuilt(
    old: NodeMatrix,
    nodes: tuple[Node, ...],
    old_row: np.ndarray,
    changed: np.ndarray,
    index: dict[str, int],
) -> NodeMatrix | None:
    """The matrix of ``nodes`` holding what ``old`` holds (see the module docstring).

    ``old_row[i]`` is the row of ``old`` that row ``i`` continues, -1 for a new node;
    ``changed[i]`` says whether row ``i``'s node data must be read off ``nodes[i]`` (every new
    node, and every upserted one); ``index`` maps each node id to its row. ``None`` when what
    runs no longer fits.
    """
    carried = (old_row >= 0) & ~changed  # rows whose node data is the old row's
    fresh = np.flatnonzero(changed)
    names = _columns(old, nodes, old_row, fresh)
    if names == old.resources and np.array_equal(old_row, np.arange(len(nodes))):
        patched = _patched(old, nodes, fresh, index)  # the commonest case: rows changed in place
        if not isinstance(patched, _ShapeChanged):
            return patched
    col = {r: i for i, r in enumerate(names)}
    n_nodes, width = len(nodes), len(names)
    same_columns = names == old.resources
    old_cols = np.array([col.get(r, -1) for r in old.resources], dtype=np.int64)
    src = old_row[carried]

    capacity = np.zeros((n_nodes, width), dtype=np.int64)
    _gather(capacity, carried, old.capacity, src, old_cols, same_columns)
    for i in fresh.tolist():
        row = capacity[i]
        for r, amount in nodes[i].capacity.items():
            row[col[r]] = amount

    fresh_models = {nodes[i].gpu_model for i in fresh.tolist()}
    kept_codes = np.unique(old.model_code[src])
    models = tuple(sorted({old.models[c] for c in kept_codes.tolist()} | fresh_models | {""}))
    model_index = {m: i for i, m in enumerate(models)}
    remap = np.array([model_index.get(m, -1) for m in old.models], dtype=np.int64)
    model_code = np.zeros(n_nodes, dtype=np.int64)
    model_code[carried] = remap[old.model_code[src]]
    schedulable = np.zeros(n_nodes, dtype=np.bool_)
    schedulable[carried] = old.schedulable[src]
    for i in fresh.tolist():
        model_code[i] = model_index[nodes[i].gpu_model]
        schedulable[i] = not nodes[i].unschedulable

    new = assemble(nodes, index, names, capacity, schedulable, models, model_code)
    return new if _carry(old, new, old_row, old_cols, same_columns) else None


class _ShapeChanged:
    """``_patched``'s answer when the GPU width or the model list changes."""


_SHAPE_CHANGED = _ShapeChanged()


def _patched(
    old: NodeMatrix, nodes: tuple[Node, ...], fresh: np.ndarray, index: dict[str, int]
) -> NodeMatrix | _ShapeChanged | None:
    """``rebuilt`` when only some rows' node data changed, in place (no node added or removed,
    the same columns, GPU width and models): the old arrays copied (one memcpy each) and the
    changed rows patched, so the Python work is the changed nodes only."""
    col = old.resource_index
    capacity = old.capacity.copy()
    schedulable = old.schedulable.copy()
    model_code = old.model_code.copy()
    model_index = {m: i for i, m in enumerate(old.models)}
    for i in fresh.tolist():
        nd = nodes[i]
        code = model_index.get(nd.gpu_model)
        if code is None:
            return _SHAPE_CHANGED
        row = capacity[i]
        row[:] = 0
        for r, amount in nd.capacity.items():
            row[col[r]] = amount
        schedulable[i] = not nd.unschedulable
        model_code[i] = code
    width = old.gpu_free.shape[1]
    devices = capacity[:, GPU_COL] // MILLI_PER_GPU
    if max(1, int(devices.max())) != width:
        return _SHAPE_CHANGED
    if (np.bincount(model_code, minlength=len(old.models)) == 0).sum() > (
        np.bincount(old.model_code, minlength=len(old.models)) == 0
    ).sum():
        return _SHAPE_CHANGED  # a model no node has any more: the list shrinks
    new = assemble(nodes, index, old.resources, capacity, schedulable, old.models,
                              model_code)  # fmt: skip
    np.copyto(new.allocated, old.allocated)
    np.copyto(new.replicas, old.replicas)
    np.subtract(capacity, new.allocated, out=new.free)
    if (new.free[fresh] < 0).any():
        return None
    old_gpu = old.gpu_free[fresh]
    in_use = (old_gpu >= 0) & (old_gpu < MILLI_PER_GPU)
    target = new.gpu_free[fresh]
    if (in_use & (target < 0)).any():
        return None  # a device in use is gone
    np.copyto(new.gpu_free, old.gpu_free)
    new.gpu_free[fresh] = np.where((target >= 0) & (old_gpu >= 0), old_gpu, target)
    return new


def _columns(
    old: NodeMatrix, nodes: tuple[Node, ...], old_row: np.ndarray, fresh: np.ndarray
) -> tuple[str, ...]:
    """The new matrix's columns: the old ones, unless a changed node lists a name the old
    matrix lacks, or a node that is gone or changed listed a name beyond the reserved ones
    (it may have been the last to list it): then scanned from every node."""
    known = old.resource_index
    if any(r not in known for i in fresh.tolist() for r in nodes[i].capacity):
        return resource_columns(nodes)
    if len(old.resources) > len(RESERVED):
        continued = np.zeros(len(old), dtype=np.bool_)
        continued[old_row[old_row >= 0]] = True
        continued[old_row[fresh][old_row[fresh] >= 0]] = False  # changed: old data is gone
        reserved = set(RESERVED)
        for o in np.flatnonzero(~continued).tolist():
            if not reserved.issuperset(old.nodes[o].capacity):
                return resource_columns(nodes)
    return old.resources


def _gather(
    out: np.ndarray,
    rows: np.ndarray,
    source: np.ndarray,
    src: np.ndarray,
    old_cols: np.ndarray,
    same_columns: bool,
) -> None:
    """``out[rows] = source[src]``, its columns moved to where they are now (dropped columns
    are left out: the caller checks they held nothing)."""
    if same_columns:
        out[rows] = source[src]
        return
    keep = old_cols >= 0
    block = np.zeros((src.shape[0], out.shape[1]), dtype=out.dtype)
    block[:, old_cols[keep]] = source[src][:, keep]
    out[rows] = block


def _carry(
    old: NodeMatrix,
    new: NodeMatrix,
    old_row: np.ndarray,
    old_cols: np.ndarray,
    same_columns: bool,
) -> bool:
    """Move what runs on each continued node into ``new``; False when it no longer fits."""
    rows = np.flatnonzero(old_row >= 0)
    src = old_row[rows]
    held = old.allocated[src]
    if not same_columns and (held[:, old_cols < 0] != 0).any():
        return False  # a dropped column still held: cannot happen for valid data, but say so
    _gather(new.allocated, rows, old.allocated, src, old_cols, same_columns)
    np.subtract(new.capacity, new.allocated, out=new.free)
    if (new.free < 0).any():
        return False
    old_gpu = old.gpu_free[src]
    in_use = (old_gpu >= 0) & (old_gpu < MILLI_PER_GPU)
    devices = new.gpu_devices[rows]
    if (in_use & (np.arange(old_gpu.shape[1])[None, :] >= devices[:, None])).any():
        return False  # a device in use is gone
    w = min(old_gpu.shape[1], new.gpu_free.shape[1])
    target = new.gpu_free[rows, :w]
    taken = old_gpu[:, :w]
    new.gpu_free[rows, :w] = np.where((target >= 0) & (taken >= 0), taken, target)
    new.replicas[rows] = old.replicas[src]
    return True
