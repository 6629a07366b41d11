"""The snapshot use cases: PushSnapshot, UpdateSnapshot, DeleteCluster, start-up replay, and the
reads (GetCluster, counts, a whole snapshot).

A push builds a new ``ClusterState`` beside the live one and swaps it in after the journal took
the change; an update is applied in place in a transaction when ``state.incremental`` can vouch
for it (it costs what it changes), else rebuilt whole beside the live state; a delete is only
planned until the journal took it. Each follows ``engine.commit``'s protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import structlog

from strata_policy.engine.commit import Committer, RequestKey, call_digest, check_generation
from strata_policy.errors import ClusterNotFound, SizeLimitExceeded
from strata_policy.model import ClusterInfo, Snapshot
from strata_policy.state import incremental, request_checks, validate
from strata_policy.state.changes import Change, ChangeKind, Delta
from strata_policy.state.cluster import ClusterState

log = structlog.get_logger("strata.engine")
T = TypeVar("T")


class NotInPlace(Exception):  # a signal to the caller, not an error
    """``update_snapshot(..., in_place_only=True)`` found a delta that only the plain path can
    apply or refuse (a node or scope change it cannot patch, or a bad delta, whose exact errors
    the plain path builds): nothing was changed; call again without ``in_place_only``."""


class SnapshotCases:
    """The Engine's snapshot use cases and reads (``engine.core`` assembles ``Engine`` from
    this and the other use cases; ``commits`` is the engine's, ``engine.commit``)."""

    commits: Committer

    def push_snapshot(
        self,
        cluster_id: str,
        snapshot: Snapshot,
        *,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        caller: str = "",
        body_digest: bytes = b"",
    ) -> int:
        """Replace (or create) a cluster's whole state; returns the new generation."""
        c = self.commits
        request_checks.check_request_ids(cluster_id, request_id)
        c.limits.check_sizes(len(snapshot.nodes), len(snapshot.scopes), len(snapshot.workloads))
        digest = call_digest(
            request_id, dry_run, body_digest, lambda: ("push", snapshot, expected_generation)
        )
        key: RequestKey = (caller, cluster_id, "push", request_id)
        with c.store.claim(cluster_id) as slot:
            remembered = c.store.answer(key, digest)
            if isinstance(remembered, int):
                return remembered
            current = slot.state.generation if slot.state else 0
            check_generation(cluster_id, expected_generation, current)
            if slot.state is None:
                c.store.check_new_cluster(cluster_id)
            request_checks.check(validate.snapshot_shape(snapshot))
            mix = slot.state.task_mix if slot.state else None
            state = ClusterState.build(cluster_id, snapshot, current + 1, mix)
            if dry_run:
                return current
            c.append(Change(cluster_id, state.generation, ChangeKind.PUSH, snapshot=snapshot))
            slot.state = state
            c.store.remember(key, digest, state.generation)
            log.info(
                "snapshot pushed",
                cluster_id=cluster_id,
                generation=state.generation,
                nodes=len(snapshot.nodes),
                scopes=len(snapshot.scopes),
                workloads=len(snapshot.workloads),
            )
            return state.generation

    def update_snapshot(
        self,
        cluster_id: str,
        delta: Delta,
        *,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        caller: str = "",
        body_digest: bytes = b"",
        in_place_only: bool = False,
    ) -> int:
        """Apply a delta (removals, then upserts); returns the new generation.

        The delta is applied to the live state in a transaction (``incremental.apply_in_place``:
        it costs what it changes) and journaled while a failed write can still roll it back;
        a delta that path cannot vouch for (a bad one, to begin with) takes the plain path,
        ``incremental.rebuild``, which raises the exact errors or builds the state again whole.
        With ``in_place_only`` that path is not taken: ``NotInPlace`` is raised instead, with
        nothing changed (the server's event loop applies small pod events itself, and hands a
        delta that needs the plain path, whose cost grows with the cluster, to a worker).
        """
        c = self.commits
        request_checks.check_request_ids(cluster_id, request_id)
        digest = call_digest(
            request_id, dry_run, body_digest, lambda: ("update", delta, expected_generation)
        )
        key: RequestKey = (caller, cluster_id, "update", request_id)
        with c.store.slot(cluster_id) as slot:
            remembered = c.store.answer(key, digest)
            if isinstance(remembered, int):
                return remembered
            state = slot.require(cluster_id)
            check_generation(cluster_id, expected_generation, state.generation)
            if delta.empty:
                return state.generation
            change = Change(cluster_id, state.generation + 1, ChangeKind.DELTA, delta=delta)
            if _update_in_place(c, state, delta, dry_run, change):
                if not dry_run:
                    c.store.remember(key, digest, state.generation)
                    c.checkpoint(state)
                return state.generation
            if in_place_only:
                raise NotInPlace
            new = incremental.rebuild(state, delta, c.limits.check_sizes)
            if dry_run:
                return state.generation
            c.append(change)  # before the new state is seen: a failed write changes nothing
            slot.state = new
            c.store.remember(key, digest, new.generation)
            c.checkpoint(new)
            return new.generation

    def delete_cluster(
        self,
        cluster_id: str,
        *,
        expected_generation: int = 0,
        request_id: str = "",
        caller: str = "",
        body_digest: bytes = b"",
    ) -> int:
        """Forget a cluster; returns the generation it had (a committed delete's retry too)."""
        c = self.commits
        request_checks.check_request_ids(cluster_id, request_id)
        digest = call_digest(
            request_id, False, body_digest, lambda: ("delete", expected_generation)
        )
        key: RequestKey = (caller, cluster_id, "delete", request_id)
        try:
            slot = c.store.slot(cluster_id)
        except ClusterNotFound:
            remembered = c.store.answer(key, digest)
            if isinstance(remembered, int):
                return remembered
            raise
        with slot:
            remembered = c.store.answer(key, digest)
            if isinstance(remembered, int):
                return remembered
            state = slot.require(cluster_id)
            check_generation(cluster_id, expected_generation, state.generation)
            c.append(Change(cluster_id, state.generation, ChangeKind.DELETE))
            slot.state = None  # the slot is dropped when its lock is released
            c.store.forget_cluster(cluster_id)
            c.store.remember(key, digest, state.generation)
            log.info("cluster deleted", cluster_id=cluster_id, generation=state.generation)
            return state.generation

    def restore(self, change: Change) -> None:
        """Apply a journaled change as it was committed (start-up recovery; no journaling)."""
        c = self.commits
        with c.store.claim(change.cluster_id) as slot:
            if change.kind is ChangeKind.DELETE:
                slot.state = None
            elif change.kind is ChangeKind.PUSH and change.snapshot is not None:
                slot.state = ClusterState.build(
                    change.cluster_id, change.snapshot, change.generation
                )
            elif change.delta is not None:
                state = slot.require(change.cluster_id)
                with state.transaction() as txn:
                    done = incremental.apply_in_place(state, change.delta)
                    if not done:
                        txn.rollback()
                if done:
                    state.generation = change.generation
                else:
                    new = incremental.rebuild(state, change.delta, c.limits.check_sizes)
                    new.generation = change.generation
                    slot.state = new

    def get_cluster(self, cluster_id: str) -> ClusterInfo:
        """Generation, counts, the scope tree with usage, and capacity/allocation totals."""
        return self._read(cluster_id, info)

    def counts(self, cluster_id: str) -> tuple[int, int, int]:
        """Nodes, scopes and workloads the cluster holds: ``get_cluster``'s counts in O(1),
        for answers that carry only these (UpdateSnapshot's, one per watch event)."""
        return self._read(cluster_id, lambda s: (len(s.nodes), len(s.scopes), len(s.workloads)))

    def snapshot(self, cluster_id: str) -> tuple[int, Snapshot]:
        """The generation and the whole snapshot (what PushSnapshot would recreate)."""
        return self._read(cluster_id, lambda s: (s.generation, s.snapshot()))

    def cluster_ids(self) -> list[str]:
        """The clusters this engine holds."""
        return self.commits.store.cluster_ids()

    def clusters(self) -> list[tuple[str, ClusterInfo]]:
        """Every cluster's info (for metrics); clusters deleted meanwhile are skipped."""
        out = []
        for cid in self.cluster_ids():
            try:
                out.append((cid, self.get_cluster(cid)))
            except ClusterNotFound:  # deleted between listing and reading
                continue
        return out

    def _read(self, cluster_id: str, view: Callable[[ClusterState], T]) -> T:
        """``view`` of the cluster's state, under its lock (or ``ClusterNotFound``)."""
        c = self.commits
        with c.store.slot(cluster_id) as slot:
            return view(slot.require(cluster_id))


