"""``Engine``: the public in-process API, assembled from the use cases, one module each.

The simulator, notebooks, embedders and the gRPC servicer call it::

    from strata_policy.engine import Engine
    from strata_policy.testing import node, scope, snapshot, workload

    engine = Engine()
    engine.push_snapshot("prod", snapshot([node("node-1", gpus=8), node("node-2", gpus=8)],
                                          [scope("team-a")]))
    result = engine.place("prod", [workload("job-1", "team-a", cpu=4, gpu_milli=8000, replicas=2,
                                            spread_key="kubernetes.io/hostname")])
    result.results[0].placements  # (Placement('node-1', (0..7)), Placement('node-2', (0..7)))

Each use case module defines its part of ``Engine`` as a class of methods, and ``Engine`` is
their union: ``snapshots`` (``push_snapshot``, ``update_snapshot``, ``delete_cluster``,
``restore`` and the reads), ``admit``, ``place`` (``place``, ``place_columnar``; one workload
at a time in ``place_one_by_one``), ``release``, ``reclaim``, ``plan`` (``plan_capacity``). A
method is its use case's code, not a call forwarded to it. Every one of them runs under
``engine.commit``'s protocol (the cluster's lock, idempotent replay, journal-first commits)
through the engine's ``commits``, which holds the clusters (``store``), their ``limits``, the
``clock``, the ``journal`` and the decision ``observer``.

``caller`` and ``body_digest`` scope and check a ``request_id`` (``engine.commit``): the
caller's identity, and a digest of the request as sent (the service passes the wire bytes'
digest; without one the engine digests the arguments, which for a large snapshot costs about as
much as converting it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from strata_policy.engine.admit import AdmitCase
from strata_policy.engine.commit import Committer, DecisionObserver, Journal, Store
from strata_policy.engine.place import PlaceCase
from strata_policy.engine.plan import PlanCase
from strata_policy.engine.reclaim import ReclaimCase
from strata_policy.engine.release import ReleaseCase
from strata_policy.engine.snapshots import SnapshotCases
from strata_policy.state.request_checks import Limits

__all__ = ["DecisionObserver", "Engine", "Journal", "wall_clock_ms"]


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default clock."""
    return time.time_ns() // 1_000_000


class Engine(SnapshotCases, AdmitCase, PlaceCase, ReleaseCase, ReclaimCase, PlanCase):
    """Clusters in memory (and in a journal, when given); see the module docstring."""

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        journal: Journal | None = None,
        observer: DecisionObserver | None = None,
    ) -> None:
        self.commits = Committer(Store(limits), clock, journal, observer)
        self.store = self.commits.store
        self.limits = self.commits.limits

    @property
    def clock(self) -> Callable[[], int]:
        """Milliseconds now, for a call that names no ``now_ms``."""
        return self.commits.clock

    @property
    def journal(self) -> Journal | None:
        """Where commits go first (``engine.commit``), if anywhere."""
        return self.commits.journal

    @property
    def observer(self) -> DecisionObserver | None:
        """What counts the decisions, if anything."""
        return self.commits.observer
