"""One cluster's state: the node matrix, the quota tree, the running workloads, the generation.

Built once per pushed snapshot (``ClusterState.build``), then changed in place only through
``add``/``add_many``/``put``/``remove``/``set_placements`` and, for an UpdateSnapshot's node and
scope changes, ``swap_nodes``/``swap_scopes`` (``state.incremental``), each of which records its
exact inverse while a transaction is open. That is how a dry run or a failed batch changes
nothing: simulate, then undo (STYLE habit 3). The engine holds the cluster's lock around every
transaction.

What every decision's commit runs (the fields, the transaction, ``add`` and ``add_many``) is
``ClusterCore``'s, in ``state.cluster_core``; here are the rest: building from a snapshot, the
reads, and the changes that remove or replace (Release, Reclaim's evictions, UpdateSnapshot,
Place by id), with their undo.
"""

from __future__ import annotations

from collections.abc import Sequence

from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import Node, Placement, RunningWorkload, Scope, Snapshot
from strata_policy.quota import QuotaTree
from strata_policy.state import cluster_core, columnar_build, running_table
from strata_policy.state.cluster_core import ClusterCore, charges_of
from strata_policy.state.matrix_build import allocate_running, matrix_from_nodes, running_rows
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.running_columns import RunningColumns
from strata_policy.state.taskmix import TaskMix


class ClusterState(ClusterCore):
    """The dense, mutable state of one cluster; see the module docstring for the contract."""

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
            violations = allocate_one_by_one(matrix, snapshot, path)
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

    def snapshot(self) -> Snapshot:
        """The state as a snapshot (nodes in snapshot order, workloads in admission order)."""
        self.workloads.make_all()  # a pushed snapshot's rows made in bulk, not one by one
        order = sorted(self.workloads, key=running_table.plain(self._seq).__getitem__)
        return Snapshot(self.nodes, self.scopes, tuple(self.workloads[w] for w in order))

    def workload_counts(self) -> dict[str, int]:
        """How many workloads each scope holds directly."""
        counts: dict[str, int] = {}
        for scope_id in self.workloads.scope_ids():  # without making the workloads
            counts[scope_id] = counts.get(scope_id, 0) + 1
        return counts

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
        for scope_id, amounts in charges_of(rws).items():
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

    def _deallocate_all(self, rws: Sequence[RunningWorkload]) -> None:
        """Free every placed replica of ``rws``: in bulk when they are many (as
        ``_allocate_all``), else one by one."""
        matrix = self.matrix
        replicas = sum(len(rw.placements) for rw in rws)
        if not replicas:
            return
        if replicas * cluster_core.BULK_ALLOCATE_FRACTION >= len(matrix):
            rows = running_rows(matrix, rws)
            if rows is not None and matrix.deallocate_rows(rows):
                return
        for rw in reversed(rws):
            for p in reversed(rw.placements):
                matrix.deallocate(matrix.index[p.node_id], rw.workload.request, p.gpu_devices)

    def _unremove_many(self, rws: Sequence[RunningWorkload], numbers: Sequence[int]) -> None:
        self._allocate_all(rws, None)
        for scope_id, amounts in charges_of(rws).items():
            self.tree.charge(scope_id, amounts)
        for rw, seq in zip(rws, numbers, strict=True):
            self.workloads[rw.workload.id] = rw
            self._seq[rw.workload.id] = seq

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


def allocate_one_by_one(matrix: NodeMatrix, snapshot: Snapshot, path: str) -> list[FieldViolation]:
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
