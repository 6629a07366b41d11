"""The planner's scale-up (``plan_capacity`` step 2): new nodes for the pending work, and
where it lands on the cluster plus them.

Pending work is placed on the cluster as it is (one ``place_batch``, or ``arrange`` with
``PlanOptions.arrange``); for what is left, ``estimate`` opens the cheapest nodes per LP
value, everything pending is placed again on the cluster plus the new nodes (appended in group
then serial order), leftovers ask the estimator again (at most ``_ROUNDS`` rounds), and new
nodes the others can do without are dropped (``_drop_spare``).

**Zones** (similar node groups). When work spread by a zone-like label is left after placing
on the cluster, the rounds run twice: with the new nodes of one fill taken group by group in
the catalog's order, and spread over similar groups (``estimate.balanced``, what
cluster-autoscaler's ``--balance-similar-node-groups`` does). The plan that leaves less
unplaced, then costs less per hour, is kept; on a tie the balanced one. Which zones the GPU
nodes go to decides how many of a zone-spread gang's replicas their spare room holds (one
replica per zone), and neither order is the cheaper on every cluster
(``tests/test_capacity_balance.py`` has one case each way), so the planner prices both. On a
tie, room in every zone is room the next zone-spread gang can use, and a zone lost takes less.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from strata_policy.capacity import bound, scratch
from strata_policy.capacity.arrange import arrange
from strata_policy.capacity.catalog import NodeGroup, spread_by_label
from strata_policy.capacity.estimate import estimate
from strata_policy.capacity.plan import PlanOptions
from strata_policy.model import Node, Placement, RunningWorkload, Workload
from strata_policy.placement.place import PlacementOptions, PlacementOutcome, place_batch
from strata_policy.state.cluster import ClusterState
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.nodes import NodeMatrix

_ROUNDS = 4
_DROP_TRIES = 64


def scale_up(
    state: ClusterState,
    groups: Sequence[NodeGroup],
    sizes: dict[str, int],
    pending: list[Workload],
    running: list[RunningWorkload],
    options: PlanOptions,
    taken: set[str],
    next_id: dict[str, int],
) -> tuple[list[tuple[NodeGroup, Node]], list[PlacementOutcome], NodeMatrix]:
    """New nodes, the pending workloads' outcomes on the cluster plus them, that matrix; both
    zone orders priced when zone-spread work is left (the module docstring)."""
    place = options.placement

    def place_all(m: NodeMatrix) -> list[PlacementOutcome]:
        if options.arrange:
            return arrange(m, pending, place, running)
        return place_batch(m, pending, place)

    first = place_all(state.matrix.copy())
    if not any(spread_by_label(w) for w, o in zip(pending, first, strict=True) if not o.placed):
        return _rounds(
            state, groups, sizes, pending, first, place_all, options, taken, next_id, False
        )
    taken_b, next_b = set(taken), dict(next_id)
    plain = _rounds(state, groups, sizes, pending, first, place_all, options, taken, next_id, False)
    even = _rounds(state, groups, sizes, pending, first, place_all, options, taken_b, next_b, True)
    if _worth(even, groups) <= _worth(plain, groups):
        taken.clear()
        taken.update(taken_b)
        next_id.clear()
        next_id.update(next_b)
        return even
    return plain


def _worth(
    result: tuple[list[tuple[NodeGroup, Node]], list[PlacementOutcome], NodeMatrix],
    groups: Sequence[NodeGroup],
) -> tuple[int, float]:
    """A scale-up's (workloads left unplaced, price of its new nodes): lower is better."""
    new_nodes, outcomes, _ = result
    return sum(not o.placed for o in outcomes), sum(g.price_per_hour for g, _ in new_nodes)


def _rounds(
    state: ClusterState,
    groups: Sequence[NodeGroup],
    sizes: dict[str, int],
    pending: list[Workload],
    outcomes: list[PlacementOutcome],
    place_all: Callable[[NodeMatrix], list[PlacementOutcome]],
    options: PlanOptions,
    taken: set[str],
    next_id: dict[str, int],
    balance: bool,
) -> tuple[list[tuple[NodeGroup, Node]], list[PlacementOutcome], NodeMatrix]:
    """The estimator's rounds from ``outcomes`` (the pending work on the cluster as it is);
    ``balance``: new nodes of one fill spread over similar groups (``estimate.balanced``)."""
    place = options.placement
    matrix = state.matrix.copy()
    headroom = [max(g.max_count - sizes[g.id], 0) for g in groups]
    new_nodes: list[tuple[NodeGroup, Node]] = []
    for _ in range(_ROUNDS):
        left = [w for w, o in zip(pending, outcomes, strict=True) if not o.placed]
        if not left or not groups:
            break
        prices = _prices(groups, headroom, left)
        opened = estimate(groups, headroom, left, prices, options.fill_by_mix, balance)
        if not opened:
            break
        for o in opened:
            g = groups[o.group_index]
            for _ in range(o.count):
                new_nodes.append((g, _fresh(g, taken, next_id)))
        new_nodes = _ordered(new_nodes)
        matrix = scratch.extend(state.matrix, [nd for _, nd in new_nodes])
        outcomes = place_all(matrix)
    if new_nodes:
        used = {p.node_id for o in outcomes for p in o.placements}
        kept = [(g, nd) for g, nd in new_nodes if nd.id in used]
        kept = _drop_spare(kept, pending, outcomes, place)
        if len(kept) < len(new_nodes):
            trimmed = scratch.extend(state.matrix, [nd for _, nd in kept])
            again = place_all(trimmed)
            if sum(o.placed for o in again) >= sum(o.placed for o in outcomes):
                new_nodes, outcomes, matrix = kept, again, trimmed
    return new_nodes, outcomes, matrix


