"""The Admit use case (DESIGN §2): quota decisions for a batch; admitted workloads hold quota, not
nodes.

Each workload is decided in the batch order (FIFO, PRIORITY or FAIR, re-evaluated after every
decision) and the admitted ones are charged to the tree, in ``engine.commit``'s transaction.

One workload is the control plane's commonest call ("may this start now?", or start it), and
over gRPC it must cost about what a Health check costs (DESIGN §6). It takes the same path as a
batch, which is cheap for one: no ordering (one index), the batch check skipped for the
per-field one, and a dry run writes nothing at all (the last decision is never applied), so the
transaction has nothing to roll back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from strata_policy.engine.commit import Committer, request_digest
from strata_policy.model import (
    BatchResult,
    Decision,
    Order,
    RunningWorkload,
    Workload,
    WorkloadResult,
)
from strata_policy.quota import batch_order, decide_admit
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import check_new_workloads, replicas

_ADMITTED = Decision.ADMITTED


class AdmitCase:
    """The Engine's Admit (``engine.core`` assembles ``Engine`` from this and the other use
    cases)."""

    commits: Committer  # the engine's clusters, clock, journal and observer

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
        c = self.commits
        c.limits.check_batch(len(workloads), replicas(workloads))
        digest = (
            body_digest or admit_digest(workloads, order, expected_generation, now_ms)
            if request_id and not dry_run
            else b""
        )
        result = c.mutate(
            cluster_id,
            "admit",
            request_id,
            expected_generation,
            dry_run,
            decide,
            workloads,
            order,
            now_ms,
            dry_run,
            c.clock,
            caller=caller,
            digest=digest,
        )
        if c.observer is not None:
            c.observer.observe_results("Admit", result.results)
        return result


def decide(
    state: ClusterState,
    workloads: Sequence[Workload],
    order: Order,
    now_ms: int,
    dry_run: bool,
    clock: Callable[[], int],
) -> Callable[[int], BatchResult]:
    """Decide a batch; ADMITTED ones are charged to the tree (no nodes), admitted at
    ``now_ms``, or at ``clock()`` (read once, when one is admitted) when that is 0.

    In a dry run the last decision is not applied: nothing after it could see it, and the
    transaction would undo it anyway (this keeps a one-workload dry run free of writes).
    """
    check_new_workloads(state, workloads, "workloads")
    results: list[WorkloadResult] = []
    last = len(workloads) - 1
    indexes = (0,) if last == 0 else batch_order(state.tree, workloads, order, state.capacity)
    tree, held, capacity = state.tree, state.workloads, state.capacity
    for i in indexes:
        w = workloads[i]
        result = decide_admit(tree, held, w, capacity)
        if result.decision is _ADMITTED and not (dry_run and len(results) == last):
            now_ms = now_ms or clock()
            state.add(RunningWorkload(w, (), now_ms))
        results.append(result)
    return partial(BatchResult, results=tuple(results))


def admit_digest(
    workloads: Sequence[Workload], order: Order, expected_generation: int, now_ms: int
) -> bytes:
    """The digest of an Admit's arguments, when the caller gives none of its request's bytes."""
    return request_digest(("admit", tuple(workloads), order, expected_generation, now_ms))
