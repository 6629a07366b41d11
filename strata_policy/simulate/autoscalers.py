"""The autoscalers a replay compares: Strata's planner and two baselines built to their
published rules (docs/capacity.md cites each rule's source).

Each is ``decide(view) -> Actions``: which groups get how many new nodes, which nodes go (their
replicas are evicted and queued again). ``view.pending`` holds only what the ready nodes' free
room and the nodes being provisioned will not hold, so no autoscaler orders twice for one pod.

- **cluster-autoscaler**: scale-up runs the binpacking estimator (pods in decreasing
  ``cpu/nodeCPU + mem/nodeMem`` order, first fit over the new nodes, a new node when none fits)
  for every group with room, drops options that hold nothing, and lets the expander choose one
  option per loop: ``least-waste`` (least ``wastedCPU + wastedMem`` over the option's nodes) or
  ``price`` (least ``(C + X)/(T + X)``, C the option's price, T its pods at the GCE per-resource
  prices, X a 500m/500MiB pod's; GPU nodes all score 1000×, so ties among them go by price).
  Scale-down: a node whose utilisation (GPU nodes: GPU requests / GPUs; others: the larger of
  CPU and memory) is ≤ 0.5 for 10 minutes, whose pods all place on the other nodes, goes; empty
  ones up to 10 a loop, non-empty ones one at a time; none within 10 minutes of a scale-up.
- **Karpenter**: pending pods in decreasing CPU, then memory order join the planned node with
  fewest pods where some type still fits all of them, else start a new one; each planned node
  launches the cheapest type that fits its pods. Consolidation, one action per pass: delete every
  empty node; else multi-node (the largest prefix, up to 10, of the nodes sorted by price per
  disruption whose pods all place elsewhere, deleted); else single-node (the first node whose
  pods place elsewhere is deleted, or that fit one node of a cheaper type is replaced).
- **Strata**: ``plan_capacity`` (MOST_ALLOCATED as the scheduler: FGD as the running
  scheduler spreads CPU work, 1.75× the bound on the day against 1.14×; ``fill_by_mix``,
  ``arrange``); its scale-up and its consolidation every pass, disruption budget 10 % of the
  nodes (at least 1). It places what it planned (``arranges``; ``strata_place``).

The baselines schedule with LEAST_ALLOCATED (kube's default) or MOST_ALLOCATED.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from strata_policy.capacity import NodeGroup, PlanOptions, plan_capacity, scratch
from strata_policy.capacity.catalog import GROUP_LABEL, could_hold
from strata_policy.capacity.consolidate import fresh_fit
from strata_policy.model import HOSTNAME_KEY, Policy, RunningWorkload, Workload
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU
from strata_policy.placement.place import PlacementOptions, place_batch
from strata_policy.state.cluster import ClusterState

MIB = 1024**2
KUBE = PlacementOptions(policy=Policy.LEAST_ALLOCATED)  # kube-scheduler's default scoring


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


def _running_on(state: ClusterState) -> dict[str, list[RunningWorkload]]:
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
    on = _running_on(state)
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


@dataclass
class ClusterAutoscaler:
    """cluster-autoscaler with the binpacking estimator and one expander."""

    expander: str = "least-waste"
    unneeded_s: float = 600.0
    threshold: float = 0.5
    placement: PlacementOptions = KUBE
    _since: dict[str, float] = field(default_factory=dict)
    _last_up_s: float = -1e18

    @property
    def name(self) -> str:
        """The table's name for it."""
        most = self.placement.policy is Policy.MOST_ALLOCATED
        return f"ca-{self.expander}" + ("+most-allocated" if most else "")

    def decide(self, view: View) -> Actions:
        """One loop: a scale-up option if anything waits, else scale-down."""
        if view.pending:
            option = self._scale_up(view)
            if option is not None:
                self._last_up_s = view.now_s
                return Actions(add=[option])
            return Actions()
        return Actions(remove=self._scale_down(view))

    def _scale_up(self, view: View) -> tuple[str, int] | None:
        best: tuple[tuple[float, str], str, int] | None = None
        for g in view.groups:
            limit = room(view, g)
            if limit <= 0:
                continue
            nodes, pods = estimate_binpacking(g, view.pending, limit, view.spread_taken)
            if not nodes:
                continue
            score = self._score(g, nodes, pods, len(view.state.nodes))
            key = (score, g.id)
            if best is None or key < best[0]:
                best = (key, g.id, nodes)
        return None if best is None else (best[1], best[2])

    def _score(self, g: NodeGroup, nodes: int, pods: list[Workload], cluster: int) -> float:
        cap = g.template.capacity
        if self.expander == "least-waste":
            total = 0.0
            for r in (CPU, MEMORY):
                have = cap.get(r, 0) * nodes
                used = sum(p.request.get(r, 0) for p in pods)
                total += (have - used) / have if have else 0.0
            return total
        c = g.price_per_hour * nodes
        t = sum(_pod_price(p) for p in pods)
        x = _pod_price(Workload("x", "", {CPU: 500, MEMORY: 500 * MIB}))
        if cap.get(GPU, 0):
            unfit = 1000.0
        else:
            pref = _preferred_cpu(cluster)
            node_cpu = cap.get(CPU, 0) / 1000
            unfit = max(pref / node_cpu, node_cpu / pref) if node_cpu else 1000.0
            import math  # noqa: PLC0415  # only the price expander needs tanh

            unfit = (unfit - 1) * (1 - math.tanh((nodes - 1) / 15)) + 1
        return unfit * (c + x) / (t + x)

    def _scale_down(self, view: View) -> list[str]:
        if view.now_s - self._last_up_s < 600:
            return []
        state = view.state
        m = state.matrix
        by_id = {g.id: g for g in view.groups}
        sizes: dict[str, int] = {}
        for nd in state.nodes:
            gid = nd.labels.get(GROUP_LABEL, "")
            sizes[gid] = sizes.get(gid, 0) + 1
        removable_empty: list[str] = []
        removable_busy: list[str] = []
        for n, nd in enumerate(state.nodes):
            cap, alloc = m.capacity[n], m.allocated[n]
            gpu = m.resource_index["gpu"]
            if cap[gpu] > 0:
                util = alloc[gpu] / cap[gpu]
            else:
                util = max(alloc[0] / max(cap[0], 1), alloc[1] / max(cap[1], 1))
            if util > self.threshold:
                self._since.pop(nd.id, None)
                continue
            since = self._since.setdefault(nd.id, view.now_s)
            g = by_id.get(nd.labels.get(GROUP_LABEL, ""))
            if g is None or view.now_s - since < self.unneeded_s:
                continue
            if sizes[g.id] - 1 < g.min_count:
                continue
            (removable_busy if alloc.any() else removable_empty).append(nd.id)
        out = removable_empty[:10]
        for nid in removable_busy:
            if placeable_elsewhere(state, [*out, nid], self.placement):
                out.append(nid)
                break
        return out


