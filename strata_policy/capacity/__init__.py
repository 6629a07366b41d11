"""Capacity plans (DESIGN §8): scale-up, consolidation, capacity checks and the LP bound,
as pure functions of a cluster's state and a node-group catalog, built on ``policy``."""

from strata_policy.capacity.catalog import GROUP_LABEL, MAX_NODE_GROUPS, NodeGroup
from strata_policy.capacity.plan import (
    CapacityCheck,
    CapacityPlan,
    CheckKind,
    Consolidation,
    ConsolidationAction,
    Move,
    PlanOptions,
    ScaleUp,
    Unplaceable,
)
from strata_policy.capacity.planner import plan_capacity

__all__ = [
    "GROUP_LABEL",
    "MAX_NODE_GROUPS",
    "CapacityCheck",
    "CapacityPlan",
    "CheckKind",
    "Consolidation",
    "ConsolidationAction",
    "Move",
    "NodeGroup",
    "PlanOptions",
    "ScaleUp",
    "Unplaceable",
    "plan_capacity",
]
