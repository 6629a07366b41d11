"""A ``NodeMatrix`` made from a snapshot: its nodes' arrays, and its running workloads' replicas
as the rows ``NodeMatrix.allocate_rows`` takes.

``matrix_from_nodes`` reads the nodes (or a push's ``NodeColumns``, whose arrays are made
already) into the matrix's columns and ``assemble`` derives the rest (device counts, per-device
free milli, reciprocals) once; ``node_changes.rebuilt`` assembles a matrix it patched from an
old one the same way. ``running_rows`` turns running workloads into replica rows (a pushed
snapshot's columns have their own, ``columnar_build.replica_rows``), and ``allocate_running``
allocates them at once, as ``allocate`` one by one would. None of this is on a decision's path:
a matrix is made per push or node change, and a commit hands its kernel's rows to the matrix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from strata_policy.model.objects import Node, RunningWorkload
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU, RESERVED
from strata_policy.state.node_columns import NodeColumns
from strata_policy.state.nodes import EPOCHS, GPU_COL, Lineage, NodeMatrix, ReplicaRows


def resource_columns(nodes: Sequence[Node]) -> tuple[str, ...]:
    """The matrix's columns for ``nodes``: ``cpu``, ``memory``, ``gpu``, then every other
    resource any node lists (even at 0), sorted."""
    return columns_of({r for nd in nodes for r in nd.capacity})


def columns_of(listed: set[str]) -> tuple[str, ...]:
    """The matrix's columns for nodes listing the resources ``listed`` (``resource_columns``)."""
    return (CPU, MEMORY, GPU, *sorted(listed - set(RESERVED)))


def matrix_from_nodes(nodes: Sequence[Node]) -> NodeMatrix:
    """The state of ``nodes`` with nothing allocated (capacities assumed validated)."""
    if type(nodes) is NodeColumns:  # the same arrays, already made (copied: shared)
        return assemble(
            nodes,
            dict(nodes.node_index),
            columns_of(set(nodes.listed)),
            nodes.capacity.copy(),
            nodes.schedulable.copy(),
            nodes.models,
            nodes.model_code.copy(),
        )
    nodes = tuple(nodes)
    names = resource_columns(nodes)
    col = {r: i for i, r in enumerate(names)}
    capacity = np.zeros((len(nodes), len(names)), dtype=np.int64)
    for n, nd in enumerate(nodes):
        row = capacity[n]
        for r, amount in nd.capacity.items():
            row[col[r]] = amount
    models = tuple(sorted({nd.gpu_model for nd in nodes} | {""}))
    model_index = {m: i for i, m in enumerate(models)}
    model_code = np.array([model_index[nd.gpu_model] for nd in nodes], dtype=np.int64)
    schedulable = np.array([not nd.unschedulable for nd in nodes], dtype=np.bool_)
    index = {nd.id: n for n, nd in enumerate(nodes)}
    return assemble(nodes, index, names, capacity, schedulable, models, model_code)


