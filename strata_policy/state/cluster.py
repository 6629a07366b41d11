"""One cluster's state: the node matrix, the quota tree, the running workloads, the generation.

Built once per pushed snapshot (``ClusterState.build``), then changed in place only through
``add``/``add_many``/``put``/``remove``/``set_placements`` and, for an UpdateSnapshot's node and
scope changes, ``swap_nodes``/``swap_scopes`` (``state.incremental``), each of which records its
exact inverse while a transaction is open. That is how a dry run or a failed batch changes
nothing: simulate, then undo (STYLE habit 3). The engine holds the cluster's lock around every
transaction.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Mapping, MutableMapping, Sequence

from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import Node, Placement, RunningWorkload, Scope, Snapshot
from strata_policy.model.resources import Resources
from strata_policy.quota import QuotaTree
from strata_policy.state import columnar_build, running_table
from strata_policy.state.matrix_build import allocate_running, matrix_from_nodes, running_rows
from strata_policy.state.nodes import NodeMatrix, ReplicaRows
from strata_policy.state.running_columns import RunningColumns
from strata_policy.state.running_table import RunningTable
from strata_policy.state.taskmix import TaskMix

Undo = Callable[[], None]
_WORKLOAD_ID = operator.attrgetter("workload.id")

# ``add_many`` allocates nodes in one vectorised step (``NodeMatrix.allocate_rows``, which
# costs O(nodes) plus a little per replica) when the replicas number at least 1/64 of the nodes,
# and replica by replica (each a few numpy scalar operations) below that.
BULK_ALLOCATE_FRACTION = 64


class ClusterState:
    """The dense, mutable state of one cluster; see the module docstring for the contract."""

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

    @classmethod
    def build(
        cls,
        cluster_id: str,
        snapshot: Snapshot,
        generation: int,
        task_mix: TaskMix | None = None,
        path: str = "snapshot",
    ) -> ClusterState:
        """Build the dense state from a validated snapshot; placements must fit their nodes.

        Raises ``InvalidArgument`` naming each replica that does not fit where the snapshot says
        it runs (checked cumulatively, in snapshot order). Running workloads held as columns
        (``RunningColumns``) are built per column (``columnar_build``) into the same state,
        their workloads made only when read; where that cannot vouch for the answer, the plain
        path below reads them one by one.
        """
        matrix = matrix_from_nodes(snapshot.nodes)
        tree = QuotaTree.build(snapshot.scopes)
        mix = task_mix.copy() if task_mix is not None else TaskMix()
        state = cls(cluster_id, snapshot, generation, matrix, tree, mix)
        cols = snapshot.workloads
        if isinstance(cols, RunningColumns) and state._build_columns(cols, task_mix is None):
            return state
        if not allocate_running(matrix, snapshot.workloads):
            violations = _allocate_one_by_one(matrix, snapshot, path)
            if violations:
                raise InvalidArgument(violations)
        charges: dict[str, dict[str, int]] = {}
        for rw in snapshot.workloads:
            w = rw.workload
            charge = charges.get(w.scope_id)
            if charge is None:
                charge = charges[w.scope_id] = {}
            for r, amount in w.request.items():
                charge[r] = charge.get(r, 0) + amount * w.replicas
            state._insert(rw)
        for scope_id, amounts in charges.items():  # once per scope, not per workload
            tree.charge(scope_id, amounts)
        if task_mix is None:
            mix.observe_many(rw.workload for rw in snapshot.workloads)
        return state

    def _build_columns(self, cols: RunningColumns, observe: bool) -> bool:
        """``build``'s work from columns; False (nothing changed) sends it to the plain path."""
        if not cols.plainly_valid():
            return False
        rows = columnar_build.replica_rows(self.matrix, cols)
        charges = columnar_build.charges(cols)
        if rows is None or charges is None or not self.matrix.allocate_rows(rows):
            return False
        for scope_id, amounts in charges.items():
            self.tree.charge(scope_id, amounts)
        if observe:
            columnar_build.observe(self.task_mix, cols)
        self.workloads, self._seq = columnar_build.held(cols)
        self._next_seq = len(cols)
        return True

    # --- reading -------------------------------------------------------------------------

    @property
    def capacity(self) -> dict[str, int]:
        """Σ capacity of schedulable nodes: the headroom base of DESIGN §2."""
        return self._capacity

    def snapshot(self) -> Snapshot:
        """The state as a snapshot (nodes in snapshot order, workloads in admission order)."""
        self.workloads.make_all()  # a pushed snapshot's rows made in bulk, not one by one
        order = sorted(self.workloads, key=running_table.plain(self._seq).__getitem__)
        return Snapshot(self.nodes, self.scopes, tuple(self.workloads[w] for w in order))

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

    def workload_counts(self) -> dict[str, int]:
        """How many workloads each scope holds directly."""
        counts: dict[str, int] = {}
        for scope_id in self.workloads.scope_ids():  # without making the workloads
            counts[scope_id] = counts.get(scope_id, 0) + 1
        return counts

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
        for scope_id, amounts in (_charges(rws) if charges is None else charges).items():
            self.tree.charge(scope_id, amounts)
        n = self._next_seq
        workloads.put_many(zip(ids, rws, strict=True))
        self._seq.update(zip(ids, range(n, n + len(ids)), strict=True))
        self._next_seq = n + len(ids)
        self.touched.update(ids)
        self.created.update(ids)
        self._added.extend(ids)
        self._record(lambda: self._unadd_many(rws, rows))

    def remove(self, workload_id: str) -> RunningWorkload:
        """Release a workload: refund quota, free its nodes; returns what it was."""
        rw = self.workloads.pop(workload_id)
        seq = self._seq.pop(workload_id)
        self.tree.refund(rw.workload.scope_id, rw.workload.total)
        self._deallocate(rw.workload.request, rw.placements)
        self.touched.add(workload_id)
        self._record(lambda: self._unremove(rw, seq))
        return rw

    def remove_many(self, workload_ids: Sequence[str]) -> None:
        """``remove`` for each of ``workload_ids`` (held, distinct: the caller checks), as one
        change: quota refunded once per scope, nodes freed in bulk for many replicas, one undo
        record that puts each back with its admission number."""
        workloads, seqs = self.workloads, self._seq
        rws = [workloads.pop(w) for w in workload_ids]
        numbers = [seqs.pop(w) for w in workload_ids]
        for scope_id, amounts in _charges(rws).items():
            self.tree.refund(scope_id, amounts)
        self._deallocate_all(rws)
        self.touched.update(workload_ids)
        self._record(lambda: self._unremove_many(rws, numbers))

    def put(self, rw: RunningWorkload, seq: int | None = None) -> None:
        """``add``, all or nothing, at admission number ``seq`` (a workload an UpdateSnapshot
        replaces keeps its place in the admission order) or the next one.

        Raises before changing anything: ``InvalidArgument`` when the id is held or the scope
        unknown, ``ValueError`` when a replica does not fit where it is placed.
        """
        wid = rw.workload.id
        if wid in self.workloads:
            raise InvalidArgument.one("workload.id", f"workload {wid!r} is already admitted")
        self.tree.path(rw.workload.scope_id)  # an unknown scope raises here, before any change
        if rw.placements:
            self._allocate_all((rw,), None)
        self.tree.charge(rw.workload.scope_id, rw.workload.total)
        self.workloads[wid] = rw
        if seq is None:
            seq = self._next_seq
            self._next_seq += 1
        self._seq[wid] = seq
        self.touched.add(wid)
        self._record(lambda: self._unadd(rw))

    def seq_of(self, workload_id: str) -> int:
        """The admission number of a held workload (its place in ``snapshot()``)."""
        return self._seq[workload_id]

    def swap_nodes(self, matrix: NodeMatrix) -> None:
        """Replace the node matrix (nodes upserted or removed; ``node_changes.rebuilt``)."""
        old = (self.matrix, self.nodes, self._capacity)
        self.matrix, self.nodes = matrix, matrix.nodes
        self._capacity = matrix.total_capacity(schedulable_only=True)
        self._record(lambda: self._restore_nodes(*old))

    def swap_scopes(self, tree: QuotaTree, scopes: tuple[Scope, ...]) -> None:
        """Replace the quota tree and the scope list (scopes upserted or removed)."""
        old = (self.tree, self.scopes)
        self.tree, self.scopes = tree, scopes
        self._record(lambda: self._restore_scopes(*old))

    def set_placements(
        self, workload_id: str, placements: tuple[Placement, ...]
    ) -> RunningWorkload:
        """Place an admitted workload (it holds quota already)."""
        old = self.workloads[workload_id]
        new = RunningWorkload(old.workload, placements, old.admitted_at_ms)
        self._deallocate(old.workload.request, old.placements)
        self._allocate(new.workload.request, placements)
        self.workloads[workload_id] = new
        self.touched.add(workload_id)
        self._record(lambda: self._unplace(old, new))
        return new

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

    def _deallocate_all(self, rws: Sequence[RunningWorkload]) -> None:
        """Free every placed replica of ``rws``: in bulk when they are many (as
        ``_allocate_all``), else one by one."""
        matrix = self.matrix
        replicas = sum(len(rw.placements) for rw in rws)
        if not replicas:
            return
        if replicas * BULK_ALLOCATE_FRACTION >= len(matrix):
            rows = running_rows(matrix, rws)
            if rows is not None and matrix.deallocate_rows(rows):
                return
        for rw in reversed(rws):
            for p in reversed(rw.placements):
                matrix.deallocate(matrix.index[p.node_id], rw.workload.request, p.gpu_devices)

    def _unremove_many(self, rws: Sequence[RunningWorkload], numbers: Sequence[int]) -> None:
        self._allocate_all(rws, None)
        for scope_id, amounts in _charges(rws).items():
            self.tree.charge(scope_id, amounts)
        for rw, seq in zip(rws, numbers, strict=True):
            self.workloads[rw.workload.id] = rw
            self._seq[rw.workload.id] = seq

    def _unadd_many(self, rws: Sequence[RunningWorkload], rows: ReplicaRows | None) -> None:
        ids = list(map(_WORKLOAD_ID, rws))
        running_table.delete_many(self.workloads, ids)
        running_table.delete_many(self._seq, ids)
        for scope_id, amounts in _charges(rws).items():
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

    def _unremove(self, rw: RunningWorkload, seq: int) -> None:
        self.tree.charge(rw.workload.scope_id, rw.workload.total)
        self._allocate(rw.workload.request, rw.placements)
        self.workloads[rw.workload.id] = rw
        self._seq[rw.workload.id] = seq

    def _restore_nodes(
        self, matrix: NodeMatrix, nodes: Sequence[Node], capacity: dict[str, int]
    ) -> None:
        self.matrix, self.nodes, self._capacity = matrix, nodes, capacity

    def _restore_scopes(self, tree: QuotaTree, scopes: tuple[Scope, ...]) -> None:
        self.tree, self.scopes = tree, scopes

    def _unplace(self, old: RunningWorkload, new: RunningWorkload) -> None:
        self._deallocate(new.workload.request, new.placements)
        self._allocate(old.workload.request, old.placements)
        self.workloads[old.workload.id] = old


class Transaction:
    """An open transaction: knows whether anything changed and can undo it all."""

    def __init__(self, state: ClusterState) -> None:
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


def _charges(rws: Sequence[RunningWorkload]) -> dict[str, dict[str, int]]:
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


def _allocate_one_by_one(matrix: NodeMatrix, snapshot: Snapshot, path: str) -> list[FieldViolation]:
    """Allocate replica by replica in snapshot order, naming each one that does not fit."""
    violations: list[FieldViolation] = []
    for i, rw in enumerate(snapshot.workloads):
        request = rw.workload.request
        for j, p in enumerate(rw.placements):
            n = matrix.index[p.node_id]
            problem = matrix.replica_fit_error(n, request, p.gpu_devices)
            if problem is not None:
                violations.append(
                    FieldViolation(
                        f"{path}.workloads[{i}].placements[{j}]",
                        f"on node {p.node_id!r}: {problem}",
                    )
                )
            else:
                matrix.allocate(n, request, p.gpu_devices)
    return violations
