"""``Engine``: the public in-process API over the use cases, one module each.

The simulator, notebooks, embedders and the gRPC servicer call it::

    from strata_policy.engine import Engine
    from strata_policy.testing import node, scope, snapshot, workload

    engine = Engine()
    engine.push_snapshot("prod", snapshot([node("node-1", gpus=8), node("node-2", gpus=8)],
                                          [scope("team-a")]))
    result = engine.place("prod", [workload("job-1", "team-a", cpu=4, gpu_milli=8000, replicas=2,
                                            spread_key="kubernetes.io/hostname")])
    result.results[0].placements  # (Placement('node-1', (0..7)), Placement('node-2', (0..7)))

Each method delegates to its use case: ``snapshots`` (push, update, delete, reads, replay),
``admit``, ``place`` (and ``place_one_by_one``), ``release``, ``reclaim``, ``plan``;
every one of them runs under ``commit``'s protocol (the cluster's lock, idempotent replay,
journal-first commits), which ``commit``'s docstring states.

``caller`` and ``body_digest`` scope and check a ``request_id`` (``state.store``): the caller's
identity, and a digest of the request as sent (the service passes the wire bytes' digest;
without one the engine digests the arguments, which for a large snapshot costs about as much
as converting it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from strata_policy.capacity import CapacityPlan, NodeGroup, PlanOptions
from strata_policy.engine import admit as admit_
from strata_policy.engine import place as place_
from strata_policy.engine import plan, reclaim, release, snapshots
from strata_policy.engine.commit import Committer, DecisionObserver, Journal
from strata_policy.errors import ClusterNotFound
from strata_policy.model import (
    BatchResult,
    ClusterInfo,
    Order,
    ReclaimResult,
    ReleaseResult,
    Snapshot,
    Workload,
)
from strata_policy.placement.outputs import ColumnarBatch
from strata_policy.placement.place import PlacementOptions
from strata_policy.state.changes import Change, Delta
from strata_policy.state.store import Limits, Store

__all__ = ["DecisionObserver", "Engine", "Journal", "wall_clock_ms"]


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

    # --- snapshots (engine.snapshots) ----------------------------------------------------

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
        return snapshots.push(
            self.commits,
            cluster_id,
            snapshot,
            dry_run=dry_run,
            expected_generation=expected_generation,
            request_id=request_id,
            caller=caller,
            given_digest=body_digest,
        )

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
        return snapshots.update(
            self.commits,
            cluster_id,
            delta,
            dry_run=dry_run,
            expected_generation=expected_generation,
            request_id=request_id,
            caller=caller,
            given_digest=body_digest,
            in_place_only=in_place_only,
        )

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
        return snapshots.delete(
            self.commits,
            cluster_id,
            expected_generation=expected_generation,
            request_id=request_id,
            caller=caller,
            given_digest=body_digest,
        )

    def restore(self, change: Change) -> None:
        """Apply a journaled change as it was committed (start-up recovery; no journaling)."""
        snapshots.restore(self.commits, change)

    def get_cluster(self, cluster_id: str) -> ClusterInfo:
        """Generation, counts, the scope tree with usage, and capacity/allocation totals."""
        return snapshots.read(self.commits, cluster_id, snapshots.info)

    def counts(self, cluster_id: str) -> tuple[int, int, int]:
        """Nodes, scopes and workloads the cluster holds: ``get_cluster``'s counts in O(1),
        for answers that carry only these (UpdateSnapshot's, one per watch event)."""
        return snapshots.read(
            self.commits, cluster_id, lambda s: (len(s.nodes), len(s.scopes), len(s.workloads))
        )

    def snapshot(self, cluster_id: str) -> tuple[int, Snapshot]:
        """The generation and the whole snapshot (what PushSnapshot would recreate)."""
        return snapshots.read(self.commits, cluster_id, lambda s: (s.generation, s.snapshot()))

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
        """Quota decisions for a batch (DESIGN §2); admitted ones hold quota, not nodes
        (``engine.admit``)."""
        return admit_.admit(
            self.commits,
            cluster_id,
            workloads,
            order=order,
            dry_run=dry_run,
            expected_generation=expected_generation,
            request_id=request_id,
            now_ms=now_ms,
            caller=caller,
            given_digest=body_digest,
        )

    def place(
        self,
        cluster_id: str,
        workloads: Sequence[Workload] = (),
        workload_ids: Sequence[str] = (),
        *,
        tags: Sequence[object] | None = None,
        order: Order = Order.FIFO,
        options: PlacementOptions | None = None,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> BatchResult:
        """Admit-and-place inline workloads, and place admitted ones by id (DESIGN §3); ``tags``
        optionally groups the inline workloads (``engine.place``'s docstring)."""
        return self.place_columnar(
            cluster_id,
            workloads,
            workload_ids,
            tags=tags,
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
        tags: Sequence[object] | None = None,
        order: Order = Order.FIFO,
        options: PlacementOptions | None = None,
        dry_run: bool = False,
        expected_generation: int = 0,
        request_id: str = "",
        now_ms: int = 0,
        caller: str = "",
        body_digest: bytes = b"",
    ) -> ColumnarBatch:
        """``place``, its results as the batch lane makes them (``placement.outputs``): for a
        caller that writes them out rather than reading values (the Place RPC), the
        ``WorkloadResult`` of each workload placed through the lane is never built.
        ``place`` is this call's ``batch_result()``; a retried ``request_id`` is answered
        the same either way."""
        return place_.place(
            self.commits,
            cluster_id,
            workloads,
            workload_ids,
            tags=tags,
            order=order,
            options=options or PlacementOptions(),
            dry_run=dry_run,
            expected_generation=expected_generation,
            request_id=request_id,
            now_ms=now_ms,
            caller=caller,
            given_digest=body_digest,
        )

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
        return release.release(
            self.commits,
            cluster_id,
            workload_ids,
            dry_run=dry_run,
            expected_generation=expected_generation,
            request_id=request_id,
            caller=caller,
            given_digest=body_digest,
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
        return reclaim.reclaim(
            self.commits,
            cluster_id,
            workload,
            require_placement=require_placement,
            options=options or PlacementOptions(),
            dry_run=dry_run,
            expected_generation=expected_generation,
            request_id=request_id,
            now_ms=now_ms,
            caller=caller,
            given_digest=body_digest,
        )

    def plan_capacity(
        self,
        cluster_id: str,
        groups: Sequence[NodeGroup],
        workloads: Sequence[Workload] = (),
        *,
        options: PlanOptions | None = None,
    ) -> tuple[int, CapacityPlan]:
        """A capacity plan (DESIGN §8) and the generation it was made at; always a dry run."""
        return plan.plan(self.commits, cluster_id, groups, workloads, options or PlanOptions())