def assemble(
    nodes: Sequence[Node],
    index: dict[str, int],
    names: tuple[str, ...],
    capacity: np.ndarray,
    schedulable: np.ndarray,
    models: tuple[str, ...],
    model_code: np.ndarray,
) -> NodeMatrix:
    """A matrix with nothing allocated from its node data already in arrays: what
    ``matrix_from_nodes`` reads off the nodes, or what ``node_changes.rebuilt`` carries over from
    a matrix and patches where nodes changed. The derived arrays are computed here, once,
    for both."""
    n_nodes = len(nodes)
    devices = capacity[:, GPU_COL] // MILLI_PER_GPU
    width = max(1, int(devices.max()) if n_nodes else 1)
    gpu_free = np.where(np.arange(width)[None, :] < devices[:, None], MILLI_PER_GPU, -1)
    self = NodeMatrix.__new__(NodeMatrix)
    self.nodes = nodes
    self.index = index
    self.resources = names
    self.resource_index = {r: i for i, r in enumerate(names)}
    self.capacity = capacity
    self.allocated = np.zeros_like(capacity)
    self.free = capacity.copy()
    self.gpu_free = np.ascontiguousarray(gpu_free, dtype=np.int64)
    self.gpu_devices = devices.astype(np.int64)
    self.schedulable = schedulable
    with np.errstate(divide="ignore"):
        self.inv_capacity = np.where(capacity > 0, 1.0 / capacity, 0.0)
    top = capacity.max(axis=0) if n_nodes else np.zeros(len(names), dtype=np.int64)
    with np.errstate(divide="ignore"):
        self.inv_max_capacity = np.where(top > 0, 1.0 / top, 0.0)
    self.model_code = model_code.reshape(n_nodes)
    self.models = models
    self.replicas = np.zeros(n_nodes, dtype=np.int64)
    self.version = np.zeros(n_nodes, dtype=np.int64)
    self.journal = np.empty(4 * n_nodes + 64, dtype=np.int64)
    self.journal_len = 0
    self.epoch = next(EPOCHS)
    self.lineage = Lineage()
    self.placement_index = None
    return self


def running_rows(matrix: NodeMatrix, workloads: Sequence[RunningWorkload]) -> ReplicaRows | None:
    """The placed replicas of ``workloads`` as rows (workload order, then replica order);
    ``None`` when a request names a resource no node has (it cannot fit anywhere) or a
    placement names a negative device (one that does not exist, not padding).

    A snapshot of a million workloads has a few hundred distinct request dicts (the service
    shares one per distinct request): each becomes a row of a small table once, per identity,
    and a replica costs its node's index, the table row's number and its first device.
    """
    col = matrix.resource_index
    width = len(matrix.resources)
    index = matrix.index
    table: list[list[int]] = []
    row_of: dict[int, int] = {}  # id(request) -> table row; the dicts live through the call
    nodes: list[int] = []
    rows: list[int] = []
    first: list[int] = []  # each replica's first device, -1 for none
    more: list[tuple[int, tuple[int, ...]]] = []  # (replica, devices) of those with several
    add_node, add_row, add_first = nodes.append, rows.append, first.append
    for rw in workloads:
        placements = rw.placements
        if not placements:
            continue
        request = rw.workload.request
        row = row_of.get(id(request))
        if row is None:
            vector = [0] * width
            for r, amount in request.items():
                if amount:
                    c = col.get(r)
                    if c is None:
                        return None
                    vector[c] = amount
            row = row_of[id(request)] = len(table)
            table.append(vector)
        for p in placements:
            d = p.gpu_devices
            if not d:
                add_first(-1)
            elif len(d) == 1 and d[0] >= 0:
                add_first(d[0])
            elif min(d) < 0:
                return None
            else:
                add_first(d[0])
                more.append((len(nodes), d))
            add_node(index[p.node_id])
            add_row(row)
    widest = max((len(d) for _, d in more), default=1)
    dev = np.full((len(nodes), widest), -1, dtype=np.int64)
    dev[:, 0] = first
    for i, d in more:
        dev[i, : len(d)] = d
    req = np.asarray(table, dtype=np.int64).reshape(len(table), width)[
        np.asarray(rows, dtype=np.int64)
    ]
    return ReplicaRows(np.asarray(nodes, dtype=np.int64), req, dev)


def allocate_running(matrix: NodeMatrix, workloads: Sequence[RunningWorkload]) -> bool:
    """Allocate every placed replica of ``workloads`` (in order) at once, if all of them fit.

    The vectorised path of building a pushed snapshot and of committing running workloads
    without their rows (``NodeMatrix.allocate_rows``): the same state as ``allocate`` one by
    one. Returns False and changes nothing when anything does not fit or is malformed; the
    caller then allocates one by one to say precisely which replica fails.
    """
    rows = running_rows(matrix, workloads)
    return rows is not None and matrix.allocate_rows(rows)
