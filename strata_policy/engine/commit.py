"""What every use case shares: the cluster's lock, idempotent replay, and journal-first commits.

Every call takes the cluster's lock, replays a remembered answer for a repeated ``request_id``
(per caller, committed calls only; see ``state.store``), checks ``expected_generation``,
computes on the live state inside a transaction (policies are pure functions of that state),
then either rolls back (``dry_run``, or an error) or commits.

Commit protocol (journal first). A failed call changes nothing, including one whose journal
write failed (DESIGN §4), so memory never gets ahead of the journal:

1. The change is made on the live state inside a transaction (``state.transaction()``, or
   ``state.begin()``/``state.end()`` in ``Committer.mutate``; an in-place change:
   Admit, Place, Release, Reclaim; an incremental UpdateSnapshot does the same), or built as a
   new ``ClusterState`` beside the live one (PushSnapshot, a rebuilding UpdateSnapshot), or is
   only planned (DeleteCluster).
2. The ``Change`` is built at ``generation + 1`` and the answer with that generation.
3. ``Committer.append`` writes the change to the journal, still inside the transaction. When
   it raises, the transaction rolls the state back (or the new state is dropped, or the
   cluster stays), the generation, task mix and idempotency memory were never touched, and the
   call fails with ``StorageUnavailable`` (UNAVAILABLE, retryable).
4. Only then does memory commit, with steps that cannot fail: the generation is set, the new
   state swapped in (or the cluster removed), the task mix observes, the answer is remembered.
5. ``Committer.checkpoint`` writes a whole snapshot when the journal wants one. It comes after
   the commit and its failure only logs: the change is already durable as a delta, and the
   next commit tries the checkpoint again.

Nothing between a successful append and the end of step 4 may raise, or memory would fall
behind the journal (a restart would then show a change the caller was told had failed).

``Committer.mutate`` is steps 1-5 for the in-place use cases (Admit, Place, Release, Reclaim);
the snapshot use cases (``engine.snapshots``) follow the same steps with ``append`` and
``checkpoint`` around the state they build.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, TypeVarTuple

import structlog

from strata_policy.errors import GenerationConflict, InvalidArgument, StorageUnavailable
from strata_policy.model import ReclaimResult, RunningWorkload, Snapshot, WorkloadResult
from strata_policy.state.changes import Change, ChangeKind, Delta
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import check_request_ids
from strata_policy.state.store import Limits, RequestKey, Store, request_digest
from strata_policy.state.taskmix import MAX_PENDING

log = structlog.get_logger("strata.engine")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")
_WORKLOAD = operator.attrgetter("workload")


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
        PLACED without reasons (held in columns, ``placement.outputs``)."""

    def observe_reclaim(self, result: ReclaimResult) -> None:
        """One Reclaim's answer."""


class Committer:
    """The clusters (``store``, with its ``limits``), the ``journal``, the ``clock`` and the
    decision ``observer`` one engine holds, and the commit protocol over them: what each use
    case module is handed."""

    def __init__(
        self,
        store: Store,
        clock: Callable[[], int],
        journal: Journal | None,
        observer: DecisionObserver | None,
    ) -> None:
        self.store = store
        self.limits: Limits = store.limits
        self.clock = clock
        self.journal = journal
        self.observer = observer

    def mutate(
        self,
        cluster_id: str,
        method: str,
        request_id: str,
        expected_generation: int,
        dry_run: bool,
        compute: Callable[[ClusterState, *Ts], Callable[[int], T]],
        *args: *Ts,
        caller: str = "",
        digest: bytes = b"",
    ) -> T:
        """Run ``compute(state, *args)`` on the cluster in a transaction: rolled back for a dry
        run or no change, else committed (the module docstring's protocol).

        ``compute`` changes the state and returns a function of the resulting generation that
        builds the answer (results carry the generation). A committed call with a ``digest``
        (made only when it has a ``request_id``: ``body_digest``) is remembered under
        ``caller``, and a repeat of it answered from memory.

        One workload's Admit runs this on every call, so it is written for that: ``args``
        rather than a closure, the transaction opened and closed by two calls
        (``ClusterState.begin``/``end``), the idempotency memory and the generation check
        asked only when the call names them, and the task mix and checkpoint steps taken only
        when they have something to do.
        """
        check_request_ids(cluster_id, request_id)
        slot = self.store.slot(cluster_id)
        with slot.lock:
            if digest:  # none without a request_id or for a dry run: nothing to remember
                key: RequestKey = (caller, cluster_id, method, request_id)
                remembered = self.store.answer(key, digest)
                if remembered is not None:
                    return remembered  # type: ignore[return-value]  # the answer this method stored
            state = slot.require(cluster_id)
            if expected_generation:
                check_generation(cluster_id, expected_generation, state.generation)
            undo = state.begin()
            committed = False
            try:
                finish = compute(state, *args)
                if not dry_run and undo:
                    generation = state.generation + 1
                    answer = finish(generation)
                    if self.journal is None:  # the workloads upserted, for the task mix
                        upserts = state.workloads.held_among(state.touched)
                    else:
                        upserts = self._journal(state, generation)
                    state.generation = generation
                    committed = True
            finally:
                state.end(rollback=not committed)  # an error, a dry run, or nothing changed
            if not committed:  # a call that changed nothing is remembered all the same
                answer = finish(state.generation)
            elif upserts:  # counted when the mix is next read (state.taskmix: FGD only)
                pending = state.task_mix.pending
                pending.append(map(_WORKLOAD, upserts))
                if len(pending) >= MAX_PENDING:
                    state.task_mix.fold()
            if committed and self.journal is not None:
                self.checkpoint(state)
            if digest:
                self.store.remember(key, digest, answer)
            return answer

    def _journal(self, state: ClusterState, generation: int) -> list[RunningWorkload]:
        """Step 3, inside the open transaction: the change appended to the journal (raising,
        and so rolled back, when the journal refuses); returns the workloads the transaction
        upserted (held now, in admission order), for the task mix.

        Without a journal only that set is needed (the mix's counts do not depend on the order
        they come in): ``mutate`` then builds no ``Change`` and no ordered delta
        (``ClusterState.changes``, which sorts)."""
        upserts, removed = state.changes()
        delta = Delta(upsert_workloads=tuple(upserts), remove_workload_ids=tuple(removed))
        self.append(Change(state.cluster_id, generation, ChangeKind.DELTA, delta=delta))
        return upserts

    def append(self, change: Change) -> None:
        """Step 3 of the commit protocol: the change made durable, or ``StorageUnavailable``."""
        if self.journal is None:
            return
        try:
            self.journal.append(change)
        except OSError as exc:  # a journal that reports the disk's own error
            raise StorageUnavailable(change.cluster_id, f"{type(exc).__name__}: {exc}") from exc

    def checkpoint(self, state: ClusterState) -> None:
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


def body_digest(
    request_id: str, dry_run: bool, given: bytes, parts: Callable[[], tuple[object, ...]]
) -> bytes:
    """The body digest a call is remembered with: none without a ``request_id`` or for a dry
    run (never remembered), the caller's own when given, else one of the arguments (``parts``,
    made only then: a Place of 10,000 workloads without an id copies nothing)."""
    if not request_id or dry_run:
        return b""
    return given or request_digest(parts())


def check_generation(cluster_id: str, expected: int, actual: int) -> None:
    """``expected_generation`` is 0 (any) or the cluster's, else ``GenerationConflict``."""
    if expected < 0:
        raise InvalidArgument.one("expected_generation", "must not be negative")
    if expected and expected != actual:
        raise GenerationConflict(cluster_id, expected, actual)
