"""What a commit of placed work runs on one cluster's state: the transaction, adding workloads.

``ClusterCore`` holds the fields of ``ClusterState`` (``state.cluster``: the node matrix, the
quota tree, the running workloads, the generation) and the changes every decision commits:
``add`` (one workload: Admit, Reclaim, one by one) and ``add_many`` (a run the batch lane placed,
its replicas allocated from the kernel's rows), each of which records its exact inverse while a
transaction is open (``begin``/``end``, or ``transaction()``). That is how a dry run or a failed
batch changes nothing: simulate, then undo (STYLE habit 3). The engine holds the cluster's lock
around every transaction. Building from a snapshot, the reads and the other changes (release,
reclaim's evictions, an UpdateSnapshot's upserts and swaps, placing an admitted workload) are
``ClusterState``'s, in ``state.cluster``, and follow the same undo contract.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Mapping, MutableMapping, Sequence

from strata_policy.errors import InvalidArgument
from strata_policy.model import Placement, RunningWorkload, Snapshot
from strata_policy.model.resources import Resources
from strata_policy.quota import QuotaTree
from strata_policy.state import running_table
from strata_policy.state.matrix_build import allocate_running
from strata_policy.state.nodes import NodeMatrix, ReplicaRows
from strata_policy.state.running_table import RunningTable
from strata_policy.state.taskmix import TaskMix

Undo = Callable[[], None]
_WORKLOAD_ID = operator.attrgetter("workload.id")

# ``add_many`` allocates nodes in one vectorised step (``NodeMatrix.allocate_rows``, which
# costs O(nodes) plus a little per replica) when the replicas number at least 1/64 of the nodes,
# and replica by replica (each a few numpy scalar operations) below that.
BULK_ALLOCATE_FRACTION = 64


class ClusterCore:
    """The fields of one cluster's state and the changes a commit of placed work makes; see
    the module docstring (``ClusterState`` is the whole of it)."""

    def __init__(
        self,
        cluster_id: str,
        snapshot: Snapshot,
        generation: int,
        matrix: NodeMatrix,
        tree: QuotaTree,
        task_mix: TaskMix,
    ) -> None:
        self.cluster_id = cluster_id
        self.generation = generation
        self.nodes = snapshot.nodes
        self.scopes = snapshot.scopes
        self.matrix = matrix
        self.tree = tree
        self.task_mix = task_mix
        self.workloads = RunningTable()
        self._seq: MutableMapping[str, int] = {}  # admission order, restored exactly by undo
        self._next_seq = 0
        self.lock = threading.RLock()
        self._capacity: dict[str, int] = matrix.total_capacity(schedulable_only=True)
        self._undo: list[Undo] | None = None
        self.touched: set[str] = set()  # workload ids changed in the open transaction
        self.created: set[str] = set()  # of those, the ones the transaction added
        self._added: list[str] = []  # ids the transaction added, in the order it added them

    @property
    def capacity(self) -> dict[str, int]:
        """Σ capacity of schedulable nodes: the headroom base of DESIGN §2."""
        return self._capacity

    def changes(self) -> tuple[list[RunningWorkload], list[str]]:
        """What the open transaction changed: the workloads it added or changed that are held
        now, in admission order, and the ids it removed that were held before it, sorted.

        Workloads held before the transaction keep their admission number and come first
        (sorted by it); every one the transaction added has a later number than those, handed
        out in the order of ``_added``, so that list, kept at each id's last addition and
        filtered to what is still held, is already in admission order: no sort over the added.
        """
        workloads = self.workloads
        before = self.touched - self.created
        kept = sorted((w for w in before if w in workloads), key=self._seq.__getitem__)
        removed = sorted(w for w in before if w not in workloads)
        last = dict.fromkeys(reversed(self._added))
        if len(last) == len(self._added):  # nothing added twice: already in order
            added = list(filter(workloads.__contains__, self._added))
        else:
            added = [w for w in last if w in workloads]
            added.reverse()
        return list(map(workloads.__getitem__, (*kept, *added))), removed

    # --- changing ------------------------------------------------------------------------

    def add(self, rw: RunningWorkload) -> None:
        """Admit (and, with placements, place) a workload: charge quota, allocate nodes."""
        wid = rw.workload.id
        if wid in self.workloads:
            raise InvalidArgument.one("workload.id", f"workload {wid!r} is already admitted")
        self.tree.charge(rw.workload.scope_id, rw.workload.total)
        if rw.placements:
            self._allocate(rw.workload.request, rw.placements)
        self._insert(rw)
        if self._undo is not None:  # outside a transaction there is nothing to track or undo
            self.touched.add(wid)
            self.created.add(wid)
            self._added.append(wid)
            self._undo.append(lambda: self._unadd(rw))

    def add_many(
        self,
        rws: Sequence[RunningWorkload],
        charges: Mapping[str, Resources] | None = None,
        rows: ReplicaRows | None = None,
    ) -> None:
        """``add`` for each of ``rws`` in order, as one change: the same state afterwards (same
        usage, allocations and admission order), with the tree charged once per scope and the
        nodes allocated in bulk for a large batch, and one undo record for all of them.

        ``charges``, when the caller has summed them already, must be ``rws``' ``request ×
        replicas`` per scope (``quota.RunAdmitted.totals`` less what was not placed); absent,
        they are summed here. ``rows``, when the caller has them (a kernel's answer,
        ``PlacedBatch.rows``), must be ``rws``' placed replicas in order, as arrays: the nodes
        are then allocated from them, without reading the placements again. Raises before
        changing anything: ``InvalidArgument`` when an id is held already or repeated,
        ``ValueError`` when a replica does not fit where it is placed.
        """
        if not rws:
            return
        ids = list(map(_WORKLOAD_ID, rws))
        workloads = self.workloads
        if len(set(ids)) != len(ids) or not workloads.keys().isdisjoint(ids):
            seen: set[str] = set()
            for wid in ids:
                if wid in workloads or wid in seen:
                    raise InvalidArgument.one(
                        "workload.id", f"workload {wid!r} is already admitted"
                    )
                seen.add(wid)
        self._allocate_all(rws, rows)
        for scope_id, amounts in (charges_of(rws) if charges is None else charges).items():
            self.tree.charge(scope_id, amounts)
        n = self._next_seq
        workloads.put_many(zip(ids, rws, strict=True))
        self._seq.update(zip(ids, range(n, n + len(ids)), strict=True))
        self._next_seq = n + len(ids)
        self.touched.update(ids)
        self.created.update(ids)
        self._added.extend(ids)
        self._record(lambda: self._unadd_many(rws, rows))

    def transaction(self) -> Transaction:
        """``with state.transaction() as txn``: record every change; undo them all on an
        exception or ``txn.rollback()``.

        Not re-entrant: the engine opens one transaction per call, under the cluster lock.
        """
        return Transaction(self)

    def begin(self) -> list[Undo]:
        """Open a transaction without a ``Transaction`` (``engine.commit``'s path, taken by
        every Admit: two calls instead of four): the returned undo list is empty until
        something changes. ``end`` closes it. Not re-entrant."""
        if self._undo is not None:
            raise RuntimeError("transaction already open")
        undo: list[Undo] = []
        self._undo = undo
        if self.touched:  # emptied in place: none is held past a call (``created`` and
            self.touched.clear()  # ``_added`` grow only with ``touched``)
            self.created.clear()
            self._added.clear()
        return undo

    def end(self, rollback: bool) -> None:
        """Close the transaction ``begin`` opened, undoing its changes first (newest first)
        when ``rollback``."""
        undo = self._undo
        if rollback and undo:
            while undo:
                undo.pop()()
        self._undo = None
        if self.touched:  # as ``begin``: no new sets for the collector on every commit
            self.touched.clear()
            self.created.clear()
            self._added.clear()

    # --- internals -----------------------------------------------------------------------

    def _record(self, undo: Undo) -> None:
        if self._undo is not None:
            self._undo.append(undo)

    def _allocate(self, request: Resources, placements: tuple[Placement, ...]) -> None:
        for p in placements:
            self.matrix.allocate(self.matrix.index[p.node_id], request, p.gpu_devices)

    def _deallocate(self, request: Resources, placements: tuple[Placement, ...]) -> None:
        for p in placements:
            self.matrix.deallocate(self.matrix.index[p.node_id], request, p.gpu_devices)

    def _allocate_all(self, rws: Sequence[RunningWorkload], rows: ReplicaRows | None) -> None:
        """Allocate every placed replica of ``rws``, or nothing (``ValueError``)."""
        matrix = self.matrix
        replicas = len(rows) if rows is not None else sum(len(rw.placements) for rw in rws)
        if not replicas:
            return
        if replicas * BULK_ALLOCATE_FRACTION >= len(matrix) and (
            matrix.allocate_rows(rows) if rows is not None else allocate_running(matrix, rws)
        ):
            return
        done: list[tuple[Resources, Placement]] = []
        try:
            for rw in rws:
                request = rw.workload.request
                for p in rw.placements:
                    matrix.allocate(matrix.index[p.node_id], request, p.gpu_devices)
                    done.append((request, p))
        except ValueError:
            for request, p in reversed(done):
                matrix.deallocate(matrix.index[p.node_id], request, p.gpu_devices)
            raise

    def _unadd_many(self, rws: Sequence[RunningWorkload], rows: ReplicaRows | None) -> None:
        ids = list(map(_WORKLOAD_ID, rws))
        running_table.delete_many(self.workloads, ids)
        running_table.delete_many(self._seq, ids)
        for scope_id, amounts in charges_of(rws).items():
            self.tree.refund(scope_id, amounts)
        matrix = self.matrix
        if (
            rows is not None
            and len(rows) * BULK_ALLOCATE_FRACTION >= len(matrix)
            and matrix.deallocate_rows(rows)
        ):
            return
        for rw in reversed(rws):
            for p in reversed(rw.placements):
                matrix.deallocate(matrix.index[p.node_id], rw.workload.request, p.gpu_devices)

    def _insert(self, rw: RunningWorkload) -> None:
        self.workloads[rw.workload.id] = rw
        self._seq[rw.workload.id] = self._next_seq
        self._next_seq += 1

    def _unadd(self, rw: RunningWorkload) -> None:
        del self.workloads[rw.workload.id]
        del self._seq[rw.workload.id]
        self.tree.refund(rw.workload.scope_id, rw.workload.total)
        self._deallocate(rw.workload.request, rw.placements)


class Transaction:
    """An open transaction: knows whether anything changed and can undo it all."""

    def __init__(self, state: ClusterCore) -> None:
        self._state = state

    def __enter__(self) -> Transaction:
        self._state.begin()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._state.end(rollback=exc_type is not None)

    @property
    def changed(self) -> bool:
        """Whether any change was recorded (and not rolled back)."""
        return bool(self._state._undo)

    def mark(self) -> int:
        """A savepoint: the number of changes recorded so far."""
        return len(self._state._undo or ())

    def rollback(self, to: int = 0) -> None:
        """Undo the changes recorded after savepoint ``to``, newest first."""
        undo = self._state._undo
        if undo is None:
            return
        while len(undo) > to:
            undo.pop()()


def charges_of(rws: Sequence[RunningWorkload]) -> dict[str, dict[str, int]]:
    """``request × replicas`` summed per scope: what charging each workload adds up to."""
    charges: dict[str, dict[str, int]] = {}
    for rw in rws:
        w = rw.workload
        charge = charges.get(w.scope_id)
        if charge is None:
            charge = charges[w.scope_id] = {}
        replicas = w.replicas
        for r, amount in w.request.items():
            if amount:
                charge[r] = charge.get(r, 0) + amount * replicas
    return charges