def _pod_price(p: Workload) -> float:
    """GCE's PodPrice: cpu·0.033174 + GiB·0.004446 + GPUs·0.700."""
    req = p.request
    return (
        req.get(CPU, 0) / 1000 * 0.033174
        + req.get(MEMORY, 0) / 1024**3 * 0.004446
        + req.get(GPU, 0) / MILLI_PER_GPU * 0.700
    )


def _preferred_cpu(cluster_nodes: int) -> float:
    for limit, cpu in ((2, 1), (6, 2), (20, 4), (60, 8), (200, 16)):
        if cluster_nodes <= limit:
            return cpu
    return 32


def estimate_binpacking(
    g: NodeGroup,
    pending: Sequence[Workload],
    limit: int,
    taken: Mapping[str, frozenset[str]] | None = None,
) -> tuple[int, list[Workload]]:
    """CA's binpacking estimator on ``g``'s template: how many new nodes, and which pods.

    Spread is checked as the scheduler's predicates would on the template: by hostname, one
    replica of a workload per new node; by another label (a zone), one replica per option,
    since every node of a group has the same value, and none when that value is already
    ``taken`` for the workload (an upcoming node of that zone holds one of its replicas)."""
    cap = g.template.capacity
    taken = taken or {}

    def score(w: Workload) -> float:
        return sum(w.request.get(r, 0) / cap[r] for r in (CPU, MEMORY) if cap.get(r))

    pods = sorted((w for w in pending if could_hold(g.template, w)), key=lambda w: -score(w))
    nodes: list[list[Workload]] = []
    placed: list[Workload] = []
    for w in pods:
        by_label = bool(w.spread_key) and w.spread_key != HOSTNAME_KEY
        copies = w.replicas
        if by_label:
            value = g.template.label(w.spread_key)
            copies = 0 if value is None or value in taken.get(w.id, frozenset()) else 1
        for _ in range(copies):
            for held in nodes:
                if fresh_fit(g.template, [*held, w]) is not None and not (
                    w.spread_key and w in held
                ):
                    held.append(w)
                    break
            else:
                if len(nodes) >= limit:
                    continue
                nodes.append([w])
        if copies:
            placed.append(w)
    return len(nodes), placed


