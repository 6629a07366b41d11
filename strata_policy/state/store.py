"""The server's clusters: one ``ClusterState`` per id, a lock per id, and size limits.

The per-id lock outlives the state it guards (a push replaces the state object), so every
operation on a cluster — read, change, replace, delete — is serialised on that lock, and a
replaced state can never be committed to.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sized

from strata_policy.errors import ClusterNotFound, SizeLimitExceeded

__all__ = ["Limits", "Slot", "Store"]
from strata_policy.state.cluster import ClusterState
from strata_policy.state.limits import Limits


class Slot:
    """A cluster id's place in the store: its lock and, while it exists, its state."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: ClusterState | None = None

    def __enter__(self) -> Slot:
        self.lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
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
        self._answers: OrderedDict[tuple[str, str, str], tuple[object, int]] = OrderedDict()
        self._weight = 0  # Σ results held by the remembered answers

    def slot(self, cluster_id: str) -> Slot:
        """The cluster id's slot; ``with store.slot(id) as slot`` holds its lock meanwhile.

        (A plain class rather than a generator context manager: this is on every call's path.)
        """
        slot = self._slots.get(cluster_id)
        if slot is None:
            with self._guard:
                slot = self._slots.setdefault(cluster_id, Slot())
        return slot

    def cluster_ids(self) -> list[str]:
        """Ids of the clusters that exist, sorted."""
        with self._guard:
            return sorted(cid for cid, s in self._slots.items() if s.state is not None)

    def check_new_cluster(self, cluster_id: str) -> None:
        """Raise when creating ``cluster_id`` would exceed ``max_clusters``."""
        count = len(self.cluster_ids())
        if cluster_id not in self.cluster_ids() and count + 1 > self.limits.max_clusters:
            raise SizeLimitExceeded("max_clusters", count + 1, self.limits.max_clusters)

    def answer(self, cluster_id: str, method: str, request_id: str) -> object | None:
        """The first answer given to this request id, if remembered."""
        if not request_id:
            return None
        with self._guard:
            found = self._answers.get((cluster_id, method, request_id))
            return found[0] if found is not None else None

    def remember(self, cluster_id: str, method: str, request_id: str, answer: object) -> None:
        """Remember an answer for retries, oldest forgotten first, bounded both in entries and in
        results held (a batch answer weighs its number of results: its ``results``, or its
        own ``len`` for one that has it, ``model.ColumnarBatch``)."""
        if not request_id:
            return
        held = answer if isinstance(answer, Sized) else getattr(answer, "results", ())
        weight = max(len(held), 1)
        with self._guard:
            old = self._answers.pop((cluster_id, method, request_id), None)
            self._weight -= old[1] if old is not None else 0
            self._answers[(cluster_id, method, request_id)] = (answer, weight)
            self._weight += weight
            while self._answers and (
                len(self._answers) > self.limits.idempotency_entries
                or self._weight > self.limits.idempotency_results
            ):
                _, (_, dropped) = self._answers.popitem(last=False)
                self._weight -= dropped

    def forget_cluster(self, cluster_id: str) -> None:
        """Drop remembered answers of a deleted cluster."""
        with self._guard:
            for key in [k for k in self._answers if k[0] == cluster_id]:
                self._weight -= self._answers.pop(key)[1]
