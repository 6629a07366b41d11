"""The use cases: snapshot → policy → commit, with logs, idempotency and the journal.

``Engine`` is also the public in-process API (the simulator, notebooks and embedders use it)::

    from strata_policy.engine import Engine
    from strata_policy.testing import node, scope, snapshot, workload

    engine = Engine()
    engine.push_snapshot("prod", snapshot([node("node-1", gpus=8), node("node-2", gpus=8)],
                                          [scope("team-a")]))
    result = engine.place("prod", [workload("job-1", "team-a", cpu=4, gpu_milli=8000, replicas=2,
                                            spread_key="kubernetes.io/hostname")])
    result.results[0].placements  # (Placement('node-1', (0..7)), Placement('node-2', (0..7)))

Every call takes the cluster's lock, checks ``expected_generation``, replays a remembered answer
for a repeated ``request_id``, computes on the live state inside a transaction (policies are pure
functions of that state), then either rolls back (``dry_run``, or an error) or commits: the
generation grows by one, the change goes to the journal before the call returns.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import structlog

from strata_policy.capacity import CapacityPlan, NodeGroup, PlanOptions
from strata_policy.errors import ClusterNotFound, GenerationConflict, InvalidArgument
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
from strata_policy.policy import values
from strata_policy.policy.placement import PlacementOptions
from strata_policy.quota import decide_admit
from strata_policy.state import validate
from strata_policy.state.changes import Change, ChangeKind, Delta, apply_delta
from strata_policy.state.cluster import ClusterState
from strata_policy.state.store import Limits, Store
from strata_policy.usecases import batch, plan, reclaim
from strata_policy.usecases.requests import check_new_workloads

log = structlog.get_logger("strata.engine")
T = TypeVar("T")


class Journal(Protocol):
    """Where committed changes go before a call answers (``state.durable.SqliteJournal``)."""

    def append(self, change: Change) -> None:
        """Persist one committed change durably."""

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
    ) -> int:
        """Replace (or create) a cluster's whole state; returns the new generation."""
        _cluster_id(cluster_id)
        self.limits.check_sizes(len(snapshot.nodes), len(snapshot.scopes), len(snapshot.workloads))
        with self.store.slot(cluster_id) as slot:
            remembered = self.store.answer(cluster_id, "push", request_id)
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
            slot.state = state
            self._journal(
                Change(cluster_id, state.generation, ChangeKind.PUSH, snapshot=snapshot), state
            )
            self.store.remember(cluster_id, "push", request_id, state.generation)
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
    ) -> int:
        """Apply a delta (removals, then upserts) and rebuild the dense state once."""
        with self.store.slot(cluster_id) as slot:
            remembered = self.store.answer(cluster_id, "update", request_id)
            if isinstance(remembered, int):
                return remembered
            state = slot.require(cluster_id)
            _check_generation(cluster_id, expected_generation, state.generation)
            new = self._apply_delta(state, delta)
            if dry_run or delta.empty:
                return state.generation
            slot.state = new
            self._journal(Change(cluster_id, new.generation, ChangeKind.DELTA, delta=delta), new)
            self.store.remember(cluster_id, "update", request_id, new.generation)
            return new.generation

    def delete_cluster(
        self, cluster_id: str, *, expected_generation: int = 0, request_id: str = ""
    ) -> int:
        """Forget a cluster; returns the generation it had."""
        with self.store.slot(cluster_id) as slot:
            remembered = self.store.answer(cluster_id, "delete", request_id)
            if isinstance(remembered, int):
                return remembered
            state = slot.require(cluster_id)
            _check_generation(cluster_id, expected_generation, state.generation)
            slot.state = None
            self.store.forget_cluster(cluster_id)
            if self.journal is not None:
                self.journal.append(Change(cluster_id, state.generation, ChangeKind.DELETE))
            self.store.remember(cluster_id, "delete", request_id, state.generation)
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
    ) -> BatchResult:
        """Quota decisions for a batch (DESIGN §2); admitted ones hold quota, not nodes.

        One workload, the control plane's commonest call ("may this start now?", or start it),
        takes ``_admit_one``; a batch takes ``batch.admit`` in a transaction.
        """
        self.limits.check_batch(len(workloads), _replicas(workloads))
        if len(workloads) == 1:
            result = self._admit_one(
                cluster_id, workloads[0], dry_run, request_id, expected_generation, now_ms
            )
        else:
            result = self._mutate(
                cluster_id,
                "admit",
                request_id,
                expected_generation,
                dry_run,
                lambda state: batch.admit(state, workloads, order, now_ms or self.clock(), dry_run),
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
    ) -> ReleaseResult:
        """Free workloads; unknown ids are listed as not found (idempotent)."""
        self.limits.check_batch(len(workload_ids))
        return self._mutate(
            cluster_id,
            "release",
            request_id,
            expected_generation,
            dry_run,
            lambda state: batch.release(state, workload_ids),
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
        _cluster_id(cluster_id)
        self.limits.check_batch(len(workloads), _replicas(workloads))
        with self.store.slot(cluster_id) as slot:
            state = slot.require(cluster_id)
            return state.generation, plan.plan(state, groups, workloads, options or PlanOptions())

    # --- replay --------------------------------------------------------------------------

    def restore(self, change: Change) -> None:
        """Apply a journaled change as it was committed (start-up recovery; no journaling)."""
        with self.store.slot(change.cluster_id) as slot:
            if change.kind is ChangeKind.DELETE:
                slot.state = None
            elif change.kind is ChangeKind.PUSH and change.snapshot is not None:
                slot.state = ClusterState.build(
                    change.cluster_id, change.snapshot, change.generation
                )
            elif change.delta is not None:
                state = slot.require(change.cluster_id)
                new = self._apply_delta(state, change.delta)
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
    ) -> BatchResult:
        """An Admit of one workload: ``_mutate`` with ``batch.admit``, written out.

        It is the commonest call, and in a server every function and object it touches is cold,
        so it skips what the general path needs for a batch: the decision comes first; a dry run
        writes nothing; a commit holds only the ``add`` in a transaction (and opens none without
        a journal: nothing after the checks can fail to undo), and the journal's delta is that
        one workload (what ``ClusterState.changes`` would find). Same checks, answers, state and
        journal as the general path (a Hypothesis property says so).
        """
        _cluster_id(cluster_id)
        slot = self.store.slot(cluster_id)
        with slot.lock:
            if request_id:
                remembered = self.store.answer(cluster_id, "admit", request_id)
                if remembered is not None:
                    return remembered  # type: ignore[return-value]  # the answer admit stored
            state = slot.require(cluster_id)
            _check_generation(cluster_id, expected_generation, state.generation)
            check_new_workloads(state, (workload,), "workloads")
            result = decide_admit(state.tree, state.workloads, workload, state.capacity)
            if result.decision is Decision.ADMITTED and not dry_run:
                admitted = values.running(workload, (), now_ms or self.clock())
                if self.journal is None:
                    # No write can fail after the checks above (id new, scope known, no nodes
                    # to allocate), so no transaction is needed to undo one.
                    state.add(admitted)
                    state.generation += 1
                    state.task_mix.observe(workload)
                else:
                    with state.transaction():
                        state.add(admitted)
                        state.generation += 1
                        state.task_mix.observe(workload)
                        delta = Delta(upsert_workloads=(admitted,))
                        change = Change(cluster_id, state.generation, ChangeKind.DELTA, delta=delta)
                        self._journal(change, state)
            answer = BatchResult(state.generation, (result,))
            if request_id:
                self.store.remember(cluster_id, "admit", request_id, answer)
            return answer

    def _mutate(
        self,
        cluster_id: str,
        method: str,
        request_id: str,
        expected_generation: int,
        dry_run: bool,
        compute: Callable[[ClusterState], Callable[[int], T]],
    ) -> T:
        """Run ``compute`` in a transaction; roll back for a dry run, commit otherwise.

        ``compute`` changes the state and returns a function of the resulting generation that
        builds the answer (results carry the generation).
        """
        _cluster_id(cluster_id)
        slot = self.store.slot(cluster_id)
        with slot.lock:
            remembered = self.store.answer(cluster_id, method, request_id)
            if remembered is not None:
                return remembered  # type: ignore[return-value]  # the answer this method stored
            state = slot.require(cluster_id)
            _check_generation(cluster_id, expected_generation, state.generation)
            answer = self._transact(cluster_id, state, dry_run, compute)
            self.store.remember(cluster_id, method, request_id, answer)
            return answer

    def _transact(
        self,
        cluster_id: str,
        state: ClusterState,
        dry_run: bool,
        compute: Callable[[ClusterState], Callable[[int], T]],
    ) -> T:
        """``compute`` in a transaction: rolled back for a dry run or no change, else committed
        (new generation, task mix, journal) before the answer is built."""
        with state.transaction() as txn:
            finish = compute(state)
            if dry_run or not txn.changed:
                txn.rollback()
                return finish(state.generation)
            delta = _workload_delta(state)
            state.generation += 1
            state.task_mix.observe_many(list(map(_WORKLOAD, delta.upsert_workloads)))
            if self.journal is not None:
                self._journal(
                    Change(cluster_id, state.generation, ChangeKind.DELTA, delta=delta), state
                )
            return finish(state.generation)

    def _apply_delta(self, state: ClusterState, delta: Delta) -> ClusterState:
        snap, violations = apply_delta(state.snapshot(), delta)
        self.limits.check_sizes(len(snap.nodes), len(snap.scopes), len(snap.workloads))
        # The delta's own items first, with the delta's paths; the whole result (parents,
        # cycles, references) only when they are clean, so no problem is reported twice.
        validate.check(violations)
        validate.check(validate.snapshot_shape(snap))
        return ClusterState.build(state.cluster_id, snap, state.generation + 1, state.task_mix)

    def _journal(self, change: Change, state: ClusterState) -> None:
        if self.journal is None:
            return
        self.journal.append(change)
        if self.journal.wants_checkpoint(change.cluster_id, change.generation):
            self.journal.checkpoint(change.cluster_id, change.generation, state.snapshot())


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


def _cluster_id(cluster_id: str) -> None:
    if not cluster_id:
        raise InvalidArgument.one("cluster_id", "must not be empty")


def _check_generation(cluster_id: str, expected: int, actual: int) -> None:
    if expected < 0:
        raise InvalidArgument.one("expected_generation", "must not be negative")
    if expected and expected != actual:
        raise GenerationConflict(cluster_id, expected, actual)
