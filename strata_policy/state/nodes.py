"""The dense node state: the node × resource matrix and the per-device GPU free milli.

``NodeMatrix`` is what the placement kernels read. Rows are nodes in snapshot order (the
tie-break order), columns are resources: ``cpu``, ``memory``, ``gpu`` first, then every other
resource any node lists, sorted. A node that does not list a resource has 0 of it.

The immutable part (nodes, index maps, capacity, reciprocals, model codes, label codes, cached
selector masks) is shared between copies; the mutable part (``allocated``, ``free``,
``gpu_free``, per-node versions and replica counts, the FGD fragmentation cache) is copied, so a
``copy()`` costs one memcpy of the state and nothing else. ``free = capacity - allocated`` is
kept in step by
``allocate``/``deallocate`` so that kernels read one matrix. Every change bumps the node's entry
in ``version``; derived per-node caches (the FGD statistics) compare stamps to find stale rows.
Every change is also appended to the journal (node indices, in order; ``journal_since``): the
block summaries of ``block_index`` and the FGD score trees kept in ``trees`` replay it from the
position they last saw. ``epoch`` names one journal: it changes when the journal is cleared (it
is bounded) and in a copy, which starts with an empty journal and no trees (so copies stay
cheap) but keeps its block summaries (a copy of small per-block arrays).

GPU accounting: ``gpu_free[n, d]`` is the free milli of device ``d`` (0..1000), -1 where node
``n`` has fewer than ``d + 1`` devices. A share (< 1000) takes milli from one device; ``k × 1000``
takes ``k`` whole, fully free devices. Column ``gpu`` of ``allocated`` is always the sum over
existing devices of ``1000 - gpu_free``.

``replicas[n]`` counts the replicas allocated on node ``n`` (a replica may request nothing, so
``allocated`` alone cannot say whether a node runs any): what removing a node must find at 0.

Not thread-safe for writers: the cluster store serialises ``allocate``/``deallocate`` with
readers. Concurrent readers are fine (cache refreshes write the same values).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from strata_policy.kernels import search
from strata_policy.kernels.search import BlockIndex, BlockLayout, BlockQuery
from strata_policy.model.objects import Node, RunningWorkload
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU, RESERVED, Resources
from strata_policy.state import allocation
from strata_policy.state.allocation import ReplicaRows

CPU_COL = 0
MEMORY_COL = 1
GPU_COL = 2

_EPOCHS = itertools.count(1)
_NO_ROWS = np.zeros(0, dtype=np.int64)
_MAX_LABEL_KEYS = 64
_MAX_SELECTIONS = 128


@dataclass(frozen=True, slots=True)
class LabelSelection:
    """The nodes with one label value (``NodeMatrix.label_selection``): their indices, how many
    in each block, a bool per node, and per block and per superblock whether it holds any."""

    nodes: np.ndarray
    block_hits: np.ndarray
    selected: np.ndarray
    block_any: np.ndarray
    super_any: np.ndarray


def resource_columns(nodes: Sequence[Node]) -> tuple[str, ...]:
    """The matrix's columns for ``nodes``: ``cpu``, ``memory``, ``gpu``, then every other
    resource any node lists (even at 0), sorted."""
    extra = sorted({r for nd in nodes for r in nd.capacity} - set(RESERVED))
    return (CPU, MEMORY, GPU, *extra)


class NodeMatrix:
    """Nodes × resources as int64 arrays, with per-device GPU free milli (see module docs)."""

    __slots__ = (
        "_blocks",
        "_blocks_at",
        "_journal",
        "_lock",
        "_shared",
        "allocated",
        "capacity",
        "derived",
        "epoch",
        "free",
        "gpu_devices",
        "gpu_free",
        "index",
        "inv_capacity",
        "inv_max_capacity",
        "journal_len",
        "model_code",
        "models",
        "nodes",
        "replicas",
        "resource_index",
        "resources",
        "schedulable",
        "trees",
        "version",
    )

    nodes: tuple[Node, ...]
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
    derived: dict[Any, Any]
    journal_len: int
    epoch: int
    trees: dict[Any, Any]
    _shared: dict[Any, Any]
    _journal: np.ndarray
    _blocks: BlockIndex | None
    _blocks_at: tuple[int, int]
    _lock: threading.Lock

    @classmethod
    def from_nodes(cls, nodes: Sequence[Node]) -> NodeMatrix:
        """The state of ``nodes`` with nothing allocated (capacities assumed validated)."""
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
        return cls.assemble(nodes, index, names, capacity, schedulable, models, model_code)

    @classmethod
    def assemble(
        cls,
        nodes: tuple[Node, ...],
        index: dict[str, int],
        names: tuple[str, ...],
        capacity: np.ndarray,
        schedulable: np.ndarray,
        models: tuple[str, ...],
        model_code: np.ndarray,
    ) -> NodeMatrix:
        """A matrix with nothing allocated from its node data already in arrays: what
        ``from_nodes`` reads off the nodes, or what ``node_changes.rebuilt`` carries over from
        a matrix and patches where nodes changed. The derived arrays are computed here, once,
        for both."""
        n_nodes = len(nodes)
        devices = capacity[:, GPU_COL] // MILLI_PER_GPU
        width = max(1, int(devices.max()) if n_nodes else 1)
        gpu_free = np.where(np.arange(width)[None, :] < devices[:, None], MILLI_PER_GPU, -1)
        self = cls.__new__(cls)
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
        self.derived = {}
        self._journal = np.empty(4 * n_nodes + 64, dtype=np.int64)
        self.journal_len = 0
        self.epoch = next(_EPOCHS)
        self.trees = {}
        self._shared = {}
        self._blocks = None
        self._blocks_at = (0, 0)
        self._lock = threading.Lock()
        return self

    def copy(self) -> NodeMatrix:
        """A copy whose mutable arrays (and derived caches) are its own; the rest is shared."""
        other = NodeMatrix.__new__(NodeMatrix)
        for name in NodeMatrix.__slots__:
            setattr(other, name, getattr(self, name))
        other.allocated = self.allocated.copy()
        other.free = self.free.copy()
        other.gpu_free = self.gpu_free.copy()
        other.version = self.version.copy()
        other.replicas = self.replicas.copy()
        other.derived = {key: value.copy() for key, value in self.derived.items()}
        other._journal = np.empty_like(self._journal)
        other.journal_len = 0
        other.epoch = next(_EPOCHS)
        other.trees = {}
        other._lock = threading.Lock()
        other._blocks = None
        other._blocks_at = (0, 0)
        if self._blocks is not None:
            other._blocks = self.block_index().with_state(other.free, other.gpu_free)
            other._blocks_at = (other.epoch, 0)
        return other

    def __len__(self) -> int:
        return len(self.nodes)

    # -- immutable lookups shared by copies -------------------------------------------------

    def label_codes(self, key: str) -> tuple[np.ndarray, dict[str, int]]:
        """Per node, a code for its value of label ``key`` (-1 when absent), and the code map.

        Built once per key (nodes are immutable) and shared by every copy of the matrix. Keys
        come from requests, so at most ``_MAX_LABEL_KEYS`` are kept (the cache is emptied when
        full): a client naming many keys costs time, not unbounded memory.
        """
        cache_key = ("label", key)
        found = self._shared.get(cache_key)
        if found is None:
            labels = [k for k in self._shared if isinstance(k, tuple) and k[:1] == ("label",)]
            if len(labels) >= _MAX_LABEL_KEYS:
                for k in labels:
                    del self._shared[k]
            values: dict[str, int] = {}
            codes = np.empty(len(self.nodes), dtype=np.int64)
            for n, nd in enumerate(self.nodes):
                value = nd.label(key)
                codes[n] = -1 if value is None else values.setdefault(value, len(values))
            found = (codes, values)
            self._shared[cache_key] = found
        return found

    def label_selection(self, key: str, value: str) -> LabelSelection:
        """The nodes whose label ``key`` is ``value``: their indices (ascending), how many in
        each block of ``block_layout``, a bool per node, and per block and superblock whether
        it holds any of them (do not write to the arrays).

        Built once per key and value from ``label_codes`` and shared by copies, so that a node
        selector naming the value costs nothing per node after that. At most
        ``_MAX_SELECTIONS`` are kept (emptied when full): values come from requests.
        """
        cache: dict[tuple[str, str], LabelSelection] = self.shared("label-values", dict)
        found = cache.get((key, value))
        if found is None:
            codes, values = self.label_codes(key)
            code = values.get(value)
            nodes = _NO_ROWS if code is None else np.flatnonzero(codes == code)
            selected = np.zeros(len(self.nodes), dtype=np.bool_)
            selected[nodes] = True
            layout = self.block_layout()
            hits = np.bincount(layout.block_of[nodes], minlength=layout.block_start.shape[0] - 1)
            block_any = hits > 0
            super_any = (
                np.logical_or.reduceat(block_any, layout.super_start[:-1])
                if block_any.size
                else np.zeros(0, dtype=np.bool_)
            )
            found = LabelSelection(nodes, hits.astype(np.int64), selected, block_any, super_any)
            if len(cache) >= _MAX_SELECTIONS:
                cache.clear()
            cache[(key, value)] = found
        return found

    def journal_since(self, position: int) -> np.ndarray:
        """The nodes changed since the journal held ``position`` entries (in this ``epoch``)."""
        return self._journal[position : self.journal_len]

    def block_index(self) -> BlockIndex:
        """The block summaries of the current state (``kernels.search``): built on first use
        (the layout, from the immutable node data, is shared by copies), then brought up to
        date from the journal, a block per changed node. Safe for concurrent readers."""
        idx = self._blocks
        if idx is not None and self._blocks_at == (self.epoch, self.journal_len):
            return idx
        with self._lock:
            return self._sync_blocks(None)

    def block_search(self, query: BlockQuery) -> tuple[int, float, int]:
        """``block_index().search(query)`` (node, score, devices as a bit set), bringing the
        summaries up to date in the same kernel call when the state moved since they last
        looked."""
        idx = self._blocks
        epoch, seen = self._blocks_at
        if idx is not None and epoch == self.epoch:
            now = self.journal_len
            if seen == now:
                return idx.search(query)
            with self._lock:  # the common case after a commit: refresh its block, then search
                if self._blocks_at == (epoch, seen):
                    found = idx.search(query, self._journal, seen, now - seen)
                    self._blocks_at = (epoch, now)
                    return found
        with self._lock:
            out: list[tuple[int, float, int]] = []
            self._sync_blocks(lambda idx, changed: out.append(idx.search(query, changed)))
            return out[0]

    def _sync_blocks(
        self, then: Callable[[BlockIndex, np.ndarray | None], None] | None
    ) -> BlockIndex:
        """Build or refresh the block summaries (under ``_lock``); ``then`` gets the index and
        the changed nodes (None: all) to refresh within its own kernel call instead."""
        idx = self._blocks
        epoch, seen = self._blocks_at
        changed: np.ndarray | None = _NO_ROWS
        if idx is None:
            idx = BlockIndex(layout=self.block_layout(), free=self.free, gpu_free=self.gpu_free,
                             capacity=self.capacity, inv_cap=self.inv_capacity,
                             inv_max_cap=self.inv_max_capacity)  # fmt: skip
        elif epoch != self.epoch:
            changed = None
        elif seen < self.journal_len:
            changed = self._journal[seen : self.journal_len]
        if then is not None:
            then(idx, changed)
        elif changed is None or changed.size:
            idx.refresh(changed)
        self._blocks = idx
        self._blocks_at = (self.epoch, self.journal_len)
        return idx

    def block_layout(self) -> BlockLayout:
        """Blocks of alike nodes (same schedulability, GPU model and capacity row), built once
        from the immutable node data and shared by copies."""
        found: BlockLayout | None = self._shared.get("block-layout")
        if found is None:
            groups = np.column_stack((~self.schedulable, self.model_code, self.capacity))
            found = BlockLayout.build(groups.astype(np.int64), self.capacity, self.inv_capacity,
                                      search.BLOCK_SIZE, search.SUPER_SIZE)  # fmt: skip
            self._shared["block-layout"] = found
        return found

    def block_statics(self) -> np.ndarray:
        """Per block of ``block_layout``, its nodes' schedulability (0/1), GPU model code and
        device count (alike within a block), as one contiguous int64 array: what a new static
        mask reads instead of every node (``BlockLayout.static_blocks``). Built once, shared."""
        found: np.ndarray | None = self._shared.get("block-statics")
        if found is None:
            layout = self.block_layout()
            firsts = layout.node_order[layout.block_start[:-1]]
            found = np.ascontiguousarray(
                np.column_stack(
                    (self.schedulable[firsts], self.model_code[firsts], self.gpu_devices[firsts])
                ),
                dtype=np.int64,
            )
            self._shared["block-statics"] = found
        return found

    def shared(self, key: object, build: Callable[[], Any]) -> Any:
        """A value computed from the immutable node data only, built once and shared by copies."""
        found = self._shared.get(key)
        if found is None:
            found = build()
            self._shared[key] = found
        return found

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
        self._journal[at] = node_index
        if at + 1 < self._journal.shape[0]:
            self.journal_len = at + 1
        else:  # full: start a new journal (readers rebuild what they derived from the old one)
            self.journal_len = 0
            self.epoch = next(_EPOCHS)

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

    # -- bulk -------------------------------------------------------------------------------

    def allocate_running(self, workloads: Sequence[RunningWorkload]) -> bool:
        """Allocate every placed replica of ``workloads`` (in order) at once, if all of them fit.

        The vectorised path of building a pushed snapshot and of a large commit
        (``allocation.allocate_rows``): the same state as ``allocate`` one by one. Returns False
        and changes nothing when anything does not fit or is malformed; the caller then
        allocates one by one to say precisely which replica fails.
        """
        rows = allocation.running_rows(self, workloads)
        return rows is not None and allocation.allocate_rows(self, rows)

    def allocate_rows(self, rows: ReplicaRows) -> bool:
        """``allocate_running`` for replicas given as arrays (``allocation.ReplicaRows``)."""
        return allocation.allocate_rows(self, rows)

    def deallocate_rows(self, rows: ReplicaRows) -> bool:
        """The exact inverse of ``allocate_rows`` (``allocation.deallocate_rows``)."""
        return allocation.deallocate_rows(self, rows)

    def record_changes(self, nodes: np.ndarray) -> None:
        """Note that one replica changed on each of ``nodes``, in order, as ``_apply`` does one
        at a time: each node's version is bumped once per entry and the entries are journaled
        (the one that fills the journal's last slot starts a new journal and epoch)."""
        np.add.at(self.version, nodes, 1)
        journal = self._journal
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
                self.epoch = next(_EPOCHS)
        self.journal_len = at
