"""The scale-up estimator: which new nodes, of which groups, hold the pending workloads at the
least cost per hour.

Greedy by price per value, the classic rule for variable-sized bin packing: every replica is
worth its request at the LP's dual prices (``bound.solve``'s duals: what one unit of each resource
costs at the fractional optimum). For every group with headroom left, an empty node of its
template is filled first-fit-decreasing (by that value) with the replicas still to hold; the
group whose node costs least per value held wins (ties: the cheaper node, then the one holding
more replicas, then the group id), and as many such nodes open as the same fill repeats. A
group's fill only changes when a class it packed runs short, so only those fills are redone.

Replicas of a workload alike in request, selector, model, spread and gang size form one class
and are packed by count (CA's equivalence groups), so the cost is per class, not per replica.
A spread workload puts at most one replica on each new node; spread by another label (a
zone), at most one replica of each of its gangs per value of the label over all new nodes.

**By mix** (``PlanOptions.fill_by_mix``, what a controller that keeps a cluster over time
uses): the group is chosen by the price per value of an empty node filled with the pending
classes *without* their count limit, i.e. by how well its shape fits the pending mix, and
then opened as many times as the replicas left need. A node outlives the work that caused it:
its spare room takes the next arrivals of the same mix, and consolidation removes it when
they do not come. A one-shot plan (the default) prices only the replicas pending now, so it
prefers a small node that is cheap today.

**Balanced** (``balance``, priced against the catalog's order by ``scale_up`` when
zone-spread work waits): the nodes one fill opens are spread over the groups alike but for
the zone (``similar_groups``), each to the group with the most headroom left
(``balanced``), as cluster-autoscaler's ``--balance-similar-node-groups`` does.

The fill is an estimate: the
planner then places everything with the placement engine on the cluster plus the new nodes,
and asks again for what that left over.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from strata_policy.capacity.bound import LpResult, value_of
from strata_policy.capacity.catalog import GROUP_LABEL, ZONE_LABEL, NodeGroup, could_hold
from strata_policy.model import HOSTNAME_KEY, Node, Workload
from strata_policy.model.resources import GPU, MILLI_PER_GPU, Resources


@dataclass(slots=True)
class _Class:
    """Replicas alike: one exemplar, the workloads' ids and how many replicas are left."""

    exemplar: Workload
    value: float
    left: int
    gangs: int = 1
    per_value: dict[str, int] | None = None  # zone-like spread: replicas opened per label value

    def allowed(self, template: Node) -> int:
        """How many replicas one more node of ``template`` may take: 1 for a spread class
        (0 when its label value already has one replica of every gang), else ``left``."""
        key = self.exemplar.spread_key
        if not key:
            return self.left
        if key == HOSTNAME_KEY:
            return min(1, self.left)
        value = template.label(key)
        if value is None:
            return 0
        used = (self.per_value or {}).get(value, 0)
        return min(1, self.left, self.gangs - used)


def classes_of(workloads: Sequence[Workload], prices: LpResult) -> list[_Class]:
    """The replicas of ``workloads`` as classes, most valuable first (then by exemplar id)."""
    by_key: dict[tuple[object, ...], _Class] = {}
    for w in workloads:
        key = (
            tuple(sorted(w.request.items())),
            tuple(sorted(w.node_selector.items())),
            w.gpu_models,
            w.spread_key,
            w.replicas if w.spread_key else 1,
        )
        found = by_key.get(key)
        if found is None:
            by_key[key] = _Class(w, value_of(w, prices), w.replicas, 1, {})
        else:
            found.left += w.replicas
            found.gangs += 1
    return sorted(by_key.values(), key=lambda c: (-c.value, c.exemplar.id))


def _by_label(c: _Class) -> bool:
    key = c.exemplar.spread_key
    return bool(key) and key != HOSTNAME_KEY


def fill(group: NodeGroup, classes: Sequence[_Class], unlimited: bool = False) -> list[int]:
    """How many replicas of each class an empty node of ``group`` holds, first fit in order."""
    template = group.template
    free = dict(template.capacity)
    devices = [MILLI_PER_GPU] * template.gpu_devices
    out = [0] * len(classes)
    for i, c in enumerate(classes):
        w = c.exemplar
        if c.left <= 0 or not could_hold(template, w):
            continue
        limit = c.allowed(template)
        if unlimited and not w.spread_key:
            limit = 10**6
        k = min(limit, how_many(free, devices, w.request, limit))
        if k <= 0:
            continue
        for r, amount in w.request.items():
            free[r] = free.get(r, 0) - amount * k
        _take_devices(devices, w.request.get(GPU, 0), k)
        out[i] = k
    return out