def _drop_spare(
    new_nodes: list[tuple[NodeGroup, Node]],
    pending: list[Workload],
    outcomes: list[PlacementOutcome],
    place: PlacementOptions,
) -> list[tuple[NodeGroup, Node]]:
    """Drop new nodes the others can do without: the dearest first (then the emptiest, then by
    id), a node goes when what landed on it places on the other new nodes' free room. A greedy
    estimate can open a cheap node that a dearer one's spare room makes unnecessary; this pass
    removes it. Judged on the new nodes alone (cheap); the caller re-places everything and
    keeps the result only if nothing is lost. At most ``_DROP_TRIES`` tries."""
    ids = {nd.id for _, nd in new_nodes}
    small = matrix_from_nodes([nd for _, nd in new_nodes])
    on: dict[str, list[tuple[Workload, Placement]]] = {}
    for w, o in zip(pending, outcomes, strict=True):
        for p in o.placements:
            if p.node_id in ids:
                scratch.allocate(small, w.request, [p])
                on.setdefault(p.node_id, []).append((w, p))
    order = sorted(
        new_nodes, key=lambda gn: (-gn[0].price_per_hour, len(on.get(gn[1].id, ())), gn[1].id)
    )
    dropped: set[str] = set()
    for _, nd in order[:_DROP_TRIES]:
        here = on.get(nd.id, [])
        if len(dropped) + 1 >= len(new_nodes) or any(w.replicas > 1 for w, _ in here):
            continue
        n = small.index[nd.id]
        room = small.free.sum(axis=0) - small.free[n]
        need = [sum(w.request.get(r, 0) for w, _ in here) for r in small.resources]
        if any(a > int(b) for a, b in zip(need, room.tolist(), strict=True)):
            continue  # the others' free room cannot hold it even as a sum
        for w, p in here:
            scratch.unallocate(small, w.request, [p])
        blocked = scratch.block(small, n)
        moving = [w for w, _ in here]
        found = place_batch(small, moving, place)
        if all(o.placed for o in found):
            for w, o in zip(moving, found, strict=True):
                scratch.allocate(small, w.request, o.placements)
            dropped.add(nd.id)  # stays blocked: nothing else lands there
            continue
        scratch.unblock(small, blocked)
        for w, p in here:
            scratch.allocate(small, w.request, [p])
    return [gn for gn in new_nodes if gn[1].id not in dropped]


def _ordered(new_nodes: list[tuple[NodeGroup, Node]]) -> list[tuple[NodeGroup, Node]]:
    """New nodes by group id then serial, the order a client appends them in."""
    return sorted(new_nodes, key=lambda gn: (gn[0].id, len(gn[1].id), gn[1].id))


def _fresh(g: NodeGroup, taken: set[str], next_id: dict[str, int]) -> Node:
    while True:
        nd = g.new_node(next_id[g.id])
        next_id[g.id] += 1
        if nd.id not in taken:
            taken.add(nd.id)
            return nd


def _prices(
    groups: Sequence[NodeGroup], headroom: list[int], left: list[Workload]
) -> bound.LpResult:
    """Dual prices of the pending demand's LP over the groups' headroom; when that LP is
    infeasible (not enough headroom, or a model no group has), each resource at its cheapest
    price per unit over the groups that have it."""
    per_resource, per_models = bound.demand(left)
    columns = [
        bound.GroupColumn(g.price_per_hour, g.template.capacity, g.template.gpu_model, 0.0,
                          float(h))
        for g, h in zip(groups, headroom, strict=True)
    ]  # fmt: skip
    lp = bound.solve(columns, per_resource, per_models)
    if lp.feasible and lp.resource_prices:
        return lp
    cheapest: dict[str, float] = {}
    for g in groups:
        for r, amount in g.template.capacity.items():
            if amount > 0:
                unit = g.price_per_hour / amount
                cheapest[r] = min(cheapest.get(r, unit), unit)
    return bound.LpResult(0.0, False, cheapest, {})
