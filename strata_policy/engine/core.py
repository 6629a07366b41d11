"""The engine: snapshot → policy → commit, with logs, idempotency and the journal.

``Engine`` is also the public in-process API (the simulator, notebooks and embedders use it)::

    from strata_policy.engine import Engine
    from strata_policy.testing import node, scope, snapshot, workload

    engine = Engine()
    engine.push_snapshot("prod", snapshot([node("node-1", gpus=8), node("node-2", gpus=8)],
                                          [scope("team-a")]))
    result = engine.place("prod", [workload("job-1", "team-a", cpu=4, gpu_milli=8000, replicas=2,
                                            spread_key="kubernetes.io/hostname")])
    result.results[0].placements  # (Placement('node-1', (0..7)), Placement('node-2', (0..7)))

Every call takes the cluster's lock, replays a remembered answer for a repeated ``request_id``
(per caller, committed calls only; see ``state.store``), checks ``expected_generation``,
computes on the live state inside a transaction (policies are pure functions of that state),
then either rolls back (``dry_run``, or an error) or commits.

Commit protocol (journal first). A failed call changes nothing, including one whose journal
write failed (DESIGN §4), so memory never gets ahead of the journal:

1. The change is made on the live state inside ``state.transaction()`` (an in-place change:
   Admit, Place, Release, Reclaim; an incremental UpdateSnapshot must do the same), or built as a
   new ``ClusterState`` beside the live one (PushSnapshot, a rebuilding UpdateSnapshot), or is
   only planned (DeleteCluster).
2. The ``Change`` is built at ``generation + 1`` and the answer with that generation.
3. ``_append`` writes the change to the journal, still inside the transaction. When it raises,
   the transaction rolls the state back (or the new state is dropped, or the cluster stays),
   the generation, task mix and idempotency memory were never touched, and the call fails with
   ``StorageUnavailable`` (UNAVAILABLE, retryable).
4. Only then does memory commit, with steps that cannot fail: the generation is set, the new
   state swapped in (or the cluster removed), the task mix observes, the answer is remembered.
5. ``_checkpoint`` writes a whole snapshot when the journal wants one. It comes after the commit
   and its failure only logs: the change is already durable as a delta, and the next commit
   tries the checkpoint again.

Nothing between a successful append and the end of step 4 may raise, or memory would fall
behind the journal (a restart would then show a change the caller was told had failed).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import structlog

from strata_policy.capacity import CapacityPlan, NodeGroup, PlanOptions
from strata_policy.engine import batch, plan, reclaim
from strata_policy.engine.request_checks import check_new_workloads
from strata_policy.errors import (
    ClusterNotFound,
    GenerationConflict,
    InvalidArgument,
    SizeLimitExceeded,
    StorageUnavailable,
)
from strata_policy.model import (
    BatchResult,
    ClusterInfo,
    ColumnarBatch,
    Decision,
    Order,
    ReclaimResult,
    ReleaseResult,
    Snapshot,
    Workload,
    WorkloadResult,
)
from strata_policy.placement import slot_builders
from strata_policy.placement.place import PlacementOptions
from strata_policy.quota import decide_admit
from strata_policy.state import incremental, validate
from strata_policy.state.changes import Change, ChangeKind, Delta
from strata_policy.state.cluster import ClusterState
from strata_policy.state.store import Limits, RequestKey, Store, request_digest

log = structlog.get_logger("strata.engine")
T = TypeVar("T")


class NotInPlace(Exception):  # a signal to the caller, not an error
    """``update_snapshot(..., in_place_only=True)`` found a delta that only the plain path can
    apply or refuse (a node or scope change it cannot patch, or a bad delta, whose exact errors
    the plain path builds): nothing was changed; call again without ``in_place_only``."""


class Journal(Protocol):
    """Where committed changes go before a call answers (``state.durable.SqliteJournal``)."""

    def append(self, change: Change) -> None:
        """Persist one change durably, or raise ``StorageUnavailable`` (or ``OSError``) having
        persisted nothing."""

    def wants_checkpoint(self, cluster_id: str, generation: int) -> bool:
        """Whether to write a whole snapshot now."""

    def checkpoint(self, cluster_id: str, generation: int, snapshot: Snapshot) -> None:
        """Persist a whole snapshot at a generation."""


class DecisionObserver(Protocol):
    """Counts decisions (``service.metrics.Metrics`` implements it)."""

    def observe_results(
        self, method: str, results: Sequence[WorkloadResult], placed: int = 0
    ) -> None:
        """One Admit or Place batch's results: ``results``, and ``placed`` more that are
        PLACED without reasons (held in columns, ``model.columns``)."""

    def observe_reclaim(self, result: ReclaimResult) -> None:
        """One Reclaim's answer."""


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default clock."""
    return time.time_ns() // 1_000_000


class Engine:
    """Clusters in memory (and in a journal, when given); see the module docstring."""

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        journal: Journal | None = None,
        observer: DecisionObserver | None = None,
    ) -> None:
        self.store = Store(limits)
        self.limits = self.store.limits
        self.clock = clock
        self.journal = journal
        self.observer = observer

    # --- snapshots -----------------------------------------------------------------------

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
        """Replace (or create) a cluster's whole state; returns the new generation.

        ``caller`` and ``body_digest`` scope and check a ``request_id`` (``state.store``): the
        caller's identity, and a digest of the request as sent (the service passes the wire
        bytes' digest; without one the engine digests the arguments, which for a large
        snapshot costs about as much as converting it).
        """
        validate.check_request_ids(cluster_id, request_id)
        self.limits.check_sizes(len(snapshot.nodes), len(snapshot.scopes), len(snapshot.workloads))
        digest = _digest(
            request_id, dry_run, body_digest, lambda: ("push", snapshot, expected_generation)
        )
        key: RequestKey = (caller, cluster_id, "push", request_id)
        with self.store.claim(cluster_id) as slot:
            remembered = self.store.answer(key, digest)
            if isinstance(remembered, int):
                return remembered
            current = slot.state.generation if slot.state else 0
            _check_generation(cluster_id, expected_generation, current)
            if slot.state is None:
                self.store.check_new_cluster(cluster_id)
            validate.check(validate.snapshot_shape(snapshot))
            mix = slot.state.task_mix if slot.state else None
            state = ClusterState.build(cluster_id, snapshot, current + 1, mix)
            if dry_run:
                return current
            self._append(Change(cluster_id, state.generation, ChangeKind.PUSH, snapshot=snapshot))
            slot.state = state
            self.store.remember(key, digest, state.generation)
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
        validate.check_request_ids(cluster_id, request_id)
        digest = _digest(
            request_id, dry_run, body_digest, lambda: ("update", delta, expected_generation)
        )
        key: RequestKey = (caller, cluster_id, "update", request_id)
        with self.store.slot(cluster_id) as slot:
            remembered = self.store.answer(key, digest)
            if isinstance(remembered, int):
                return remembered
            state = slot.require(cluster_id)
            _check_generation(cluster_id, expected_generation, state.generation)
            if delta.empty:
                return state.generation
            change = Change(cluster_id, state.generation + 1, ChangeKind.DELTA, delta=delta)
            if self._update_in_place(state, delta, dry_run, change):
                if not dry_run:
                    self.store.remember(key, digest, state.generation)
                    self._checkpoint(state)
                return state.generation
            if in_place_only:
                raise NotInPlace
            new = incremental.rebuild(state, delta, self.limits.check_sizes)
            if dry_run:
                return state.generation
            self._append(change)  # before the new state is seen: a failed write changes nothing
            slot.state = new
            self.store.remember(key, digest, new.generation)
            self._checkpoint(new)
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
        """Forget a cluster; returns the generation it had. A retry of a delete that committed
        (same caller and ``request_id``) gets that answer even though the cluster is gone."""
        validate.check_request_ids(cluster_id, request_id)
        digest = _digest(request_id, False, body_digest, lambda: ("delete", expected_generation))
        key: RequestKey = (caller, cluster_id, "delete", request_id)
        try:
            slot = self.store.slot(cluster_id)
        except ClusterNotFound:
            remembered = self.store.answer(key, digest)
            if isinstance(remembered, int):
                return remembered
            raise
        with slot:
            remembered = self.store.answer(key, digest)
            if isinstance(remembered, int):
                return remembered
            state = slot.require(cluster_id)
            _check_generation(cluster_id, expected_generation, state.generation)
            self._append(Change(cluster_id, state.generation, ChangeKind.DELETE))
            slot.state = None  # the slot is dropped when its lock is released
            self.store.forget_cluster(cluster_id)
            self.store.remember(key, digest, state.generation)
            log.info("cluster deleted", cluster_id=cluster_id, generation=state.generation)
            return state.generation

    def get_cluster(self, cluster_id: str) -> ClusterInfo:
        """Generation, counts, the scope tree with usage, and capacity/allocation totals."""
        with self.store.slot(cluster_id) as slot:
            state = slot.require(cluster_id)
            return ClusterInfo(
                generation=state.generation,
                node_count=len(state.nodes),
                scope_count=len(state.scopes),
                workload_count=len(state.workloads),
                scopes=state.tree.statuses(state.workload_counts()),
                capacity=dict(state.capacity),
                allocated=state.matrix.total_allocated(),
            )

    def counts(self, cluster_id: str) -> tuple[int, int, int]:
        """Nodes, scopes and workloads the cluster holds: ``get_cluster``'s counts in O(1),
        for answers that carry only these (UpdateSnapshot's, one per watch event)."""
        with self.store.slot(cluster_id) as slot:
            state = slot.require(cluster_id)
            return len(state.nodes), len(state.scopes), len(state.workloads)

    def snapshot(self, cluster_id: str) -> tuple[int, Snapshot]:
        """The generation and the whole snapshot (what PushSnapshot would recreate)."""
        with self.store.slot(cluster_id) as slot:
            state = slot.require(cluster_id)
            return state.generation, state.snapshot()

    def cluster_ids(self) -> list[str]:
        """The clusters this engine holds."""
        return self.store.cluster_ids()

    def clusters(self) -> list[tuple[str, ClusterInfo]]:
        """Every cluster's info (for metrics); clusters deleted meanwhile are skipped."""
        out = []
        for cid in self.cluster_ids():
            try:
                out.append((cid, self.get_cluster(cid)))
            except ClusterNotFound:  # deleted between listing and reading
                continue
        return out

    # --- decisions -----------------------------------------------------------------------

    def admit(
        self,
        cluster_id: str,
        workloads: Sequence[Workload],
        *,
        order: Order = Order.FIFO,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> BatchResult:
        """Quota decisions for a batch (DESIGN §2); admitted ones hold quota, not nodes.

        One workload, the control plane's commonest call ("may this start now?", or start it),
        takes ``_admit_one``; a batch takes ``batch.admit`` in a transaction. ``caller`` and
        ``body_digest``: see ``push_snapshot``.
        """
        self.limits.check_batch(len(workloads), _replicas(workloads))
        digest = (
            body_digest or admit_digest(workloads, order, expected_generation, now_ms)
            if request_id and not dry_run
            else b""
        )
        if len(workloads) == 1:
            result = self._admit_one(
                cluster_id,
                workloads[0],
                dry_run,
                request_id,
                expected_generation,
                now_ms,
                caller,
                digest,
            )
        else:
            result = self._mutate(
                cluster_id,
                "admit",
                request_id,
                expected_generation,
                dry_run,
                lambda state: batch.admit(state, workloads, order, now_ms or self.clock(), dry_run),
                caller=caller,
                digest=digest,
            )
        if self.observer is not None:
            self.observer.observe_results("Admit", result.results)
        return result

    def place(
        self,
        cluster_id: str,
        workloads: Sequence[Workload] = (),
        workload_ids: Sequence[str] = (),
        *,
        order: Order = Order.FIFO,
        options: PlacementOptions | None = None,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> BatchResult:
        """Admit-and-place inline workloads, and place admitted ones by id (DESIGN §3)."""
        return self.place_columnar(
            cluster_id,
            workloads,
            workload_ids,
            order=order,
            options=options,
            dry_run=dry_run,
            expected_generation=expected_generation,
            request_id=request_id,
            now_ms=now_ms,
            caller=caller,
            body_digest=body_digest,
        ).batch_result()

    def place_columnar(
        self,
        cluster_id: str,
        workloads: Sequence[Workload] = (),
        workload_ids: Sequence[str] = (),
        *,
        order: Order = Order.FIFO,
        options: PlacementOptions | None = None,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> ColumnarBatch:
        """``place``, its results as the batch lane makes them (``model.columns``): for a
        caller that writes them out rather than reading values (the Place RPC), the
        ``WorkloadResult`` of each workload placed through the lane is never built.
        ``place`` is this call's ``batch_result()``; a retried ``request_id`` is answered
        the same either way."""
        self.limits.check_batch(len(workloads) + len(workload_ids), _replicas(workloads))
        opts = options or PlacementOptions()
        _check_options(opts)
        result = self._mutate(
            cluster_id,
            "place",
            request_id,
            expected_generation,
            dry_run,
            lambda state: batch.place(
                state, workloads, workload_ids, order, opts, now_ms or self.clock()
            ),
            caller=caller,
            digest=_digest(
                request_id,
                dry_run,
                body_digest,
                lambda: (
                    "place",
                    tuple(workloads),
                    tuple(workload_ids),
                    order,
                    opts,
                    expected_generation,
                    now_ms,
                ),
            ),
        )
        if self.observer is not None:
            self.observer.observe_results(
                "Place", result.held_as_values(), placed=result.placed_in_columns()
            )
        return result

    def release(
        self,
        cluster_id: str,
        workload_ids: Sequence[str],
        *,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        caller: str = "",
        body_digest: bytes = b"",
    ) -> ReleaseResult:
        """Free workloads; unknown ids are listed as not found (idempotent)."""
        self.limits.check_batch(len(workload_ids))
        validate.check(validate.id_list(workload_ids, "workload_ids"))
        return self._mutate(
            cluster_id,
            "release",
            request_id,
            expected_generation,
            dry_run,
            lambda state: batch.release(state, workload_ids),
            caller=caller,
            digest=_digest(
                request_id,
                dry_run,
                body_digest,
                lambda: (
                    "release",
                    tuple(workload_ids),
                    expected_generation,
                ),
            ),
        )

    def reclaim(
        self,
        cluster_id: str,
        workload: Workload,
        *,
        require_placement: bool = False,
        options: PlacementOptions | None = None,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> ReclaimResult:
        """Victims for a pending workload; committed: evict, admit (and place) atomically."""
        opts = options or PlacementOptions()
        _check_options(opts)
        result = self._mutate(
            cluster_id,
            "reclaim",
            request_id,
            expected_generation,
            dry_run,
            lambda state: reclaim.reclaim(
                state, workload, require_placement, opts, now_ms or self.clock(), dry_run
            ),
            caller=caller,
            digest=_digest(
                request_id,
                dry_run,
                body_digest,
                lambda: (
                    "reclaim",
                    workload,
                    require_placement,
                    opts,
                    expected_generation,
                    now_ms,
                ),
            ),
        )
        if self.observer is not None:
            self.observer.observe_reclaim(result)
        return result

    def plan_capacity(
        self,
        cluster_id: str,
        groups: Sequence[NodeGroup],
        workloads: Sequence[Workload] = (),
        *,
        options: PlanOptions | None = None,
    ) -> tuple[int, CapacityPlan]:
        """A capacity plan (DESIGN §8) and the generation it was made at; always a dry run."""
        validate.check_request_ids(cluster_id, "")
        self.limits.check_batch(len(workloads), _replicas(workloads))
        with self.store.slot(cluster_id) as slot:
            state = slot.require(cluster_id)
            return state.generation, plan.plan(state, groups, workloads, options or PlanOptions())

    # --- replay --------------------------------------------------------------------------

    def restore(self, change: Change) -> None:
        """Apply a journaled change as it was committed (start-up recovery; no journaling)."""
        with self.store.claim(change.cluster_id) as slot:
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
                    new = incremental.rebuild(state, change.delta, self.limits.check_sizes)
                    new.generation = change.generation
                    slot.state = new

    # --- internals -----------------------------------------------------------------------

    def _admit_one(
        self,
        cluster_id: str,
        workload: Workload,
        dry_run: bool,
        request_id: str,
        expected_generation: int,
        now_ms: int,
        caller: str,
        digest: bytes,
    ) -> BatchResult:
        """An Admit of one workload: ``_mutate`` with ``batch.admit``, written out.

        It is the commonest call, and in a server every function and object it touches is cold,
        so it skips what the general path needs for a batch: the decision comes first; a dry run
        writes nothing; a commit holds only the ``add`` in a transaction (and opens none without
        a journal: nothing after the checks can fail to undo), and the journal's delta is that
        one workload (what ``ClusterState.changes`` would find). Same checks, answers, state and
        journal as the general path (a Hypothesis property says so).
        """
        validate.check_request_ids(cluster_id, request_id)
        slot = self.store.slot(cluster_id)
        with slot.lock:
            if digest:
                key: RequestKey = (caller, cluster_id, "admit", request_id)
                remembered = self.store.answer(key, digest)
                if remembered is not None:
                    return remembered  # type: ignore[return-value]  # the answer admit stored
            state = slot.require(cluster_id)
            _check_generation(cluster_id, expected_generation, state.generation)
            check_new_workloads(state, (workload,), "workloads")
            result = decide_admit(state.tree, state.workloads, workload, state.capacity)
            if result.decision is Decision.ADMITTED and not dry_run:
                admitted = slot_builders.running(workload, (), now_ms or self.clock())
                if self.journal is None:
                    # No write can fail after the checks above (id new, scope known, no nodes
                    # to allocate), so no transaction is needed to undo one.
                    state.add(admitted)
                    state.generation += 1
                else:
                    generation = state.generation + 1
                    with state.transaction():  # undoes the add when the journal refuses
                        state.add(admitted)
                        delta = Delta(upsert_workloads=(admitted,))
                        self._append(Change(cluster_id, generation, ChangeKind.DELTA, delta=delta))
                    state.generation = generation
                state.task_mix.observe(workload)
                self._checkpoint(state)
            answer = BatchResult(state.generation, (result,))
            if digest:
                self.store.remember(key, digest, answer)
            return answer

    def _mutate(
        self,
        cluster_id: str,
        method: str,
        request_id: str,
        expected_generation: int,
        dry_run: bool,
        compute: Callable[[ClusterState], Callable[[int], T]],
        *,
        caller: str = "",
        digest: bytes = b"",
    ) -> T:
        """Run ``compute`` in a transaction; roll back for a dry run, commit otherwise.

        ``compute`` changes the state and returns a function of the resulting generation that
        builds the answer (results carry the generation). A committed call with a ``digest``
        (made only when it has a ``request_id``) is remembered under ``caller``.
        """
        validate.check_request_ids(cluster_id, request_id)
        slot = self.store.slot(cluster_id)
        with slot.lock:
            key: RequestKey = (caller, cluster_id, method, request_id)
            remembered = self.store.answer(key, digest)  # none for a dry run: no digest
            if remembered is not None:
                return remembered  # type: ignore[return-value]  # the answer this method stored
            state = slot.require(cluster_id)
            _check_generation(cluster_id, expected_generation, state.generation)
            answer = self._transact(cluster_id, state, dry_run, compute)
            self.store.remember(key, digest, answer)
            return answer

    def _transact(
        self,
        cluster_id: str,
        state: ClusterState,
        dry_run: bool,
        compute: Callable[[ClusterState], Callable[[int], T]],
    ) -> T:
        """``compute`` in a transaction: rolled back for a dry run or no change; else the
        change is journaled before the transaction ends (rolled back if the journal refuses),
        then the generation and task mix move (the module docstring's commit protocol)."""
        with state.transaction() as txn:
            finish = compute(state)
            if dry_run or not txn.changed:
                txn.rollback()
                return finish(state.generation)
            delta = _workload_delta(state)
            generation = state.generation + 1
            answer = finish(generation)
            self._append(Change(cluster_id, generation, ChangeKind.DELTA, delta=delta))
            state.generation = generation
        state.task_mix.observe_many(list(map(_WORKLOAD, delta.upsert_workloads)))
        self._checkpoint(state)
        return answer

    def _update_in_place(
        self, state: ClusterState, delta: Delta, dry_run: bool, change: Change
    ) -> bool:
        """``delta`` applied to ``state`` in a transaction, sizes checked, journaled (unless a
        dry run, which rolls back); False, with nothing changed, when the plain path must
        decide. A failed journal write rolls the change back and raises."""
        with state.transaction() as txn:
            done = incremental.apply_in_place(state, delta)
            if done:
                try:
                    self.limits.check_sizes(
                        len(state.nodes), len(state.scopes), len(state.workloads)
                    )
                except SizeLimitExceeded:
                    done = False  # the plain path raises it, or an earlier error, as it always did
            if not done or dry_run:
                txn.rollback()
                return done
            state.generation += 1
            try:
                self._append(change)  # inside the transaction: a failed write rolls it back
            except BaseException:
                state.generation -= 1
                raise
            return True

    def _append(self, change: Change) -> None:
        """Step 3 of the commit protocol: the change made durable, or ``StorageUnavailable``."""
        if self.journal is None:
            return
        try:
            self.journal.append(change)
        except OSError as exc:  # a journal that reports the disk's own error
            raise StorageUnavailable(change.cluster_id, f"{type(exc).__name__}: {exc}") from exc

    def _checkpoint(self, state: ClusterState) -> None:
        """Step 5: a whole snapshot when the journal wants one; a failure only logs (the
        change is durable already, and the journal asks again at the next commit)."""
        journal = self.journal
        if journal is None or not journal.wants_checkpoint(state.cluster_id, state.generation):
            return
        try:
            journal.checkpoint(state.cluster_id, state.generation, state.snapshot())
        except (StorageUnavailable, OSError) as exc:
            log.warning(
                "checkpoint failed; retried at the next commit",
                cluster_id=state.cluster_id,
                generation=state.generation,
                error=str(exc),
            )


def _workload_delta(state: ClusterState) -> Delta:
    """What the open transaction changed, as a delta of workload upserts and removals."""
    upserts, removed = state.changes()
    return Delta(upsert_workloads=tuple(upserts), remove_workload_ids=tuple(removed))


def _check_options(options: PlacementOptions) -> None:
    validate.check(
        validate.placement_options(options.resource_weights, options.coverage, options.task_types)
    )


_REPLICAS = operator.attrgetter("replicas")
_WORKLOAD = operator.attrgetter("workload")


def _replicas(workloads: Sequence[Workload]) -> int:
    """Replicas a batch asks for (out-of-range counts are the validator's to report)."""
    if len(workloads) == 1:  # every Admit of one workload: no list, no min/max
        return min(max(workloads[0].replicas, 0), validate.MAX_REPLICAS)
    counts = list(map(_REPLICAS, workloads))
    if counts and (min(counts) < 0 or max(counts) > validate.MAX_REPLICAS):
        return sum(min(max(r, 0), validate.MAX_REPLICAS) for r in counts)
    return sum(counts)


def _digest(
    request_id: str, dry_run: bool, given: bytes, parts: Callable[[], tuple[object, ...]]
) -> bytes:
    """The body digest a call is remembered with: none without a ``request_id`` or for a dry
    run (never remembered), the caller's own when given, else one of the arguments (``parts``,
    made only then: a Place of 10,000 workloads without an id copies nothing)."""
    if not request_id or dry_run:
        return b""
    return given or request_digest(parts())


def admit_digest(
    workloads: Sequence[Workload], order: Order, expected_generation: int, now_ms: int
) -> bytes:
    """The digest of an Admit's arguments (both of its paths remember under the same one)."""
    return request_digest(("admit", tuple(workloads), order, expected_generation, now_ms))


def _check_generation(cluster_id: str, expected: int, actual: int) -> None:
    if expected < 0:
        raise InvalidArgument.one("expected_generation", "must not be negative")
    if expected and expected != actual:
        raise GenerationConflict(cluster_id, expected, actual)
