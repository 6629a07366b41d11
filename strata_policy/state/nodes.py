"""The dense node state: the node × resource matrix and the per-device GPU free milli.

``NodeMatrix`` is what the placement kernels read. Rows are nodes in snapshot order (the
tie-break order), columns are resources: ``cpu``, ``memory``, ``gpu`` first, then every other
resource any node lists, sorted. A node that does not list a resource has 0 of it. A matrix is
made from a snapshot's nodes by ``state.matrix_build`` (``matrix_from_nodes``, ``assemble``).

The immutable part (nodes, index maps, capacity, reciprocals, model codes, the ``lineage``) is
shared between copies; the mutable part (``allocated``, ``free``, ``gpu_free``, per-node
versions and replica counts) is copied, so a ``copy()`` costs one memcpy of the state and
nothing else. ``free = capacity - allocated`` is kept in step by ``allocate``/``deallocate`` so
that kernels read one matrix.

State only, no placement caches (DESIGN §5). What placement derives from a matrix lives in
``placement.index``, which the matrix carries without knowing its types: per matrix in
``placement_index`` (a ``MatrixIndex``: ``copy()`` asks it for the copy's), and per lineage in
``lineage`` (one ``Lineage`` per ``matrix_build.assemble``, shared by every copy, so that a copy
taken before any placement still shares what either builds later). For those caches the matrix
keeps stamps: every change bumps the node's entry in ``version`` (per-node caches compare stamps
to find stale rows) and is appended to the ``journal`` (node indices, in order;
``journal_since``), which summaries replay from the position they last saw. ``epoch`` names one
journal: it changes when the journal is cleared (it is bounded) and in a copy, which starts with
an empty journal.

GPU accounting: ``gpu_free[n, d]`` is the free milli of device ``d`` (0..1000), -1 where node
``n`` has fewer than ``d + 1`` devices. A share (< 1000) takes milli from one device; ``k × 1000``
takes ``k`` whole, fully free devices. Column ``gpu`` of ``allocated`` is always the sum over
existing devices of ``1000 - gpu_free``.

``replicas[n]`` counts the replicas allocated on node ``n`` (a replica may request nothing, so
``allocated`` alone cannot say whether a node runs any): what removing a node must find at 0.

Many replicas at once (``allocate_rows``, ``deallocate_rows``): a batch commit or a snapshot
build allocates thousands of replicas, and ``allocate`` costs a fit check and a few numpy
scalar writes each. Given as arrays (``ReplicaRows``: node, request row, devices per replica),
the whole set is checked and applied in a handful of vectorised steps, with the very result of
``allocate`` one by one in the rows' order: the same ``allocated``/``free``/``gpu_free`` and
replica counts, each node's ``version`` bumped once per replica on it, and the journal holding
the replicas' nodes in order (``record_changes``). Why the sums suffice: amounts are never
negative, so every prefix of the replicas asks a node (or a device) for at most what all of
them ask; the replicas fit one by one in their order exactly when, per node and column, the sum
of their requests is within ``free``, and per device the sum of the milli they take is within
its free milli. A whole device (``k × 1000``) takes 1000 milli, which fits a device only when it
is fully free and nothing else on it adds up, as ``replica_fit_error`` demands one at a time.
Devices that do not exist, or a replica naming a different number of devices than its GPU
request needs, are refused too.

Not thread-safe for writers: the cluster store serialises ``allocate``/``deallocate`` with
readers. Concurrent readers are fine (the index guards its own refreshes).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from strata_policy.model.objects import Node
from strata_policy.model.resources import GPU, MILLI_PER_GPU, Resources

CPU_COL = 0
MEMORY_COL = 1
GPU_COL = 2

EPOCHS = itertools.count(1)  # every journal's epoch, one count per process


class MatrixIndex(Protocol):
    """What a reader derives from one matrix's state and keeps on it (``placement.index.
    PlacementIndex``): ``NodeMatrix.copy`` asks it for the copy's (what it may share or must
    copy is its business, not the matrix's)."""

    def for_copy(self, original: NodeMatrix, copy: NodeMatrix) -> MatrixIndex:
        """The index of ``copy``, just made by ``original.copy()`` (``original`` is this
        index's matrix)."""
        ...


