"""Capacity checks (DESIGN §8): are effective guarantees backed, and does every failure domain
have somewhere to fail over to.

**Holders and what runs within a guarantee.** A scope *holds* a guarantee when its effective
guarantee ``G`` is positive on some resource and no child's is (the deepest guaranteed scope
on its branch; a parent's ``G`` is its children's unless it sets more, so backing the holders
backs it). A workload belongs to the nearest holder on its path, if any. A holder's running
replicas are taken in priority order (higher first, then admitted first, then id) while the
sum stays within its ``G`` on every resource ``G`` names (a guarantee of CPU says nothing of
the memory its workloads also ask for): those run *within the guarantee*; the rest, and
every replica of a workload with no holder, is *borrowed*.

**GUARANTEE_BACKED** (a packing, not a sum): on the schedulable nodes, with every preemptible
borrowed replica gone (reclaim would take them), each holder in id order places the part of
its ``G`` its running replicas do not already use (``G − min(G, usage)``, per resource), as
replicas of its *unit*: the request of its largest workload (by GPU, then CPU, then memory,
running or pending), restricted to the resources ``G`` names; with no workload, one GPU device
and its share of the rest (or ``G`` cut into as few pieces as fit the largest node). What
cannot be placed is ``short``.
Units placed stay, so two holders never count the same free capacity.

**N_PLUS_ONE**: for each node, and each value of ``topology.kubernetes.io/zone``, the
within-guarantee replicas the domain runs are placed, one replica at a time (spread is not
re-checked here: a failover is judged on capacity), on the other schedulable nodes' free
capacity plus what preemptible borrowed work there frees. What does not fit is ``short``, per
scope and resource. Domains that run nothing within a guarantee are skipped. The replicas are
placed as the cluster's scheduler would re-place them: higher priority first (then workload
id, replica index), with the scheduler's policy (``options``; MOST_ALLOCATED when not given).
Whether a failover fits depends on who packs it: a spreading scheduler (LEAST_ALLOCATED) puts
small replicas on the emptiest nodes first and can leave no node with room for a big one,
where a packing one would fit both; checked with MOST_ALLOCATED, a zone whose failover a
LEAST_ALLOCATED cluster could not place was named fine (the one domain the replay's N+1 check
missed, test ``test_n_plus_one_packs_as_the_cluster_scheduler``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from strata_policy.capacity import scratch
from strata_policy.capacity.catalog import ZONE_LABEL
from strata_policy.capacity.plan import CapacityCheck, CheckKind
from strata_policy.model import RunningWorkload, Workload
from strata_policy.model.decisions import Policy
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU
from strata_policy.placement.place import PlacementOptions, place_batch
from strata_policy.quota import QuotaTree
from strata_policy.state.nodes import NodeMatrix

_PACK = PlacementOptions(policy=Policy.MOST_ALLOCATED)


def holders(tree: QuotaTree) -> dict[str, str]:
    """Scope id → its holder's id, for every scope under (or at) a holder."""
    g = tree.effective_guarantees

    def guaranteed(sid: str) -> bool:
        return any(v > 0 for v in g.get(sid, {}).values())

    out: dict[str, str] = {}
    for sid in sorted(tree.scopes):
        for anc in tree.path(sid):  # from sid up to the root
            if guaranteed(anc) and not any(guaranteed(c) for c in tree.children(anc)):
                out[sid] = anc
                break
    return out


def within_guarantee(
    tree: QuotaTree, running: Sequence[RunningWorkload]
) -> tuple[set[str], dict[str, dict[str, int]]]:
    """The ids of workloads that run within their holder's guarantee, and per holder what they
    use (see the module docstring)."""
    owner = holders(tree)
    g = tree.effective_guarantees
    by_holder: dict[str, list[RunningWorkload]] = {}
    for rw in running:
        h = owner.get(rw.workload.scope_id)
        if h is not None and rw.placed:
            by_holder.setdefault(h, []).append(rw)
    inside: set[str] = set()
    used: dict[str, dict[str, int]] = {}
    for h, rws in sorted(by_holder.items()):
        rws.sort(key=lambda rw: (-rw.workload.priority, rw.admitted_at_ms, rw.workload.id))
        total: dict[str, int] = {}
        for rw in rws:
            q = rw.workload.total
            if all(total.get(r, 0) + a <= g[h][r] for r, a in q.items() if a and r in g[h]):
                inside.add(rw.workload.id)
                for r, a in q.items():
                    total[r] = total.get(r, 0) + a
        used[h] = total
    return inside, used


