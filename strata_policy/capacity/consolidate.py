"""Consolidation (DESIGN §8): nodes to remove, or to replace with one cheaper node.

Candidates are the schedulable nodes of a catalog group above its ``min_count`` that run no
non-preemptible replica, received nothing in this plan, and are not a destination of an
earlier move. They are tried emptiest first (fewest replicas to evict), then dearest, then in
snapshot order — Karpenter's order of emptiness before single-node consolidation, and its
"most saving per disruption" in a stable form. For each:

1. **REMOVE**: its replicas leave (the node is blocked, ``scratch.block``) and are placed one
   at a time by the placement engine on the nodes that stay; a spread replica also avoids the
   nodes (or label values) its siblings hold. Their destinations are pinned: no later
   candidate removes them.
2. Otherwise **REPLACE**: the cheapest group (then by id) below the node's price, with
   headroom, whose one new node takes every replica (a replica with a spread key other than
   the hostname needs the same label value there as here).
3. An action that would leave an effective guarantee less backed than before (the
   GUARANTEE_BACKED shortfall grows somewhere) is undone and the node kept.

At most ``budget`` nodes are named, out of the first ``max_candidates`` tried; a group never
goes below ``min_count`` or above ``max_count``. A plan never moves a non-preemptible replica,
never drops one, keeps every gang whole (each replica moves or the node stays) and keeps spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from strata_policy.capacity import checks, scratch
from strata_policy.capacity.catalog import GROUP_LABEL, NodeGroup, could_hold
from strata_policy.capacity.estimate import how_many
from strata_policy.capacity.plan import CapacityCheck, Consolidation, ConsolidationAction, Move
from strata_policy.model import HOSTNAME_KEY, Node, Placement, RunningWorkload, Workload
from strata_policy.model.resources import GPU, MILLI_PER_GPU
from strata_policy.placement.place import PlacementOptions, place_one
from strata_policy.quota import QuotaTree
from strata_policy.state.nodes import NodeMatrix


@dataclass(slots=True)
class Consolidated:
    """The actions, the workloads with their new placements, and the replacement nodes."""

    actions: list[Consolidation] = field(default_factory=list)
    running: dict[str, RunningWorkload] = field(default_factory=dict)
    new_nodes: list[tuple[NodeGroup, Node]] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)
    most_free: np.ndarray | None = None  # ``_could_move``'s cache; None after every change


def consolidate(
    matrix: NodeMatrix,
    running: Sequence[RunningWorkload],
    groups: Sequence[NodeGroup],
    counts: Mapping[str, int],
    pinned: set[str],
    tree: QuotaTree,
    options: PlacementOptions,
    budget: int,
    next_id: dict[str, int],
    max_candidates: int = 100,
) -> Consolidated:
    """Consolidate on ``matrix`` (a scratch matrix: changed in place); see the module docs.

    ``counts`` are the groups' sizes after scale-up; ``pinned`` the nodes that must stay;
    ``next_id`` the next serial per group for new node ids (advanced here).
    """
    out = Consolidated(running={rw.workload.id: rw for rw in running})
    by_id = {g.id: g for g in groups}
    sizes = dict(counts)
    on: dict[str, list[RunningWorkload]] = {}
    replicas: dict[str, int] = {}
    blocked_by: set[str] = set()  # nodes running a non-preemptible replica
    for rw in running:
        last = ""
        keep = not rw.workload.preemptible
        for p in rw.placements:
            nid = p.node_id
            replicas[nid] = replicas.get(nid, 0) + 1
            if nid != last:
                found = on.get(nid)
                if found is None:
                    on[nid] = [rw]
                elif found[-1] is not rw:
                    found.append(rw)
                last = nid
                if keep:
                    blocked_by.add(nid)
    before = _shortfall(checks.guarantee_backed(matrix, tree, running))
    candidates = []
    for n, nd in enumerate(matrix.nodes):
        group = by_id.get(nd.labels.get(GROUP_LABEL, ""))
        nid = nd.id
        if group is None or nd.unschedulable or nid in pinned or nid in blocked_by:
            continue
        candidates.append((replicas.get(nid, 0), -group.price_per_hour, n, group))
    for _, _, n, group in sorted(candidates, key=lambda c: c[:3])[:max_candidates]:
        if len(out.actions) >= budget:
            break
        nd = matrix.nodes[n]
        if nd.id in pinned or sizes[group.id] <= group.min_count:
            continue
        current = [out.running[rw.workload.id] for rw in on.get(nd.id, [])]
        action = _remove(matrix, n, current, options, out, group)
        if action is None:
            action = _replace(matrix, n, current, groups, sizes, options, out, group, next_id)
        if action is None:
            continue
        after = _shortfall(checks.guarantee_backed(matrix, tree, list(out.running.values())))
        if any(a > before.get(k, 0) for k, a in after.items()):
            _undo(matrix, action, out)
            out.most_free = None
            continue
        out.most_free = None
        out.actions.append(action.value)
        out.removed.add(nd.id)
        sizes[group.id] -= 1
        if action.value.action is ConsolidationAction.REPLACE:
            sizes[action.value.replacement_group_id] += 1
        pinned.update(m.node_id for m in action.value.moves)
    return out


@dataclass(slots=True)
class _Done:
    """An applied action and how to undo it on the scratch matrix."""

    value: Consolidation
    node: int
    blocked: scratch.Blocked
    old: list[RunningWorkload]
    new: list[RunningWorkload]


def _shortfall(found: Sequence[CapacityCheck]) -> dict[tuple[str, str], int]:
    return {(c.scope_id, c.resource): c.short for c in found}


def _remove(
    matrix: NodeMatrix,
    n: int,
    current: list[RunningWorkload],
    options: PlacementOptions,
    out: Consolidated,
    group: NodeGroup,
) -> _Done | None:
    node_id = matrix.nodes[n].id
    if not _could_move(matrix, current, out):
        return None
    for rw in current:
        scratch.unallocate(matrix, rw.workload.request, _on(rw, node_id))
    blocked = scratch.block(matrix, n)
    moves: list[Move] = []
    new: list[RunningWorkload] = []
    failed = False
    for rw in current:
        placements = list(rw.placements)
        for i, p in enumerate(rw.placements):
            if p.node_id != node_id:
                continue
            found = _place_replica(matrix, rw, placements, i, options)
            if found is None:
                failed = True
                break
            placements[i] = found
            scratch.allocate(matrix, rw.workload.request, [found])
            moves.append(Move(rw.workload.id, found.node_id))
        new.append(RunningWorkload(rw.workload, tuple(placements), rw.admitted_at_ms))
        if failed:
            break
    if failed:
        for rw_new, rw_old in zip(new, current, strict=False):
            moved = [
                p for p, q in zip(rw_new.placements, rw_old.placements, strict=True) if p is not q
            ]
            scratch.unallocate(matrix, rw_new.workload.request, moved)
        scratch.unblock(matrix, blocked)
        for rw in current:
            scratch.allocate(matrix, rw.workload.request, _on(rw, node_id))
        return None
    value = Consolidation(
        node_id, ConsolidationAction.REMOVE, "", tuple(moves), group.price_per_hour, len(moves)
    )
    for rw in new:
        out.running[rw.workload.id] = rw
    return _Done(value, n, blocked, current, new)


def _could_move(matrix: NodeMatrix, current: list[RunningWorkload], out: Consolidated) -> bool:
    """A cheap necessary condition: every replica's request is at most the most any
    schedulable node has free, resource by resource (saves the kernel call that would fail).
    The column maxima are kept on ``out`` until an action changes the matrix."""
    if not current:
        return True
    if not matrix.schedulable.any():
        return False
    if out.most_free is None:
        out.most_free = matrix.free[matrix.schedulable].max(axis=0)
    most = out.most_free
    for rw in current:
        for r, amount in rw.workload.request.items():
            col = matrix.resource_index.get(r)
            if amount > (int(most[col]) if col is not None else 0):
                return False
    return True


def fresh_fit(fresh: Node, workloads: Sequence[Workload]) -> list[tuple[int, ...]] | None:
    """Device indices for one replica of each of ``workloads`` on the empty node ``fresh``, in
    order (whole GPUs take the lowest fully free devices, a share the fullest device it fits:
    best fit), or None when they do not all fit (labels, model and every resource checked)."""
    free = dict(fresh.capacity)
    devices = [MILLI_PER_GPU] * fresh.gpu_devices
    out: list[tuple[int, ...]] = []
    for w in workloads:
        if not could_hold(fresh, w) or how_many(free, devices, w.request, 1) < 1:
            return None
        for r, amount in w.request.items():
            free[r] = free.get(r, 0) - amount
        gpu = w.request.get(GPU, 0)
        if gpu >= MILLI_PER_GPU:
            take = [d for d, left in enumerate(devices) if left == MILLI_PER_GPU]
            take = take[: gpu // MILLI_PER_GPU]
            for d in take:
                devices[d] = 0
            out.append(tuple(take))
        elif gpu > 0:
            d = min((left, d) for d, left in enumerate(devices) if left >= gpu)[1]
            devices[d] -= gpu
            out.append((d,))
        else:
            out.append(())
    return out


def _on(rw: RunningWorkload, node_id: str) -> list[Placement]:
    return [p for p in rw.placements if p.node_id == node_id]


def _place_replica(
    matrix: NodeMatrix,
    rw: RunningWorkload,
    placements: list[Placement],
    i: int,
    options: PlacementOptions,
) -> Placement | None:
    """Where replica ``i`` of ``rw`` goes, its siblings' spread respected by blocking."""
    w = rw.workload
    blocked: scratch.Blocked = []
    if w.spread_key:
        taken = {
            matrix.nodes[matrix.index[p.node_id]].label(w.spread_key)
            for j, p in enumerate(placements)
            if j != i
        }
        for m, nd in enumerate(matrix.nodes):
            value = nd.label(w.spread_key)
            if value is not None and value in taken:
                blocked.extend(scratch.block(matrix, m))
    outcome = place_one(matrix, scratch.one_replica(w), options)
    scratch.unblock(matrix, blocked)
    return outcome.placements[0] if outcome.placed else None