@dataclass
class Karpenter:
    """Karpenter's provisioning and consolidation (see the module docstring)."""

    placement: PlacementOptions = KUBE
    name: str = "karpenter"

    def decide(self, view: View) -> Actions:
        """Provision for what waits; else one consolidation action."""
        if view.pending:
            return Actions(add=self._provision(view))
        return self._consolidate(view)

    def _provision(self, view: View) -> list[tuple[str, int]]:
        pods = sorted(
            (w for w in view.pending for _ in range(w.replicas)),
            key=lambda w: (-w.request.get(CPU, 0), -w.request.get(MEMORY, 0), w.id),
        )
        left = {g.id: room(view, g) for g in view.groups}
        claims: list[list[Workload]] = []
        for w in pods:
            for held in sorted(claims, key=len):
                if self._cheapest(view.groups, [*held, w], left) is not None:
                    held.append(w)
                    break
            else:
                if self._cheapest(view.groups, [w], left) is not None:
                    claims.append([w])
        out: dict[str, int] = {}
        zones: dict[str, set[str]] = {wid: set(v) for wid, v in view.spread_taken.items()}
        for held in claims:
            g = self._cheapest(view.groups, held, left, zones)
            if g is not None:
                out[g.id] = out.get(g.id, 0) + 1
                left[g.id] -= 1
                for w in held:
                    value = g.template.label(w.spread_key) if w.spread_key else None
                    if value is not None and w.spread_key != HOSTNAME_KEY:
                        zones.setdefault(w.id, set()).add(value)
        return sorted(out.items())

    @staticmethod
    def _cheapest(
        groups: Sequence[NodeGroup],
        pods: list[Workload],
        left: dict[str, int],
        zones: Mapping[str, set[str]] | None = None,
    ) -> NodeGroup | None:
        """The cheapest type that fits ``pods``; a replica spread by a label other than the
        hostname rules out the values its siblings' claims (``zones``) already took, as
        Karpenter's topology-aware launch does."""
        ids = [w.id for w in pods if w.spread_key]
        if len(ids) != len(set(ids)):
            return None
        zones = zones or {}

        def free_zone(g: NodeGroup) -> bool:
            return all(
                g.template.label(w.spread_key) not in zones.get(w.id, set())
                for w in pods if w.spread_key and w.spread_key != HOSTNAME_KEY
            )  # fmt: skip

        fits = [
            g for g in groups
            if left[g.id] > 0 and free_zone(g) and fresh_fit(g.template, pods) is not None
        ]  # fmt: skip
        return min(fits, key=lambda g: (g.price_per_hour, g.id)) if fits else None

    def _consolidate(self, view: View) -> Actions:
        state = view.state
        on = _running_on(state)
        price = {g.id: g.price_per_hour for g in view.groups}
        nodes = [nd for nd in state.nodes if nd.labels.get(GROUP_LABEL) in price]
        empty = [nd.id for nd in nodes if not on.get(nd.id)]
        if empty:
            return Actions(remove=empty)

        def ratio(nid: str, gid: str) -> float:
            disruption = 1.0 + sum(len(rw.placements) for rw in on.get(nid, []))
            return price[gid] / disruption

        ranked = sorted(nodes, key=lambda nd: (-ratio(nd.id, nd.labels[GROUP_LABEL]), nd.id))
        ids = [nd.id for nd in ranked]
        for k in range(min(10, len(ids)), 1, -1):
            if placeable_elsewhere(state, ids[:k], self.placement):
                return Actions(remove=ids[:k])
        for nd in ranked:
            if placeable_elsewhere(state, [nd.id], self.placement):
                return Actions(remove=[nd.id])
            pods = [
                rw.workload for rw in on.get(nd.id, []) for p in rw.placements
                if p.node_id == nd.id
            ]  # fmt: skip
            if any(not w.preemptible for w in pods):
                continue
            cheaper = [
                g for g in view.groups
                if g.price_per_hour < price[nd.labels[GROUP_LABEL]] and room(view, g) > 0
                and all(could_hold(g.template, w) for w in pods)
                and fresh_fit(g.template, pods) is not None
            ]  # fmt: skip
            if cheaper:
                g = min(cheaper, key=lambda g: (g.price_per_hour, g.id))
                return Actions(add=[(g.id, 1)], remove=[nd.id])
        return Actions()
