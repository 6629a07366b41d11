"""The PlanCapacity use case: always a dry run, so it reads the state and changes nothing.

The pending workloads are validated as Admit's are (known scope, new ids, valid fields); the
catalog by ``capacity.catalog.validate_catalog``; then ``capacity.plan_capacity`` plans on the
live state under the cluster's lock (it copies what it simulates on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from strata_policy.capacity import CapacityPlan, NodeGroup, PlanOptions, plan_capacity
from strata_policy.engine.commit import Committer
from strata_policy.errors import InvalidArgument
from strata_policy.model import Workload
from strata_policy.state.cluster import ClusterState
from strata_policy.state.request_checks import (
    check_new_workloads,
    check_options,
    check_request_ids,
    replicas,
)

MAX_DISRUPTION_BUDGET = 10_000


class PlanCase:
    """The Engine's PlanCapacity (``engine.core`` assembles ``Engine`` from this and the other
    use cases)."""

    commits: Committer  # the engine's clusters, clock, journal and observer

    def plan_capacity(
        self,
        cluster_id: str,
        groups: Sequence[NodeGroup],
        workloads: Sequence[Workload] = (),
        *,
        options: PlanOptions | None = None,
    ) -> tuple[int, CapacityPlan]:
        """A capacity plan (DESIGN §8) and the generation it was made at; always a dry run."""
        c = self.commits
        check_request_ids(cluster_id, "")
        c.limits.check_batch(len(workloads), replicas(workloads))
        with c.store.slot(cluster_id) as slot:
            state = slot.require(cluster_id)
            return state.generation, compute(state, groups, workloads, options or PlanOptions())


def compute(
    state: ClusterState,
    groups: Sequence[NodeGroup],
    workloads: Sequence[Workload],
    options: PlanOptions,
) -> CapacityPlan:
    """The plan for ``state``; raises ``InvalidArgument`` for bad options or workloads."""
    if not 0 <= options.disruption_budget <= MAX_DISRUPTION_BUDGET:
        raise InvalidArgument.one("disruption_budget", f"must be in [0, {MAX_DISRUPTION_BUDGET}]")
    p = options.placement
    check_options(p)
    check_new_workloads(state, workloads, "workloads")
    if p.task_mix is None and not p.task_types:  # FGD measures against the cluster's mix
        options = replace(options, placement=replace(p, task_mix=state.task_mix))
    return plan_capacity(state, groups, workloads, options)
