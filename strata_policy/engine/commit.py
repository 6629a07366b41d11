"""What every use case shares: the cluster's lock, idempotent replay, and journal-first commits.

Every call takes the cluster's lock, replays a remembered answer for a repeated ``request_id``
(per caller, committed calls only; see ``Store``), checks ``expected_generation``,
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

The clusters (``Store``): a cluster id's ``Slot`` holds its lock and, while the cluster exists,
its state. Every operation on a cluster (read, change, replace, delete) is serialised on that
lock; the lock outlives the state object (a push replaces it), so a replaced state can never be
committed to. Only clusters that exist have a slot: naming an unknown id (a read, a change, a
refused push) keeps nothing, so no client can grow the server's memory by inventing ids. A slot
is made by ``Store.claim`` (push, restore), and dropped when the lock is released with no state
in it (a delete, a push that failed); whoever was waiting on a dropped slot finds it empty
(``ClusterNotFound``) or, when claiming, moves on to the current one.

Idempotency (DESIGN §4): a committed call's answer is remembered under (caller, cluster, method,
request id) with a digest of its body; the same key with the same digest is answered from
memory, with another digest it is ``RequestIdReused``. Dry runs are never remembered. The memory
is bounded in entries and in results held, oldest forgotten first, and every key part is bounded
in length (the engine checks ids; a caller identity is a fixed-size digest,
``service.identity``). The store lives here, with the protocol that takes its locks and answers
from its memory: one module holds the commit's concurrency and idempotency.
"""

from __future__ import annotations

import hashlib
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence, Sized
from contextlib import contextmanager
from typing import Protocol, TypeVar, TypeVarTuple

import structlog

from strata_policy.errors import (
    ClusterNotFound,
    GenerationConflict,
    InvalidArgument,
    RequestIdReused,
    SizeLimitExceeded,
    StorageUnavailable,
)
from strata_policy.model import ReclaimResult, RunningWorkload, Snapshot, WorkloadResult
from strata_policy.state.changes import Change, ChangeKind, Delta
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import Limits, check_request_ids
from strata_policy.state.taskmix import MAX_PENDING

log = structlog.get_logger("strata.engine")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")
_WORKLOAD = operator.attrgetter("workload")


RequestKey = tuple[str, str, str, str]
"""(caller identity, cluster id, method, request id): what an answer is remembered under."""


def request_digest(body: object) -> bytes:
    """A 128-bit digest of a request: of its bytes, or of the ``repr`` of its arguments (the
    model's values are frozen dataclasses whose ``repr`` shows every field)."""
    data = body if isinstance(body, bytes) else repr(body).encode()
    return hashlib.blake2b(data, digest_size=16).digest()


class Slot:
    """A cluster id's place in the store: its lock and, while it exists, its state.

    ``with slot:`` holds the lock; leaving it with no state drops the slot from its store.
    """

    __slots__ = ("_store", "cluster_id", "lock", "state")

    def __init__(self, store: Store, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.lock = threading.Lock()
        self.state: ClusterState | None = None
        self._store = store

    def __enter__(self) -> Slot:
        self.lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.state is None:
            self._store._drop(self)
        self.lock.release()

    def require(self, cluster_id: str) -> ClusterState:
        """The state, or ``ClusterNotFound``."""
        if self.state is None:
            raise ClusterNotFound(cluster_id)
        return self.state


class Store:
    """Clusters by id, with idempotency memory for retried requests."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._slots: dict[str, Slot] = {}
        self._guard = threading.Lock()
        self._answers: OrderedDict[RequestKey, tuple[bytes, object, int]] = OrderedDict()
        self._weight = 0  # Σ results held by the remembered answers

    # --- slots ---------------------------------------------------------------------------

    def slot(self, cluster_id: str) -> Slot:
        """The existing cluster's slot (``with`` it to hold its lock), or ``ClusterNotFound``.

        Nothing is created for an unknown id. The slot may be emptied while the caller waits
        for its lock (a delete): ``Slot.require`` under the lock says so.
        """
        slot = self._slots.get(cluster_id)
        if slot is None:
            raise ClusterNotFound(cluster_id)
        return slot

    @contextmanager
    def claim(self, cluster_id: str) -> Iterator[Slot]:
        """The id's current slot, made if absent, locked for the ``with`` block.

        Loops until the slot it locked is still the id's slot (one dropped while this waited
        is left behind). Left empty, the slot is dropped again on exit, so a refused or dry
        push of a new cluster keeps nothing.
        """
        while True:
            with self._guard:
                slot = self._slots.get(cluster_id)
                if slot is None:
                    slot = self._slots[cluster_id] = Slot(self, cluster_id)
            slot.lock.acquire()
            if self._slots.get(cluster_id) is slot:
                break
            slot.lock.release()
        try:
            yield slot
        finally:
            slot.__exit__()

    def _drop(self, slot: Slot) -> None:
        """Forget an empty slot (called with its lock held)."""
        with self._guard:
            if self._slots.get(slot.cluster_id) is slot:
                del self._slots[slot.cluster_id]

    def cluster_ids(self) -> list[str]:
        """Ids of the clusters that exist, sorted."""
        with self._guard:
            return sorted(cid for cid, s in self._slots.items() if s.state is not None)

    def check_new_cluster(self, cluster_id: str) -> None:
        """Raise when creating ``cluster_id`` would exceed ``max_clusters``."""
        ids = self.cluster_ids()
        if cluster_id not in ids and len(ids) + 1 > self.limits.max_clusters:
            raise SizeLimitExceeded("max_clusters", len(ids) + 1, self.limits.max_clusters)

    # --- idempotency ---------------------------------------------------------------------

    def answer(self, key: RequestKey, digest: bytes) -> object | None:
        """The answer remembered for ``key``, or ``None``; ``RequestIdReused`` when it was
        given to a request whose body had another ``digest``. No ``digest`` (a call without a
        ``request_id``, or a dry run) is never remembered: ``None``."""
        if not digest:
            return None
        with self._guard:
            found = self._answers.get(key)
        if found is None:
            return None
        if found[0] != digest:
            raise RequestIdReused(key[3], key[2])
        return found[1]

    def remember(self, key: RequestKey, digest: bytes, answer: object) -> None:
        """Remember a committed call's answer for retries, oldest forgotten first, bounded both
        in entries and in results held (a batch answer weighs its number of results: its
        ``results``, or its own ``len`` for one that has it, a ``ColumnarBatch``). A call without
        a ``digest`` is not remembered."""
        if not digest:
            return
        held = answer if isinstance(answer, Sized) else getattr(answer, "results", ())
        weight = max(len(held), 1)
        with self._guard:
            old = self._answers.pop(key, None)
            self._weight -= old[2] if old is not None else 0
            self._answers[key] = (digest, answer, weight)
            self._weight += weight
            while self._answers and (
                len(self._answers) > self.limits.idempotency_entries
                or self._weight > self.limits.idempotency_results
            ):
                _, (_, _, dropped) = self._answers.popitem(last=False)
                self._weight -= dropped

    def remembered(self) -> int:
        """How many answers are remembered (for tests and metrics)."""
        return len(self._answers)

    def forget_cluster(self, cluster_id: str) -> None:
        """Drop remembered answers of a deleted cluster, whoever the caller was."""
        with self._guard:
            for key in [k for k in self._answers if k[1] == cluster_id]:
                self._weight -= self._answers.pop(key)[2]


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
        (made only when it has a ``request_id``: ``call_digest``) is remembered under
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


def call_digest(
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