def free_borrowed(
    matrix: NodeMatrix, running: Sequence[RunningWorkload], inside: set[str]
) -> list[RunningWorkload]:
    """Deallocate every preemptible borrowed replica (on nodes in ``matrix``); returns them."""
    gone = []
    for rw in running:
        w = rw.workload
        borrowed = w.preemptible and w.id not in inside and rw.placed
        if borrowed and all(p.node_id in matrix.index for p in rw.placements):
            scratch.unallocate(matrix, w.request, rw.placements)
            gone.append(rw)
    return gone


def guarantee_backed(
    matrix: NodeMatrix,
    tree: QuotaTree,
    running: Sequence[RunningWorkload],
    pending: Sequence[Workload] = (),
) -> list[CapacityCheck]:
    """GUARANTEE_BACKED shortfalls, by holder then resource; ``matrix`` is not changed."""
    owner = holders(tree)
    if not owner:
        return []
    work = matrix.copy()
    inside, used = within_guarantee(tree, running)
    free_borrowed(work, running, inside)
    g = tree.effective_guarantees
    biggest: dict[str, Workload] = {}
    for w in [rw.workload for rw in running] + list(pending):
        h = owner.get(w.scope_id)
        if h is not None and (h not in biggest or _size(w) > _size(biggest[h])):
            biggest[h] = w
    out: list[CapacityCheck] = []
    in_use: dict[str, dict[str, int]] = {}  # every placed replica of the holder's scopes
    for rw in running:
        h = owner.get(rw.workload.scope_id)
        if h is not None and rw.placed:
            total = in_use.setdefault(h, {})
            for r, a in rw.workload.total.items():
                total[r] = total.get(r, 0) + a
    for h in sorted(set(owner.values())):
        held = in_use.get(h, {})
        want = {r: a - max(used.get(h, {}).get(r, 0), min(a, held.get(r, 0)))
                for r, a in g[h].items()}  # fmt: skip
        want = {r: a for r, a in want.items() if a > 0}
        if not want:
            continue
        unit, count = _units(want, biggest.get(h), work)
        units = [Workload(id=f"{h}#{i}", scope_id=h, request=unit) for i in range(count)]
        placed = 0
        for w, outcome in zip(units, place_batch(work, units, _PACK), strict=True):
            if outcome.placed:
                scratch.allocate(work, w.request, outcome.placements)
                placed += 1
        for r in sorted(want):
            short = want[r] - placed * unit.get(r, 0)
            if short > 0:
                out.append(CapacityCheck(CheckKind.GUARANTEE_BACKED, "", h, r, short))
    return out


def _size(w: Workload) -> tuple[int, int, int, str]:
    req = w.request
    return (req.get(GPU, 0), req.get(CPU, 0), req.get(MEMORY, 0), w.id)


def _units(
    want: Mapping[str, int], exemplar: Workload | None, matrix: NodeMatrix
) -> tuple[dict[str, int], int]:
    """The unit shape a holder's guarantee is packed in, and how many units."""
    if exemplar is not None:
        unit = {r: min(exemplar.request.get(r, 0), want[r]) for r in want}
        sized = {r: a for r, a in unit.items() if a > 0}
        if sized:
            count = max(math.ceil(want[r] / a) for r, a in sized.items())
            for r in want:
                if unit[r] == 0:
                    unit[r] = math.ceil(want[r] / count)
            return _device_safe(unit), count
    gpu = want.get(GPU, 0)
    if gpu >= MILLI_PER_GPU:
        count = gpu // MILLI_PER_GPU
    else:
        top = matrix.capacity.max(axis=0) if len(matrix) else None
        count = 1
        if top is not None:
            for r, a in want.items():
                col = matrix.resource_index.get(r)
                cap = int(top[col]) if col is not None else 0
                if cap > 0:
                    count = max(count, math.ceil(a / cap))
    unit = {r: math.ceil(a / count) for r, a in want.items()}
    return _device_safe(unit), count


