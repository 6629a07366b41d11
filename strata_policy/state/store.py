"""The server's clusters: one ``ClusterState`` per id, a lock per id, and idempotency memory.

Slots: a cluster id's slot holds its lock and, while the cluster exists, its state. Every
operation on a cluster (read, change, replace, delete) is serialised on that lock; the lock
outlives the state object (a push replaces it), so a replaced state can never be committed to.
Only clusters that exist have a slot: naming an unknown id (a read, a change, a refused push)
keeps nothing, so no client can grow the server's memory by inventing ids. A slot is made by
``claim`` (push, restore), and dropped when the lock is released with no state in it (a
delete, a push that failed); whoever was waiting on a dropped slot finds it empty
(``ClusterNotFound``) or, when claiming, moves on to the current one.

Idempotency (DESIGN §4): a committed call's answer is remembered under (caller, cluster, method,
request id) with a digest of its body; the same key with the same digest is answered from
memory, with another digest it is ``RequestIdReused``. Dry runs are never remembered. The memory
is bounded in entries and in results held, oldest forgotten first, and every key part is bounded
in length (the engine checks ids; a caller identity is a fixed-size digest,
``service.identity``).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sized
from contextlib import contextmanager

from strata_policy.errors import ClusterNotFound, RequestIdReused, SizeLimitExceeded
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import Limits

__all__ = ["Limits", "RequestKey", "Slot", "Store", "request_digest"]

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
        ``results``, or its own ``len`` for one that has it, a ``ColumnarBatch``). A call
        without a ``digest`` is not remembered."""
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
