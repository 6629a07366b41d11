"""PlanCapacity's proto ↔ domain conversion: the catalog in, the plan out."""

from __future__ import annotations

import dataclasses

from strata.policy.v1 import policy_service_pb2 as svc

from strata_policy import capacity
from strata_policy.model.decisions import Policy
from strata_policy.placement.place import PlacementOptions
from strata_policy.service import convert as c

ACTIONS = {
    capacity.ConsolidationAction.REMOVE: svc.CONSOLIDATION_ACTION_REMOVE,
    capacity.ConsolidationAction.REPLACE: svc.CONSOLIDATION_ACTION_REPLACE,
}
KINDS = {
    capacity.CheckKind.GUARANTEE_BACKED: svc.CAPACITY_CHECK_KIND_GUARANTEE_BACKED,
    capacity.CheckKind.N_PLUS_ONE: svc.CAPACITY_CHECK_KIND_N_PLUS_ONE,
}


def group_from_proto(m: svc.NodeGroup) -> capacity.NodeGroup:
    """A catalog group; an absent ``current_count`` is computed by the planner."""
    return capacity.NodeGroup(
        id=m.id,
        template=c.node_from_proto(m.template),
        price_per_hour=m.price_per_hour,
        min_count=m.min_count,
        max_count=m.max_count,
        current_count=m.current_count if m.HasField("current_count") else None,
    )


def options_from_proto(
    m: svc.PlanCapacityRequest, placement: PlacementOptions
) -> capacity.PlanOptions:
    """The plan's options: ``placement`` is the request's policy, weights and fragmentation
    read as Place's are (``servicer.options_from_proto``); policy UNSPECIFIED =
    FRAGMENTATION_AWARE (``PlanOptions``)."""
    if not m.policy:
        placement = dataclasses.replace(placement, policy=Policy.FRAGMENTATION_AWARE)
    return capacity.PlanOptions(placement=placement, disruption_budget=m.disruption_budget)


def plan_to_proto(generation: int, p: capacity.CapacityPlan) -> svc.PlanCapacityResponse:
    """The whole plan."""
    return svc.PlanCapacityResponse(
        generation=generation,
        scale_up=[
            svc.ScaleUp(
                node_group_id=s.node_group_id,
                count=s.count,
                workload_ids=s.workload_ids,
                node_ids=s.node_ids,
            )
            for s in p.scale_up
        ],
        consolidation=[
            svc.Consolidation(
                node_id=x.node_id,
                action=ACTIONS[x.action],
                replacement_group_id=x.replacement_group_id,
                moves=[svc.Move(workload_id=m.workload_id, node_id=m.node_id) for m in x.moves],
                saving_per_hour=x.saving_per_hour,
                evictions=x.evictions,
            )
            for x in p.consolidation
        ],
        unplaceable=[
            svc.Unplaceable(
                workload_id=u.workload_id, reasons=[c.reason_to_proto(r) for r in u.reasons]
            )
            for u in p.unplaceable
        ],
        checks=[
            svc.CapacityCheck(
                kind=KINDS[k.kind],
                domain=k.domain,
                scope_id=k.scope_id,
                resource=k.resource,
                short=k.short,
            )
            for k in p.checks
        ],
        cost_per_hour=p.cost_per_hour,
        lower_bound_per_hour=p.lower_bound_per_hour,
        placements=[
            svc.PlannedPlacement(workload_id=wid, node_ids=ids) for wid, ids in p.placements.items()
        ],
    )