class Lineage:
    """Shared by a matrix and every copy of it, made anew by ``matrix_build.assemble`` (so by
    every snapshot push and node change): where a reader keeps what it derives from the
    immutable node data alone (``placement.index`` keeps its ``LineageCaches`` in ``caches``).
    The matrix never reads it."""

    __slots__ = ("caches",)

    def __init__(self) -> None:
        self.caches: object = None


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


class NodeMatrix:
    """Nodes × resources as int64 arrays, with per-device GPU free milli (see module docs)."""

    __slots__ = (
        "allocated",
        "capacity",
        "epoch",
        "free",
        "gpu_devices",
        "gpu_free",
        "index",
        "inv_capacity",
        "inv_max_capacity",
        "journal",
        "journal_len",
        "lineage",
        "model_code",
        "models",
        "nodes",
        "placement_index",
        "replicas",
        "resource_index",
        "resources",
        "schedulable",
        "version",
    )

    nodes: Sequence[Node]
    """A tuple, or the pushed snapshot's ``NodeColumns`` (each node made when read)."""
    index: dict[str, int]
    resources: tuple[str, ...]
    resource_index: dict[str, int]
    capacity: np.ndarray
    allocated: np.ndarray
    free: np.ndarray
    gpu_free: np.ndarray
    gpu_devices: np.ndarray
    schedulable: np.ndarray
    inv_capacity: np.ndarray
    inv_max_capacity: np.ndarray
    model_code: np.ndarray
    models: tuple[str, ...]
    version: np.ndarray
    replicas: np.ndarray
    journal: np.ndarray
    """The changed nodes, in order, in ``journal[:journal_len]`` (read it, never write it)."""
    journal_len: int
    epoch: int
    lineage: Lineage
    placement_index: MatrixIndex | None

    def copy(self) -> NodeMatrix:
        """A copy whose mutable arrays are its own, with an empty journal of its own epoch; the
        rest (and the ``lineage``) is shared, and the index gives the copy its own."""
        other = NodeMatrix.__new__(NodeMatrix)
        for name in NodeMatrix.__slots__:
            setattr(other, name, getattr(self, name))
        other.allocated = self.allocated.copy()
        other.free = self.free.copy()
        other.gpu_free = self.gpu_free.copy()
        other.version = self.version.copy()
        other.replicas = self.replicas.copy()
        other.journal = np.empty_like(self.journal)
        other.journal_len = 0
        other.epoch = next(EPOCHS)
        index = self.placement_index
        other.placement_index = None if index is None else index.for_copy(self, other)
        return other

    def __len__(self) -> int:
        return len(self.nodes)

    def journal_since(self, position: int) -> np.ndarray:
        """The nodes changed since the journal held ``position`` entries (in this ``epoch``)."""
        return self.journal[position : self.journal_len]

    # -- checks and mutations ---------------------------------------------------------------

    def replica_fit_error(
        self, node_index: int, request: Resources, gpu_devices: tuple[int, ...]
    ) -> str | None:
        """None if one replica of ``request`` fits node ``node_index`` now on exactly those
        devices; otherwise a short description of the first problem found.

        Devices are checked for shape first (they exist, are distinct, as many as the request
        names), then every resource in column order, then the free milli on each device.
        Schedulability, labels and model are not checked: a running workload may sit on a
        cordoned node.
        """
        gpu = int(request.get(GPU, 0))
        devices = self.gpu_devices[node_index]
        for d in gpu_devices:
            if not 0 <= d < devices:
                return f"gpu device {d} does not exist"
        if len(set(gpu_devices)) != len(gpu_devices):
            return f"gpu devices {list(gpu_devices)} are not distinct"
        wanted = 0 if gpu == 0 else 1 if gpu < MILLI_PER_GPU else gpu // MILLI_PER_GPU
        if len(gpu_devices) != wanted:
            return f"gpu request {gpu} needs {wanted} device(s), got {len(gpu_devices)}"
        free = self.free[node_index]
        missing: list[str] = []
        for r, amount in request.items():
            col = self.resource_index.get(r)
            if col is None:
                if amount > 0:
                    missing.append(r)
            elif free[col] < amount:
                return f"insufficient {r}: {int(free[col])} free, {amount} requested"
        if missing:
            return f"insufficient {min(missing)}: 0 free, {request[min(missing)]} requested"
        per_device = gpu if gpu < MILLI_PER_GPU else MILLI_PER_GPU
        for d in gpu_devices:
            left = int(self.gpu_free[node_index, d])
            if left < per_device:
                return f"gpu device {d} has {left} free, {per_device} requested"
        return None

    def allocate(self, node_index: int, request: Resources, gpu_devices: tuple[int, ...]) -> None:
        """Take one replica of ``request`` on node ``node_index`` and those GPU devices.

        Raises ``ValueError`` when it does not fit (``replica_fit_error``): committing an
        over-allocation is a bug in the caller, never a state to keep.
        """
        problem = self.replica_fit_error(node_index, request, gpu_devices)
        if problem is not None:
            raise ValueError(f"cannot allocate on {self.nodes[node_index].id!r}: {problem}")
        self._apply(node_index, request, gpu_devices, 1)

    def deallocate(self, node_index: int, request: Resources, gpu_devices: tuple[int, ...]) -> None:
        """The exact inverse of ``allocate``; raises ``ValueError`` if it was not allocated."""
        gpu = int(request.get(GPU, 0))
        per_device = gpu if gpu < MILLI_PER_GPU else MILLI_PER_GPU
        for d in gpu_devices:
            if not 0 <= d < self.gpu_devices[node_index] or (
                self.gpu_free[node_index, d] + per_device > MILLI_PER_GPU
            ):
                raise ValueError(f"gpu device {d} does not hold {per_device} milli to free")
        for r, amount in request.items():
            col = self.resource_index.get(r)
            if amount and (col is None or self.allocated[node_index, col] < amount):
                raise ValueError(f"node {self.nodes[node_index].id!r} does not hold {amount} {r}")
        self._apply(node_index, request, gpu_devices, -1)

    def _apply(
        self, node_index: int, request: Resources, gpu_devices: tuple[int, ...], sign: int
    ) -> None:
        allocated = self.allocated[node_index]
        free = self.free[node_index]
        for r, amount in request.items():
            if amount:
                col = self.resource_index[r]
                allocated[col] += sign * amount
                free[col] -= sign * amount
        gpu = int(request.get(GPU, 0))
        per_device = gpu if gpu < MILLI_PER_GPU else MILLI_PER_GPU
        for d in gpu_devices:
            self.gpu_free[node_index, d] -= sign * per_device
        self.replicas[node_index] += sign
        self.version[node_index] += 1
        at = self.journal_len
        self.journal[at] = node_index
        if at + 1 < self.journal.shape[0]:
            self.journal_len = at + 1
        else:  # full: start a new journal (readers rebuild what they derived from the old one)
            self.journal_len = 0
            self.epoch = next(EPOCHS)

    # -- totals -----------------------------------------------------------------------------

    def total_capacity(self, schedulable_only: bool = True) -> dict[str, int]:
        """Capacity summed over (schedulable) nodes, per resource column."""
        rows = self.capacity[self.schedulable] if schedulable_only else self.capacity
        sums = rows.sum(axis=0)
        return {r: int(sums[i]) for i, r in enumerate(self.resources)}

    def total_allocated(self) -> dict[str, int]:
        """Allocated amounts summed over all nodes, per resource column."""
        sums = self.allocated.sum(axis=0)
        return {r: int(sums[i]) for i, r in enumerate(self.resources)}

    def free_of(self, node_index: int) -> Mapping[str, int]:
        """What node ``node_index`` has free, per resource (for messages and tests)."""
        return {r: int(self.free[node_index, i]) for i, r in enumerate(self.resources)}

    # -- many replicas at once (the module docstring) ------------------------------------

    def allocate_rows(self, rows: ReplicaRows) -> bool:
        """Allocate every replica of ``rows`` if all of them fit (see the module docstring), and
        return True; otherwise change nothing and return False (the caller allocates one by one
        to say which replica fails)."""
        if len(rows) == 0:
            return True
        sums = self._sums(rows)
        if sums is None:
            return False
        added, used = sums
        if (added > self.free).any() or (used > np.maximum(self.gpu_free, 0)).any():
            return False
        self.allocated += added
        self.free -= added
        self.gpu_free -= used
        np.add.at(self.replicas, rows.node, 1)
        self.record_changes(rows.node)
        return True

    def deallocate_rows(self, rows: ReplicaRows) -> bool:
        """The exact inverse of ``allocate_rows``: ``deallocate`` of each replica of ``rows``, last
        first (the same arrays, versions and journal), if each held what it frees; otherwise
        change nothing and return False. By the module's argument in reverse: the replicas free
        their amounts one by one exactly when the sums fit in what is allocated, and per device
        in what is taken (1000 minus the free milli of a device that exists)."""
        if len(rows) == 0:
            return True
        sums = self._sums(rows)
        if sums is None:
            return False
        freed, given = sums
        taken = np.where(self.gpu_free >= 0, MILLI_PER_GPU - self.gpu_free, 0)
        if (freed > self.allocated).any() or (given > taken).any():
            return False
        self.allocated -= freed
        self.free += freed
        self.gpu_free += given
        np.subtract.at(self.replicas, rows.node, 1)
        self.record_changes(rows.node[::-1])
        return True

    def record_changes(self, nodes: np.ndarray) -> None:
        """Note that one replica changed on each of ``nodes``, in order, as ``_apply`` does one
        at a time: each node's version is bumped once per entry and the entries are journaled
        (the one that fills the journal's last slot starts a new journal and epoch)."""
        np.add.at(self.version, nodes, 1)
        journal = self.journal
        size = journal.shape[0]
        at = self.journal_len
        start, total = 0, nodes.shape[0]
        while start < total:
            take = min(size - at, total - start)
            journal[at : at + take] = nodes[start : start + take]
            start += take
            if at + take < size:
                at += take
            else:
                at = 0
                self.epoch = next(EPOCHS)
        self.journal_len = at

    def _sums(self, rows: ReplicaRows) -> tuple[np.ndarray, np.ndarray] | None:
        """Per node and column the rows' amounts, per node and device the milli they take; None
        when the rows are malformed (a node or device that does not exist, a negative amount, a
        replica naming another number of devices than its GPU request needs)."""
        node, req, devices = rows.node, rows.req, rows.devices
        count = len(rows)
        n_nodes, width = self.allocated.shape
        depth = self.gpu_free.shape[1]
        amounts = np.zeros(n_nodes * width, dtype=np.int64)
        milli = np.zeros(n_nodes * depth, dtype=np.int64)
        if node.min() < 0 or node.max() >= n_nodes or (req < 0).any():
            return None
        np.add.at(amounts, (node[:, None] * width + np.arange(width)).ravel(), req.ravel())
        gpu = req[:, GPU_COL]
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
            if (device >= self.gpu_devices[owner]).any():
                return None
            np.add.at(milli, owner * depth + device, np.minimum(gpu[owners], MILLI_PER_GPU))
        return amounts.reshape(n_nodes, width), milli.reshape(n_nodes, depth)
