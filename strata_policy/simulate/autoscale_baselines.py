"""The two baselines a replay compares Strata's planner with, built to their published rules
(docs/capacity.md cites each rule's source), each ``decide(view) -> Actions`` as
``simulate.autoscalers`` defines them:

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

Both schedule with LEAST_ALLOCATED (kube's default) or MOST_ALLOCATED (``placement``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from strata_policy.capacity import NodeGroup
from strata_policy.capacity.catalog import GROUP_LABEL, could_hold
from strata_policy.capacity.consolidate import fresh_fit
from strata_policy.model import HOSTNAME_KEY, Policy, Workload
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU
from strata_policy.placement.place import PlacementOptions
from strata_policy.simulate.autoscalers import Actions, View, placeable_elsewhere, room, running_on

MIB = 1024**2
KUBE = PlacementOptions(policy=Policy.LEAST_ALLOCATED)  # kube-scheduler's default scoring


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
        on = running_on(state)
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