def how_many(free: dict[str, int], devices: list[int], req: Resources, limit: int) -> int:
    """How many replicas of ``req`` (at most ``limit``) fit ``free`` and ``devices``."""
    k = limit
    for r, amount in req.items():
        if amount > 0 and r != GPU:
            k = min(k, free.get(r, 0) // amount)
    gpu = req.get(GPU, 0)
    if gpu >= MILLI_PER_GPU:
        k = min(k, sum(1 for d in devices if d == MILLI_PER_GPU) // (gpu // MILLI_PER_GPU))
    elif gpu > 0:
        k = min(k, sum(d // gpu for d in devices))
    return max(k, 0)


def _take_devices(devices: list[int], gpu: int, k: int) -> None:
    if gpu >= MILLI_PER_GPU:
        need = k * (gpu // MILLI_PER_GPU)
        for d, left in enumerate(devices):
            if need and left == MILLI_PER_GPU:
                devices[d] = 0
                need -= 1
    elif gpu > 0:
        order = sorted(range(len(devices)), key=lambda d: (devices[d], d))  # best fit
        for d in order:
            while k and devices[d] >= gpu:
                devices[d] -= gpu
                k -= 1


@dataclass(frozen=True, slots=True)
class Opened:
    """``count`` new nodes of group ``group_index`` (each holding ``packed`` by class)."""

    group_index: int
    count: int


def estimate(
    groups: Sequence[NodeGroup],
    headroom: list[int],
    workloads: Sequence[Workload],
    prices: LpResult,
    by_mix: bool = False,
    balance: bool = False,
) -> list[Opened]:
    """New nodes to open for ``workloads`` (see the module docstring); ``headroom[g]`` is how
    many more nodes group ``g`` may take and is decreased as nodes open. ``by_mix``: a group
    is judged by what a node of it holds of the pending mix with no count limit (see the
    module docstring), not by what it holds of the replicas left."""
    classes = classes_of(workloads, prices)
    fills: list[list[int] | None] = [None] * len(groups)
    mixes: list[tuple[int, list[int]] | None] = [None] * len(groups)
    opened: list[Opened] = []
    while any(c.left > 0 for c in classes):
        active = sum(1 for c in classes if c.left > 0)
        best: tuple[tuple[float, float, int, str], int] | None = None
        tied: list[int] = []  # groups whose key equals the best's but for the id
        for g, group in enumerate(groups):
            if headroom[g] <= 0:
                continue
            packed = fills[g]
            if packed is None or any(p > c.left for p, c in zip(packed, classes, strict=True)):
                packed = fills[g] = fill(group, classes)
            n = sum(packed)
            if n == 0:
                continue
            counted = packed
            if by_mix:
                mix = mixes[g]
                if mix is None or mix[0] != active:
                    mix = mixes[g] = (active, fill(group, classes, unlimited=True))
                counted = mix[1]
            value = sum(p * c.value for p, c in zip(counted, classes, strict=True))
            ratio = group.price_per_hour / value if value > 0 else math.inf
            key = (ratio, group.price_per_hour, -n, group.id)
            if best is None or key[:3] != best[0][:3]:
                if best is None or key < best[0]:
                    best, tied = (key, g), [g]
            else:
                tied.append(g)
        if best is None:
            break
        g = best[1]
        packed = fills[g]
        assert packed is not None  # set by the loop that chose it
        zoned = [c for p, c in zip(packed, classes, strict=True) if p and _by_label(c)]
        similar = [
            h for h in tied
            if h == g
            or (balance and fills[h] == packed and similar_groups(groups[h], groups[g]))
        ]  # fmt: skip
        caps = {h: _cap(groups[h].template, headroom[h], zoned) for h in similar}
        total = min(
            [sum(caps.values())] + [c.left // p for p, c in zip(packed, classes, strict=True) if p]
        )
        spread = balanced(similar, caps, headroom, total) if total > 0 else [(g, 1)]
        for h, k in spread:
            for p, c in zip(packed, classes, strict=True):
                c.left -= min(c.left, p * k)
            for c in zoned:
                v = groups[h].template.label(c.exemplar.spread_key) or ""
                if c.per_value is not None:
                    c.per_value[v] = c.per_value.get(v, 0) + k
            headroom[h] -= k
            opened.append(Opened(h, k))
        if zoned:  # another group of the same label value now takes fewer of them
            fills = [None] * len(groups)
            mixes = [None] * len(groups)
    return opened


def similar_groups(a: NodeGroup, b: NodeGroup) -> bool:
    """Same price, capacity and GPU model, labels equal but for the zone and the node group:
    cluster-autoscaler's "similar node groups" (``--balance-similar-node-groups``), which it
    balances at scale-up."""
    ta, tb = a.template, b.template
    if (a.price_per_hour, ta.capacity, ta.gpu_model) != (
        b.price_per_hour,
        tb.capacity,
        tb.gpu_model,
    ):
        return False
    ignored = {ZONE_LABEL, GROUP_LABEL}
    return {k: v for k, v in ta.labels.items() if k not in ignored} == {
        k: v for k, v in tb.labels.items() if k not in ignored
    }


def _cap(template: Node, headroom: int, zoned: Sequence[_Class]) -> int:
    """How many nodes of ``template`` the same fill may open: its headroom, and for a class
    spread by a label, the gangs that have no replica at the template's value yet."""
    cap = headroom
    for c in zoned:
        v = template.label(c.exemplar.spread_key) or ""
        cap = min(cap, c.gangs - (c.per_value or {}).get(v, 0))
    return max(cap, 0)


def balanced(
    similar: Sequence[int], caps: dict[int, int], headroom: Sequence[int], total: int
) -> list[tuple[int, int]]:
    """``total`` new nodes of one fill spread over ``similar`` groups (same shape and price,
    another zone), one at a time, each to the group with the most headroom left within its
    cap (ties: the earlier in ``similar``). Cluster-autoscaler's balancing of similar node
    groups water-fills the smallest group; with equal ``max_count`` the group with the most
    headroom is the one with the fewest nodes. Room in every zone is what a gang spread over
    the zones can use (one replica per zone), and a zone lost takes less of the fleet."""
    room = {h: headroom[h] for h in similar}
    left = dict(caps)
    count = dict.fromkeys(similar, 0)
    for _ in range(total):
        open_ = [h for h in similar if left[h] > 0]
        if not open_:
            break
        h = max(open_, key=lambda k: (room[k], -similar.index(k)))
        room[h] -= 1
        left[h] -= 1
        count[h] += 1
    return [(h, k) for h, k in count.items() if k]
