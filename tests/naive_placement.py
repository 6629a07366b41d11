"""The slow, obviously-correct twin of every placement policy, in plain Python.

It reads nothing but the nodes and a per-node free state (resource dict + per-device free list)
and follows DESIGN §3 literally: every node, every replica, every device, every typical shape,
scores written out from their definitions. Float expressions are written in the same order as
the kernels so that equal inputs give bit-equal scores (ties must break the same way).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from strata_policy.model import Node, Placement, Policy, Workload
from strata_policy.state.taskmix import TaskType

MASK = (1 << 64) - 1


@dataclass
class NaiveResult:
    """What the twin decided for one workload."""

    placements: tuple[Placement, ...]
    score: float
    explanation: str


def _mix(x: int) -> int:
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def _seed(seed: int, workload_id: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(f"{seed}:{workload_id}".encode(), digest_size=8).digest(), "little"
    )


def _node_hash(seed: int, replica: int, n: int) -> int:
    return _mix(seed ^ _mix((n * 0x9E3779B97F4A7C15 + replica) & MASK))


def _frag(node: Node, free: Mapping[str, int], devs: list[int], t: TaskType) -> int:
    """F_n(m) from its definition."""
    idle = sum(devs)
    models = {m for m in t.gpu_model.split("|") if m}
    if t.gpu_milli == 0 or (models and node.gpu_model not in models):
        return idle
    per = min(t.gpu_milli, 1000)
    k = max(1, t.gpu_milli // 1000)
    if free.get("cpu", 0) < t.cpu_milli or sum(1 for f in devs if f >= per) < k:
        return idle
    return sum(f for f in devs if f < per)


def _stranded(free: Mapping[str, int], taken: int, types: Sequence[TaskType]) -> float:
    """GPU milli the free CPU cannot feed at the GPU shapes' CPU per GPU milli (``ρ``), with
    ``taken`` milli of GPU about to go."""
    c = 0.0
    g = 0.0
    for t in types:
        if t.gpu_milli > 0:
            c += t.weight * t.cpu_milli
            g += t.weight * (min(t.gpu_milli, 1000) * max(1, t.gpu_milli // 1000))
    rho = c / g if g > 0.0 else 0.0
    if rho <= 0.0:
        return 0.0
    return max(0.0, (free.get("gpu", 0) - taken) - free.get("cpu", 0) / rho)


class Naive:
    """Nodes plus mutable free state; ``place`` decides one workload and applies it."""

    def __init__(
        self, nodes: Sequence[Node], free: list[dict[str, int]], devs: list[list[int]]
    ) -> None:
        self.nodes = list(nodes)
        self.free = free
        self.devs = devs
        extra = sorted({r for nd in nodes for r in nd.capacity} - {"cpu", "memory", "gpu"})
        self.columns = ["cpu", "memory", "gpu", *extra]
        self.max_cap = {
            r: max([nd.capacity.get(r, 0) for nd in nodes] or [0]) for r in self.columns
        }

    def _static_reason(self, nd: Node, wl: Workload) -> str | None:
        if nd.unschedulable:
            return "unschedulable"
        if any(nd.label(k) != v for k, v in wl.node_selector.items()):
            return "node_selector mismatch"
        models = wl.gpu_models
        gpu = wl.request.get("gpu", 0)
        if models and nd.gpu_model not in models and not (gpu == 0 and nd.gpu_devices == 0):
            return "gpu_model mismatch"
        return None

    def _reason(self, n: int, wl: Workload, used: list[str]) -> str | None:
        nd = self.nodes[n]
        static = self._static_reason(nd, wl)
        if static:
            return static
        for r in self.columns:
            if self.free[n].get(r, 0) < wl.request.get(r, 0):
                return f"insufficient {r}"
        g = wl.request.get("gpu", 0)
        devs = self.devs[n]
        if 0 < g < 1000 and not any(f >= g for f in devs):
            return "insufficient gpu"
        if g >= 1000 and sum(1 for f in devs if f == 1000) < g // 1000:
            return "insufficient gpu"
        missing = sorted(r for r, a in wl.request.items() if a > 0 and r not in self.columns)
        if missing:
            return f"insufficient {missing[0]}"
        if wl.spread_key:
            value = nd.label(wl.spread_key)
            if value is None or value in used:
                return "spread conflict"
        return None

    def _weights(self, wl: Workload, weights: Mapping[str, float]) -> list[float]:
        if weights:
            return [float(weights.get(r, 0.0)) for r in self.columns]
        return [1.0 if wl.request.get(r, 0) > 0 else 0.0 for r in self.columns]

    def _score(self, policy: Policy, n: int, wl: Workload, w: list[float]) -> float:
        nd = self.nodes[n]
        total_w = sum(w) if sum(w) > 0 else 1.0
        s = 0.0
        terms = []
        for i, r in enumerate(self.columns):
            if w[i] <= 0:
                continue
            cap = nd.capacity.get(r, 0)
            inv = 1.0 / cap if cap > 0 else 0.0
            free, req = self.free[n].get(r, 0), wl.request.get(r, 0)
            terms.append((w[i], cap, inv, free, req, r))
        if policy is Policy.LEAST_ALLOCATED:
            for wi, _cap, inv, free, req, _r in terms:
                s += wi * ((free - req) * inv)
            return s * 100.0 / total_w
        if policy is Policy.MOST_ALLOCATED:
            for wi, cap, inv, free, req, _r in terms:
                s += wi * ((cap - free + req) * inv)
            return s * 100.0 / total_w
        if policy is Policy.BEST_FIT:
            for wi, _cap, _inv, free, req, r in terms:
                top = self.max_cap[r]
                s += wi * ((free - req) * (1.0 / top if top > 0 else 0.0))
            return 100.0 * (1.0 - s / total_w)
        if policy is Policy.DOT_PRODUCT:
            for wi, _cap, inv, free, req, _r in terms:
                s += wi * ((req * inv) * (free * inv))
            return s
        if policy is Policy.BALANCED_ALLOCATION:
            if not terms:
                return 100.0
            fr = [min(1.0, (cap - free + req) * inv) for _w, cap, inv, free, req, _r in terms]
            for f in fr:
                s += f
            mean = s / len(fr)
            var = 0.0
            for f in fr:
                var += (f - mean) * (f - mean)
            return (1.0 - math.sqrt(var / len(fr))) * 100.0
        return 0.0

    def _fgd(
        self, n: int, wl: Workload, types: Sequence[TaskType], fgd_score: str
    ) -> tuple[float, tuple[int, ...]]:
        nd, g, devs = self.nodes[n], wl.request.get("gpu", 0), self.devs[n]
        cpu = wl.request.get("cpu", 0)
        if g == 0:
            options: list[tuple[int, ...]] = [()]
        elif g < 1000:
            options = [(d,) for d, f in enumerate(devs) if f >= g]
        else:
            options = [tuple([d for d, f in enumerate(devs) if f == 1000][: g // 1000])]
        best, best_devs = -math.inf, ()
        for chosen in options:
            after = list(devs)
            for d in chosen:
                after[d] -= min(g, 1000)
            free_after = dict(self.free[n])
            free_after["cpu"] = free_after.get("cpu", 0) - cpu
            delta = 0.0
            for t in types:
                delta += t.weight * (
                    _frag(nd, free_after, after, t) - _frag(nd, self.free[n], devs, t)
                )
            if fgd_score == "UNTRUNCATED":
                score = -delta
            else:
                if fgd_score == "REFINED":
                    delta += _stranded(free_after, g, types) - _stranded(self.free[n], 0, types)
                score = float(int(100.0 / (1.0 + math.exp(delta / 1000.0))))
                if fgd_score == "REFINED" and 0 < g < 1000:
                    score += (1000 - after[chosen[0]]) / 2048.0
            if score > best:
                best, best_devs = score, chosen
        return best, best_devs

    def _devices(self, policy: Policy, n: int, g: int, h: int) -> tuple[int, ...]:
        devs = self.devs[n]
        if g == 0:
            return ()
        per, k = min(g, 1000), max(1, g // 1000)
        pool = [d for d, f in enumerate(devs) if f >= per]
        if policy is Policy.RANDOM:
            for i in range(k):
                draw = _mix(h ^ ((0xD1B54A32D192ED03 + i) & MASK))
                j = i + draw % (len(pool) - i)
                pool[i], pool[j] = pool[j], pool[i]
            return tuple(sorted(pool[:k]))
        if g < 1000:
            return (min(pool, key=lambda d: (devs[d], d)),)
        return tuple(pool[:k])

    def _per_capacity(self, types: Sequence[TaskType]) -> list[TaskType]:
        """The refined mix: each shape's weight over the share of GPU devices it may use."""
        total = sum(nd.gpu_devices for nd in self.nodes)
        if total <= 0:
            return list(types)
        out = []
        for t in types:
            models = {m for m in t.gpu_model.split("|") if m}
            allowed = sum(
                nd.gpu_devices for nd in self.nodes if not models or nd.gpu_model in models
            )
            share = float(allowed) / float(total)
            out.append(replace(t, weight=t.weight / share) if 0.0 < share < 1.0 else t)
        return out

    def place(
        self,
        wl: Workload,
        policy: Policy,
        weights: Mapping[str, float] = {},  # read-only default
        seed: int = 0,
        types: Sequence[TaskType] = (),
        fgd_score: str = "UNTRUNCATED",
    ) -> NaiveResult:
        """Place every replica or none; applies the placements when they all fit."""
        w = self._weights(wl, weights)
        if policy is Policy.FRAGMENTATION_AWARE and fgd_score == "REFINED":
            types = self._per_capacity(types)
        wseed = _seed(seed, wl.id)
        used: list[str] = []
        done: list[tuple[int, tuple[int, ...]]] = []
        score = 0.0
        for r in range(wl.replicas):
            best, best_score, best_devs = -1, -math.inf, ()
            for n in range(len(self.nodes)):
                if self._reason(n, wl, used) is not None:
                    continue
                devs: tuple[int, ...] | None = None
                if policy is Policy.FIRST_FIT:
                    best, best_score = n, 0.0
                    break
                if policy is Policy.FRAGMENTATION_AWARE:
                    sc, devs = self._fgd(n, wl, types, fgd_score)
                elif policy is Policy.RANDOM:
                    sc = (_node_hash(wseed, r, n) >> 11) * 2.0**-53
                else:
                    sc = self._score(policy, n, wl, w)
                if sc > best_score:
                    best, best_score, best_devs = n, sc, devs or ()
            if best < 0:
                counts: dict[str, int] = {}
                for n in range(len(self.nodes)):
                    reason = self._reason(n, wl, used) or "fits?"
                    counts[reason] = counts.get(reason, 0) + 1
                self._apply(wl, done, -1)
                ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
                text = f"0/{len(self.nodes)} nodes fit"
                if ranked:
                    text += ": " + ", ".join(f"{c} {t}" for t, c in ranked)
                if r:
                    text = f"only {r}/{wl.replicas} replicas fit; {text}"
                return NaiveResult((), 0.0, text)
            g = wl.request.get("gpu", 0)
            if not (policy is Policy.FRAGMENTATION_AWARE and 0 < g < 1000):
                best_devs = self._devices(policy, best, g, _node_hash(wseed, r, best))
            done.append((best, best_devs))
            self._apply(wl, [done[-1]], 1)
            if wl.spread_key:
                used.append(self.nodes[best].label(wl.spread_key) or "")
            score = best_score
        placements = tuple(Placement(self.nodes[n].id, d) for n, d in done)
        return NaiveResult(placements, score, "")

    def _apply(self, wl: Workload, done: list[tuple[int, tuple[int, ...]]], sign: int) -> None:
        g = wl.request.get("gpu", 0)
        for n, devs in done:
            for r, a in wl.request.items():
                self.free[n][r] = self.free[n].get(r, 0) - sign * a
            for d in devs:
                self.devs[n][d] -= sign * min(g, 1000)


def naive_from_matrix(matrix: object) -> Naive:
    """A twin holding the current state of a NodeMatrix (read through its public arrays)."""
    from strata_policy.state.nodes import NodeMatrix  # noqa: PLC0415  # keep the twin standalone

    assert isinstance(matrix, NodeMatrix)
    free = [dict(matrix.free_of(n)) for n in range(len(matrix))]
    devs = [[int(f) for f in matrix.gpu_free[n] if f >= 0] for n in range(len(matrix))]
    return Naive(matrix.nodes, free, devs)