def _update_in_place(
    c: Committer, state: ClusterState, delta: Delta, dry_run: bool, change: Change
) -> bool:
    """``delta`` applied to ``state`` in a transaction, sizes checked, journaled (unless a
    dry run, which rolls back); False, with nothing changed, when the plain path must
    decide. A failed journal write rolls the change back and raises."""
    with state.transaction() as txn:
        done = incremental.apply_in_place(state, delta)
        if done:
            try:
                c.limits.check_sizes(len(state.nodes), len(state.scopes), len(state.workloads))
            except SizeLimitExceeded:
                done = False  # the plain path raises it, or an earlier error, as it always did
        if not done or dry_run:
            txn.rollback()
            return done
        state.generation += 1
        try:
            c.append(change)  # inside the transaction: a failed write rolls it back
        except BaseException:
            state.generation -= 1
            raise
        return True


def info(state: ClusterState) -> ClusterInfo:
    """Generation, counts, the scope tree with usage, and capacity/allocation totals."""
    return ClusterInfo(
        generation=state.generation,
        node_count=len(state.nodes),
        scope_count=len(state.scopes),
        workload_count=len(state.workloads),
        scopes=state.tree.statuses(state.workload_counts()),
        capacity=dict(state.capacity),
        allocated=state.matrix.total_allocated(),
    )