def _replace(
    matrix: NodeMatrix,
    n: int,
    current: list[RunningWorkload],
    groups: Sequence[NodeGroup],
    sizes: dict[str, int],
    options: PlacementOptions,
    out: Consolidated,
    group: NodeGroup,
    next_id: dict[str, int],
) -> _Done | None:
    old = matrix.nodes[n]
    cheaper = sorted(
        (g for g in groups if g.price_per_hour < group.price_per_hour),
        key=lambda g: (g.price_per_hour, g.id),
    )
    items = [(rw, i) for rw in current for i, p in enumerate(rw.placements) if p.node_id == old.id]
    for g in cheaper:
        if sizes[g.id] >= g.max_count:
            continue
        fresh = g.new_node(next_id.get(g.id, 0))
        if any(
            rw.workload.spread_key not in ("", HOSTNAME_KEY)
            and fresh.label(rw.workload.spread_key) != old.label(rw.workload.spread_key)
            for rw, _ in items
        ):
            continue
        devices = fresh_fit(fresh, [rw.workload for rw, _ in items])
        if devices is None:
            continue
        next_id[g.id] = next_id.get(g.id, 0) + 1
        for rw in current:
            scratch.unallocate(matrix, rw.workload.request, _on(rw, old.id))
        blocked = scratch.block(matrix, n)
        new_by_id: dict[str, list[Placement]] = {
            rw.workload.id: list(rw.placements) for rw in current
        }
        moves = []
        for (rw, i), devs in zip(items, devices, strict=True):
            new_by_id[rw.workload.id][i] = Placement(fresh.id, devs)
            moves.append(Move(rw.workload.id, fresh.id))
        new = [
            RunningWorkload(rw.workload, tuple(new_by_id[rw.workload.id]), rw.admitted_at_ms)
            for rw in current
        ]
        for rw in new:
            out.running[rw.workload.id] = rw
        out.new_nodes.append((g, fresh))
        value = Consolidation(
            old.id,
            ConsolidationAction.REPLACE,
            g.id,
            tuple(moves),
            group.price_per_hour - g.price_per_hour,
            len(moves),
        )
        return _Done(value, n, blocked, current, new)
    return None


def _undo(matrix: NodeMatrix, done: _Done, out: Consolidated) -> None:
    node_id = matrix.nodes[done.node].id
    if done.value.action is ConsolidationAction.REMOVE:
        for rw in done.new:
            moved = [p for p, q in zip(rw.placements, _old(done, rw), strict=True) if p is not q]
            scratch.unallocate(matrix, rw.workload.request, moved)
    else:
        out.new_nodes.pop()
    scratch.unblock(matrix, done.blocked)
    for rw in done.old:
        scratch.allocate(matrix, rw.workload.request, _on(rw, node_id))
        out.running[rw.workload.id] = rw


def _old(done: _Done, rw: RunningWorkload) -> tuple[Placement, ...]:
    for o in done.old:
        if o.workload.id == rw.workload.id:
            return o.placements
    raise KeyError(rw.workload.id)
