"""Strata's arrangement of pending work: steady CPU work into the spare room of GPU nodes that
stay, without taking the CPU their GPUs need.

The cluster's scheduler places a batch in arrival order: on the synthetic day the first
PostgreSQL replicas (steady, never moved) fill new CPU nodes before the GPU nodes bought for
inference receive their replicas, so those nodes' spare CPUs stay empty all day, or they land
on a GPU node that the daytime load brought and pin it through the night. ``arrange`` is the
order and the rule Strata decides with when it admits and places pending work itself (DESIGN
§9: pods are placed by Strata and released pinned to the chosen node):

1. Everything but the **steady CPU work** (non-preemptible, no GPU) is placed first, in the
   given order, with the given policy: exactly what ``place_batch`` does with it alone.
2. Then the steady CPU work, in the given order, on the room that is left, **preferring the
   GPU nodes' room** replica by replica (the scheduler's scores tie between a full CPU node and
   a full GPU node; a zone-spread gang takes GPU room in the zones that have it and CPU nodes
   in the others), where on every GPU node the CPU and memory its free GPUs need are
   **reserved** (each free GPU at the largest CPU and memory per GPU that the known GPU work of
   that model asks: a T4 node for two half-T4 replicas of 2 CPUs keeps 4 CPUs for them), and
   a GPU node that runs work, all of it preemptible, is **avoided**: its work is the burst
   that comes and goes, so the node goes with it unless a never-moved replica pins it there.
   A GPU node running non-preemptible work (a guaranteed base load), or nothing yet, is taken
   as staying.

With no steady CPU work (openb: every pod is preemptible) this is ``place_batch`` exactly.
Deterministic: the same matrix, work and options give the same outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

from strata_policy.capacity import scratch
from strata_policy.model import Placement, RunningWorkload, Workload
from strata_policy.model.resources import GPU, MILLI_PER_GPU
from strata_policy.placement.place import (
    PlacementOptions,
    PlacementOutcome,
    place_batch,
    place_one,
)
from strata_policy.state.nodes import GPU_COL, NodeMatrix

Ratios = dict[str, dict[str, float]]


def steady_cpu(w: Workload) -> bool:
    """Non-preemptible and asking no GPU: the work that pins whatever node it lands on."""
    return not w.preemptible and w.request.get(GPU, 0) == 0


def per_gpu(work: Sequence[Workload]) -> Ratios:
    """For each GPU model, the largest amount of each other resource a GPU workload of that
    model asks per whole GPU (a 0.5-GPU replica of 2 CPUs: 4 CPUs per GPU)."""
    out: Ratios = {}
    for w in work:
        gpu = w.request.get(GPU, 0)
        if gpu <= 0:
            continue
        per = out.setdefault(w.gpu_model, {})
        for r, amount in w.request.items():
            if r != GPU:
                per[r] = max(per.get(r, 0.0), amount * MILLI_PER_GPU / gpu)
    return out


def arrange(
    matrix: NodeMatrix,
    pending: Sequence[Workload],
    options: PlacementOptions,
    running: Sequence[RunningWorkload] = (),
    avoid: Set[str] = frozenset(),
) -> list[PlacementOutcome]:
    """Outcomes for ``pending`` in its order (see the module docstring); ``running`` is the
    work on ``matrix`` (it tells which GPU nodes run non-preemptible work, and the GPU shapes
    to reserve for); steady CPU work never goes to a node of ``avoid`` (nodes about to be
    removed). Like ``place_batch``, ``matrix`` is not changed."""
    steady = [i for i, w in enumerate(pending) if steady_cpu(w)]
    if not steady:
        return place_batch(matrix, pending, options)
    chosen = set(steady)
    rest = [w for i, w in enumerate(pending) if i not in chosen]
    first = place_batch(matrix, rest, options) if rest else []
    m = matrix.copy()
    anchored: set[int] = set()
    busy: set[int] = set()
    for rw in running:
        for p in rw.placements:
            n = m.index.get(p.node_id)
            if n is not None:
                busy.add(n)
                if not rw.workload.preemptible:
                    anchored.add(n)
    for w, o in zip(rest, first, strict=True):
        scratch.allocate(m, w.request, o.placements)
        for p in o.placements:
            n = m.index[p.node_id]
            busy.add(n)
            if not w.preemptible:
                anchored.add(n)
    for nid in avoid:
        if nid in m.index:
            scratch.block(m, m.index[nid])
    ratios = per_gpu([*(rw.workload for rw in running), *pending])
    room: set[int] = set()
    for n in range(len(m)):
        if int(m.gpu_devices[n]) == 0:
            continue
        if n in busy and n not in anchored:
            scratch.block(m, n)
        else:
            _reserve(m, n, ratios.get(m.nodes[n].gpu_model, {}))
            room.add(n)
    second = []
    for i in steady:
        o = _preferring(m, pending[i], room, options)
        scratch.allocate(m, pending[i].request, o.placements)
        second.append(o)
    out: list[PlacementOutcome] = []
    a, b = iter(first), iter(second)
    for i in range(len(pending)):
        out.append(next(b) if i in chosen else next(a))
    return out


def _preferring(
    m: NodeMatrix, w: Workload, room: set[int], options: PlacementOptions
) -> PlacementOutcome:
    """``w`` placed replica by replica, each on the GPU nodes' ``room`` if it fits there, else
    on any node, siblings on distinct values of its spread label; all replicas or none (a gang
    stays whole). The scheduler's scores tie between a full CPU node and a full GPU node, so
    the preference is asked, not scored. ``m`` is left as it was."""
    key = w.spread_key
    one = scratch.one_replica(w)
    used: set[str] = set()
    held: list[tuple[int, tuple[int, ...]]] = []
    for _ in range(w.replicas):
        found = None
        for allowed in (room, None):
            blocked: scratch.Blocked = []
            for n in range(len(m)):
                value = m.nodes[n].label(key) if key else ""
                if (allowed is not None and n not in allowed) or value is None or value in used:
                    blocked += scratch.block(m, n)
            o = place_one(m, one, options)
            scratch.unblock(m, blocked)
            if o.placed:
                found = o.placements[0]
                break
        if found is None:
            for n, devices in reversed(held):
                m.deallocate(n, w.request, devices)
            return PlacementOutcome((), reasons=o.reasons)
        n = m.index[found.node_id]
        m.allocate(n, w.request, found.gpu_devices)
        held.append((n, found.gpu_devices))
        if key:
            used.add(m.nodes[n].label(key) or "")
    for n, devices in reversed(held):
        m.deallocate(n, w.request, devices)
    return PlacementOutcome(tuple(Placement(m.nodes[n].id, d) for n, d in held))


def _reserve(m: NodeMatrix, n: int, ratio: dict[str, float]) -> None:
    """Take, on GPU node ``n``, what its free GPUs need of every other resource (capped at
    what is free)."""
    free_gpus = float(m.gpu_free[n, : int(m.gpu_devices[n])].clip(min=0).sum()) / MILLI_PER_GPU
    if free_gpus <= 0 or not ratio:
        return
    request = {}
    for c, r in enumerate(m.resources):
        if c == GPU_COL or r not in ratio:
            continue
        amount = min(int(ratio[r] * free_gpus + 0.5), int(m.free[n, c]))
        if amount > 0:
            request[r] = amount
    if request:
        m.allocate(n, request, ())
