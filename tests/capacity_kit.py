"""Shared helpers for the capacity tests: build a cluster state and plan on it."""

from __future__ import annotations

from collections.abc import Sequence

from strata_policy.capacity import CapacityPlan, NodeGroup, PlanOptions, plan_capacity
from strata_policy.model import Node, RunningWorkload, Scope, Workload
from strata_policy.model.decisions import Policy
from strata_policy.placement.place import PlacementOptions
from strata_policy.state.cluster import ClusterState
from strata_policy.testing import snapshot


def state_of(
    nodes: Sequence[Node],
    scopes: Sequence[Scope],
    running: Sequence[RunningWorkload] = (),
) -> ClusterState:
    """A cluster state from lists."""
    return ClusterState.build("c", snapshot(list(nodes), list(scopes), list(running)), 1)


def plan(
    nodes: Sequence[Node],
    scopes: Sequence[Scope],
    groups: Sequence[NodeGroup],
    pending: Sequence[Workload] = (),
    running: Sequence[RunningWorkload] = (),
    budget: int = 0,
    policy: Policy = Policy.MOST_ALLOCATED,
    consolidate: bool = True,
) -> CapacityPlan:
    """Plan on a fresh state built from the lists."""
    options = PlanOptions(
        placement=PlacementOptions(policy=policy),
        disruption_budget=budget,
        consolidate=consolidate,
    )
    return plan_capacity(state_of(nodes, scopes, running), groups, pending, options)
