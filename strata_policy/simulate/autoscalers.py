"""The autoscalers a replay compares: what each sees (``View``) and answers (``Actions``), the
checks they share (``room``, ``running_on``, ``placeable_elsewhere``) and Strata's planner. The
two baselines, cluster-autoscaler and Karpenter built to their published rules (docs/capacity.md
cites each rule's source), are in ``simulate.autoscale_baselines``.

Each is ``decide(view) -> Actions``: which groups get how many new nodes, which nodes go (their
replicas are evicted and queued again). ``view.pending`` holds only what the ready nodes' free
room and the nodes being provisioned will not hold, so no autoscaler orders twice for one pod.

- **Strata**: ``plan_capacity`` (MOST_ALLOCATED as the scheduler: FGD as the running
  scheduler spreads CPU work, 1.75× the bound on the day against 1.14×; ``fill_by_mix``,
  ``arrange``); its scale-up and its consolidation every pass, disruption budget 10 % of the
  nodes (at least 1). It places what it planned (``arranges``; ``strata_place``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from strata_policy.capacity import NodeGroup, PlanOptions, plan_capacity, scratch
from strata_policy.capacity.catalog import GROUP_LABEL
from strata_policy.model import Policy, RunningWorkload, Workload
from strata_policy.placement.place import PlacementOptions, place_batch
from strata_policy.state.cluster import ClusterState


@dataclass(frozen=True, slots=True)
class View:
    """What an autoscaler sees: the clock, the cluster, what waits, the catalog with each
    group's nodes being provisioned, and when each node was added."""

    now_s: float
    state: ClusterState
    pending: Sequence[Workload]
    groups: Sequence[NodeGroup]
    provisioning: dict[str, int]
    added_at_s: dict[str, float]
    spread_taken: Mapping[str, frozenset[str]] = field(default_factory=dict)
    waited_for: frozenset[str] = frozenset()
    """Nodes that work the autoscaler placed itself waits for (Strata's nominations)."""


@dataclass(slots=True)
class Actions:
    """New nodes per group and nodes to remove. An autoscaler that also places (Strata, DESIGN
    §9) names its new nodes (``names``: per group, the ids of its first new nodes in ``add``
    order) and which pending workload waits for which of them (``nominated``: workload id to
    one node id per replica, new or existing)."""

    add: list[tuple[str, int]] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    names: dict[str, list[str]] = field(default_factory=dict)
    nominated: dict[str, tuple[str, ...]] = field(default_factory=dict)


def room(view: View, g: NodeGroup) -> int:
    """How many more nodes group ``g`` may take (provisioning ones count)."""
    have = sum(1 for nd in view.state.nodes if nd.labels.get(GROUP_LABEL) == g.id)
    return max(g.max_count - have - view.provisioning.get(g.id, 0), 0)


def running_on(state: ClusterState) -> dict[str, list[RunningWorkload]]:
    """The running workloads on each node, by node id (a workload once per node it is on)."""
    on: dict[str, list[RunningWorkload]] = {}
    for rw in state.workloads.values():
        for nid in dict.fromkeys(p.node_id for p in rw.placements):
            on.setdefault(nid, []).append(rw)
    return on


def placeable_elsewhere(
    state: ClusterState, node_ids: Sequence[str], options: PlacementOptions
) -> bool:
    """Whether every replica on ``node_ids`` places on the other schedulable nodes (a
    non-preemptible replica never moves)."""
    m = state.matrix.copy()
    on = running_on(state)
    moving: list[Workload] = []
    for nid in node_ids:
        for rw in on.get(nid, []):
            if not rw.workload.preemptible:
                return False
            here = [p for p in rw.placements if p.node_id == nid]
            scratch.unallocate(m, rw.workload.request, here)
            moving.extend(scratch.one_replica(rw.workload) for _ in here)
    for nid in node_ids:
        scratch.block(m, m.index[nid])
    if not moving:
        return True
    return all(o.placed for o in place_batch(m, moving, options))


class StrataAutoscaler:
    """Strata's planner (see the module docstring).

    Consolidation runs every pass, beside the scale-up (a node that receives pending work is
    never a candidate), and names at most ``ceil(budget_share × nodes)`` nodes (at least one):
    Karpenter's default disruption budget is 10 % of the nodes. Waiting for an empty queue
    (the earlier rule) meant that on openb, where something is nearly always pending, nodes
    outlived their pods for hours; one node a pass could not follow a falling load.

    ``arranges``: Strata places the pending work itself (DESIGN §9: admitted and placed by
    Strata, released pinned to the chosen node), so the plan is made with ``arrange`` and its
    scale-up returns which pending workload lands on which new node; the replay holds those
    workloads for their nodes and places the rest with ``arrange.arrange``."""

    arranges = True

    def __init__(
        self,
        placement: PlacementOptions | None = None,
        name: str = "strata",
        budget_share: float = 0.1,
    ) -> None:
        if not 0.0 <= budget_share <= 1.0:
            raise ValueError(f"budget_share must be in [0, 1], got {budget_share}")
        self.placement = placement or PlacementOptions(policy=Policy.MOST_ALLOCATED)
        self.name = name
        self.budget_share = budget_share

    def decide(self, view: View) -> Actions:
        """One planning pass: scale-up for what waits, consolidation within the budget."""
        groups = [
            replace(g, max_count=max(g.max_count - view.provisioning.get(g.id, 0), 0),
                    min_count=0, current_count=None)
            for g in view.groups
        ]  # fmt: skip
        budget = max(1, math.ceil(self.budget_share * len(view.state.nodes)))
        options = PlanOptions(
            placement=replace(self.placement, task_mix=view.state.task_mix),
            disruption_budget=budget,
            checks=False,
            fill_by_mix=True,
            arrange=True,
            keep=view.waited_for,
        )
        plan = plan_capacity(view.state, groups, view.pending, options)
        out = Actions(add=[(s.node_group_id, s.count) for s in plan.scale_up])
        new: set[str] = set()
        for s in plan.scale_up:
            out.names.setdefault(s.node_group_id, []).extend(s.node_ids)
            new.update(s.node_ids)
        for wid, node_ids in plan.placements.items():
            if new.intersection(node_ids):
                out.nominated[wid] = node_ids
        for c in plan.consolidation:
            out.remove.append(c.node_id)
            if c.replacement_group_id:
                out.add.append((c.replacement_group_id, 1))
        return out
