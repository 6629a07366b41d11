"""Allocating many replicas on a ``NodeMatrix`` at once, exactly as one by one.

A batch commit or a snapshot build allocates thousands of replicas; ``NodeMatrix.allocate``
costs a fit check and a few numpy scalar writes each. Here the replicas are arrays
(``ReplicaRows``: node, request row, devices per replica) and the whole set is checked and
applied in a handful of vectorised steps.

**Why the sums suffice.** Amounts are never negative, so every prefix of the replicas asks a
node (or a device) for at most what all of them ask: the replicas fit one by one in their order
exactly when, per node and column, the sum of their requests is within ``free``, and per device
the sum of the milli they take is within its free milli. A whole device (``k × 1000``) takes
1000 milli, which fits a device only when it is fully free and nothing else on it adds up, as
``NodeMatrix.replica_fit_error`` demands one at a time. Devices that do not exist, or a replica
naming a different number of devices than its GPU request needs, are refused too.

The result is the very state of ``allocate`` one by one in the rows' order: the same
``allocated``/``free``/``gpu_free`` and replica counts, each node's ``version`` bumped once per
replica on it, and the journal holding the replicas' nodes in order
(``NodeMatrix.record_changes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from strata_policy.model.objects import RunningWorkload
from strata_policy.model.resources import MILLI_PER_GPU

if TYPE_CHECKING:
    from strata_policy.state.nodes import NodeMatrix

_GPU_COL = 2  # ``nodes.GPU_COL`` (not imported: nodes imports this module)


@dataclass(frozen=True, slots=True)
class ReplicaRows:
    """Replicas in the order they are allocated: replica ``i`` takes ``req[i]`` (a request row
    over the matrix's columns) on node ``node[i]`` and the GPU devices ``devices[i]`` (-1
    padded; any width)."""

    node: np.ndarray
    req: np.ndarray
    devices: np.ndarray

    def __len__(self) -> int:
        return int(self.node.shape[0])


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


def allocate_rows(matrix: NodeMatrix, rows: ReplicaRows) -> bool:
    """Allocate every replica of ``rows`` if all of them fit (see the module docstring), and
    return True; otherwise change nothing and return False (the caller allocates one by one
    to say which replica fails)."""
    if len(rows) == 0:
        return True
    sums = _sums(matrix, rows)
    if sums is None:
        return False
    added, used = sums
    if (added > matrix.free).any() or (used > np.maximum(matrix.gpu_free, 0)).any():
        return False
    matrix.allocated += added
    matrix.free -= added
    matrix.gpu_free -= used
    np.add.at(matrix.replicas, rows.node, 1)
    matrix.record_changes(rows.node)
    return True


def deallocate_rows(matrix: NodeMatrix, rows: ReplicaRows) -> bool:
    """The exact inverse of ``allocate_rows``: ``deallocate`` of each replica of ``rows``, last
    first (the same arrays, versions and journal), if each held what it frees; otherwise
    change nothing and return False. By the module's argument in reverse: the replicas free
    their amounts one by one exactly when the sums fit in what is allocated, and per device
    in what is taken (1000 minus the free milli of a device that exists)."""
    if len(rows) == 0:
        return True
    sums = _sums(matrix, rows)
    if sums is None:
        return False
    freed, given = sums
    taken = np.where(matrix.gpu_free >= 0, MILLI_PER_GPU - matrix.gpu_free, 0)
    if (freed > matrix.allocated).any() or (given > taken).any():
        return False
    matrix.allocated -= freed
    matrix.free += freed
    matrix.gpu_free += given
    np.subtract.at(matrix.replicas, rows.node, 1)
    matrix.record_changes(rows.node[::-1])
    return True


def _sums(matrix: NodeMatrix, rows: ReplicaRows) -> tuple[np.ndarray, np.ndarray] | None:
    """Per node and column the rows' amounts, per node and device the milli they take; None
    when the rows are malformed (a node or device that does not exist, a negative amount, a
    replica naming another number of devices than its GPU request needs)."""
    node, req, devices = rows.node, rows.req, rows.devices
    count = len(rows)
    n_nodes, width = matrix.allocated.shape
    depth = matrix.gpu_free.shape[1]
    amounts = np.zeros(n_nodes * width, dtype=np.int64)
    milli = np.zeros(n_nodes * depth, dtype=np.int64)
    if node.min() < 0 or node.max() >= n_nodes or (req < 0).any():
        return None
    np.add.at(amounts, (node[:, None] * width + np.arange(width)).ravel(), req.ravel())
    gpu = req[:, _GPU_COL]
    wanted = np.where(gpu >= MILLI_PER_GPU, gpu // MILLI_PER_GPU, (gpu > 0).astype(np.int64))
    if devices.shape[1] > 1 and (devices[:, 1:] >= 0).any():
        owners, slots = np.nonzero(devices >= 0)  # several devices per replica
    else:
        owners = np.flatnonzero(devices[:, 0] >= 0) if devices.shape[1] else wanted[:0]
        slots = np.zeros_like(owners)
    if not np.array_equal(np.bincount(owners, minlength=count), wanted):
        return None
    if owners.size:
        device = devices[owners, slots]
        owner = node[owners]
        if (device >= matrix.gpu_devices[owner]).any():
            return None
        np.add.at(milli, owner * depth + device, np.minimum(gpu[owners], MILLI_PER_GPU))
    return amounts.reshape(n_nodes, width), milli.reshape(n_nodes, depth)