def _device_safe(unit: dict[str, int]) -> dict[str, int]:
    """A unit's GPU as a valid request: a share below one device, else whole devices."""
    gpu = unit.get(GPU, 0)
    if gpu > MILLI_PER_GPU:
        unit[GPU] = math.ceil(gpu / MILLI_PER_GPU) * MILLI_PER_GPU
    return unit


def n_plus_one(
    matrix: NodeMatrix,
    tree: QuotaTree,
    running: Sequence[RunningWorkload],
    options: PlacementOptions = _PACK,
) -> list[CapacityCheck]:
    """N_PLUS_ONE shortfalls: every node, then every zone, re-placed with ``options`` (the
    cluster's scheduler); ``matrix`` is not changed."""
    inside, _ = within_guarantee(tree, running)
    if not inside:
        return []
    work = matrix.copy()
    free_borrowed(work, running, inside)
    on_node: dict[int, list[tuple[RunningWorkload, int]]] = {}
    for rw in running:
        if rw.workload.id in inside:
            for i, p in enumerate(rw.placements):
                n = work.index.get(p.node_id)
                if n is not None:
                    on_node.setdefault(n, []).append((rw, i))
    domains: list[tuple[str, list[int]]] = [(matrix.nodes[n].id, [n]) for n in sorted(on_node)]
    zones: dict[str, list[int]] = {}
    for n, nd in enumerate(matrix.nodes):
        z = nd.labels.get(ZONE_LABEL)
        if z is not None:
            zones.setdefault(z, []).append(n)
    for z in sorted(zones):
        if any(n in on_node for n in zones[z]):
            domains.append((f"{ZONE_LABEL}={z}", zones[z]))
    out: list[CapacityCheck] = []
    for domain, members in domains:
        out.extend(_fail_over(work, domain, members, on_node, options))
    return out


def _fail_over(
    work: NodeMatrix,
    domain: str,
    members: list[int],
    on_node: Mapping[int, list[tuple[RunningWorkload, int]]],
    options: PlacementOptions,
) -> list[CapacityCheck]:
    """Re-place what ``members`` run within guarantees on the rest, in the scheduler's order
    (priority, then id and replica); undo everything."""
    lost = [(rw, i) for n in members for rw, i in on_node.get(n, [])]
    lost.sort(key=lambda ri: (-ri[0].workload.priority, f"{ri[0].workload.id}~{ri[1]}"))
    for rw, i in lost:
        scratch.unallocate(work, rw.workload.request, [rw.placements[i]])
    taken: scratch.Blocked = []
    for n in members:
        taken.extend(scratch.block(work, n))
    moving = [scratch.one_replica(rw.workload) for rw, _ in lost]
    short: dict[tuple[str, str], int] = {}
    done = []
    for w, outcome in zip(moving, place_batch(work, moving, options), strict=True):
        if outcome.placed:
            scratch.allocate(work, w.request, outcome.placements)
            done.append((w, outcome.placements))
        else:
            for r, a in w.request.items():
                if a:
                    short[(w.scope_id, r)] = short.get((w.scope_id, r), 0) + a
    for w, placements in reversed(done):
        scratch.unallocate(work, w.request, placements)
    scratch.unblock(work, taken)
    for rw, i in reversed(lost):
        scratch.allocate(work, rw.workload.request, [rw.placements[i]])
    return [
        CapacityCheck(CheckKind.N_PLUS_ONE, domain, sid, r, a)
        for (sid, r), a in sorted(short.items())
    ]
