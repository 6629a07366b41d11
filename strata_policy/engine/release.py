"""The Release use case: free workloads (their quota and their nodes); unknown ids are listed as
not found, so a repeated Release is harmless (idempotent without a ``request_id``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from strata_policy.engine.commit import Committer, call_digest
from strata_policy.model import ReleaseResult
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import check, check_ids, id_list


class ReleaseCase:
    """The Engine's Release (``engine.core`` assembles ``Engine`` from this and the other use
    cases)."""

    commits: Committer  # the engine's clusters, clock, journal and observer

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
        c = self.commits
        c.limits.check_batch(len(workload_ids))
        check(id_list(workload_ids, "workload_ids"))
        return c.mutate(
            cluster_id,
            "release",
            request_id,
            expected_generation,
            dry_run,
            lambda state: free(state, workload_ids),
            caller=caller,
            digest=call_digest(
                request_id,
                dry_run,
                body_digest,
                lambda: ("release", tuple(workload_ids), expected_generation),
            ),
        )


def free(state: ClusterState, workload_ids: Sequence[str]) -> Callable[[int], ReleaseResult]:
    """Free each known workload once; unknown (and repeated) ids are listed as not found."""
    check_ids(workload_ids, "workload_ids")
    released: list[str] = []
    not_found: list[str] = []
    for wid in workload_ids:
        if wid in state.workloads:
            state.remove(wid)
            released.append(wid)
        else:
            not_found.append(wid)
    return lambda generation: ReleaseResult(generation, tuple(released), tuple(not_found))
