"""``plan_capacity``: the whole plan of DESIGN §8 from a cluster's state, a catalog and the
pending workloads. Pure: the state is read, never changed (every simulation runs on scratch
matrices and a copy of the quota tree). Deterministic: the same inputs give the same plan.

Order of work:

1. **Quota.** Pending = the cluster's admitted-but-unplaced workloads (admission order), then
   the given ones (request order). A given workload is checked against the limits on its path
   with the earlier given ones charged (``quota.check_admit``); one a limit would deny is
   ``unplaceable`` with its ``LIMIT_EXCEEDED`` reasons and planned for no further. Headroom is
   not a reason here: adding capacity is the point.
2. **Scale-up.** Pending workloads are placed (one ``place_batch``, the request's policy, or
   ``arrange`` with ``PlanOptions.arrange``) on the cluster; for those left, ``estimate``
   opens the cheapest nodes per LP value; everything
   pending is placed again on the cluster plus the new nodes (appended in group then serial
   order); leftovers ask the estimator again (at most ``_ROUNDS`` rounds); new nodes that end
   up empty are dropped. So applying the plan (adding its new nodes to the snapshot) and
   placing the same workloads in the same order with the same options gives exactly the
   placements the plan promises. What still does not place is ``unplaceable`` with Place's
   reasons, counted over the cluster, the new nodes and one empty node of every group.
3. **Consolidation** (``consolidate``) on the cluster after scale-up.
4. **Checks** (``checks``) on the cluster after the plan.
5. **Cost** = Σ group price over the catalog's nodes after the plan; the **lower bound** is the
   LP of ``bound`` over every workload the plan holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from strata_policy.capacity import bound, checks, scratch
from strata_policy.capacity.arrange import arrange
from strata_policy.capacity.catalog import GROUP_LABEL, NodeGroup, group_counts, validate_catalog
from strata_policy.capacity.consolidate import consolidate
from strata_policy.capacity.estimate import estimate
from strata_policy.capacity.plan import CapacityPlan, PlanOptions, ScaleUp, Unplaceable
from strata_policy.model import Node, Placement, Reason, ReasonCode, RunningWorkload, Workload
from strata_policy.placement.place import (
    PlacementOptions,
    PlacementOutcome,
    place_batch,
    place_one,
)
from strata_policy.quota.check import check_admit
from strata_policy.state.cluster import ClusterState
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.nodes import NodeMatrix

_ROUNDS = 4
_DROP_TRIES = 64


def plan_capacity(
    state: ClusterState,
    groups: Sequence[NodeGroup],
    workloads: Sequence[Workload] = (),
    options: PlanOptions | None = None,
) -> CapacityPlan:
    """The capacity plan (see the module docstring). Raises ``InvalidArgument`` for a bad
    catalog or workload, ``SizeLimitExceeded`` for a catalog that is too big."""
    options = options or PlanOptions()
    running = list(state.workloads.values())
    waiting = [rw.workload for rw in running if not rw.placed]
    placed_running = [rw for rw in running if rw.placed]
    everything = [rw.workload for rw in running] + list(workloads)
    resources = set(state.matrix.resources) | {r for w in everything for r in w.request}
    counts = group_counts(state.nodes)
    validate_catalog(groups, state.nodes, sorted(resources), counts)
    sizes = {g.id: counts.get(g.id, 0) for g in groups}

    tree = state.tree.copy()
    unplaceable: list[Unplaceable] = []
    pending = list(waiting)
    for w in workloads:
        verdict = check_admit(tree, w, state.capacity)
        if not verdict.within_limits:
            unplaceable.append(Unplaceable(w.id, verdict.limit_reasons))
            continue
        tree.charge(w.scope_id, w.total)
        pending.append(w)

    taken = {nd.id for nd in state.nodes}
    next_id = {g.id: 0 for g in groups}
    new_nodes, outcomes, matrix = _scale_up(
        state, groups, sizes, pending, placed_running, options, taken, next_id
    )
    scale_up = _scale_up_entries(new_nodes, pending, outcomes)
    planned: dict[str, tuple[str, ...]] = {}
    now_running = list(placed_running)
    pinned = {nd.id for _, nd in new_nodes} | set(options.keep)
    by_id = {rw.workload.id: rw for rw in running}
    left: list[Workload] = []
    for w, o in zip(pending, outcomes, strict=True):
        if o.placed:
            scratch.allocate(matrix, w.request, o.placements)  # place_batch does not commit
            planned[w.id] = tuple(p.node_id for p in o.placements)
            pinned.update(planned[w.id])
            rw = RunningWorkload(
                w, o.placements, by_id[w.id].admitted_at_ms if w.id in by_id else 0
            )
            now_running.append(rw)
        else:
            left.append(w)
    unplaceable += _reasons(matrix, groups, next_id, left, options)
    for g, _ in new_nodes:
        sizes[g.id] += 1

    actions = []
    removed: set[str] = set()
    replacements: list[tuple[NodeGroup, Node]] = []
    if options.consolidate and groups:
        done = consolidate(
            matrix, now_running, groups, sizes, pinned, state.tree,
            options.placement, options.budget, next_id, options.max_candidates,
        )  # fmt: skip
        actions, removed, replacements = done.actions, done.removed, done.new_nodes
        now_running = list(done.running.values())

    final_nodes = [nd for nd in matrix.nodes if nd.id not in removed]
    final_nodes += [nd for _, nd in replacements]
    found = []
    if options.checks and checks.holders(state.tree):
        after = scratch.build(final_nodes, now_running)
        found = checks.guarantee_backed(after, state.tree, now_running, pending)
        found += checks.n_plus_one(after, state.tree, now_running)
    price = {g.id: g.price_per_hour for g in groups}
    cost = sum(price.get(nd.labels.get(GROUP_LABEL, ""), 0.0) for nd in final_nodes)
    held = [rw.workload for rw in now_running]
    lower = _lower_bound(groups, sizes, final_nodes, held)
    return CapacityPlan(
        scale_up=scale_up,
        consolidation=tuple(actions),
        unplaceable=tuple(sorted(unplaceable, key=lambda u: u.workload_id)),
        checks=tuple(found),
        cost_per_hour=cost,
        lower_bound_per_hour=_within_tolerance(lower, cost),
        placements=planned,
    )


def _scale_up(
    state: ClusterState,
    groups: Sequence[NodeGroup],
    sizes: dict[str, int],
    pending: list[Workload],
    running: list[RunningWorkload],
    options: PlanOptions,
    taken: set[str],
    next_id: dict[str, int],
) -> tuple[list[tuple[NodeGroup, Node]], list[PlacementOutcome], NodeMatrix]:
    """New nodes, the pending workloads' outcomes on the cluster plus them, that matrix."""
    place = options.placement

    def place_all(m: NodeMatrix) -> list[PlacementOutcome]:
        if options.arrange:
            return arrange(m, pending, place, running)
        return place_batch(m, pending, place)

    matrix = state.matrix.copy()
    outcomes = place_all(matrix)
    headroom = [max(g.max_count - sizes[g.id], 0) for g in groups]
    new_nodes: list[tuple[NodeGroup, Node]] = []
    for _ in range(_ROUNDS):
        left = [w for w, o in zip(pending, outcomes, strict=True) if not o.placed]
        if not left or not groups:
            break
        prices = _prices(groups, headroom, left)
        opened = estimate(groups, headroom, left, prices, options.fill_by_mix)
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


def _scale_up_entries(
    new_nodes: list[tuple[NodeGroup, Node]],
    pending: list[Workload],
    outcomes: list[PlacementOutcome],
) -> tuple[ScaleUp, ...]:
    landing: dict[str, list[str]] = {}
    node_group = {nd.id: g.id for g, nd in new_nodes}
    for w, o in zip(pending, outcomes, strict=True):
        for gid in dict.fromkeys(
            node_group[p.node_id] for p in o.placements if p.node_id in node_group
        ):
            landing.setdefault(gid, []).append(w.id)
    by_group: dict[str, list[str]] = {}
    for g, nd in new_nodes:
        by_group.setdefault(g.id, []).append(nd.id)
    return tuple(
        ScaleUp(gid, len(ids), tuple(landing.get(gid, ())), tuple(ids))
        for gid, ids in by_group.items()
    )


def _reasons(
    matrix: NodeMatrix,
    groups: Sequence[NodeGroup],
    next_id: dict[str, int],
    left: Sequence[Workload],
    options: PlanOptions,
) -> list[Unplaceable]:
    """Place's reasons for each of ``left``, each judged alone (nothing committed) over the
    cluster after scale-up plus one empty node of every group; one that would fit such a node
    is short only of the group's room (``max_count``), and says so."""
    if not left:
        return []
    empties = [g.new_node(next_id[g.id]) for g in groups]
    wider = scratch.extend(matrix, empties)
    group_of = {nd.id: g.id for g, nd in zip(groups, empties, strict=True)}
    out = []
    for w in left:
        outcome = place_one(wider, w, options.placement)
        reasons = outcome.reasons
        if outcome.placed:
            full = sorted({group_of.get(p.node_id, "") for p in outcome.placements} - {""})
            text = f"fits new nodes of {', '.join(full)}, at max_count" if full else "no room"
            reasons = (Reason(code=ReasonCode.NODES_UNFIT, message=text),)
        out.append(Unplaceable(w.id, reasons))
    return out


def _within_tolerance(lower: float, cost: float) -> float:
    """The bound, trimmed to the cost when it exceeds it by the solver's tolerance only (HiGHS
    is exact to about 1e-7 relative); a larger excess is kept, so a bug shows (the property
    test ``bound ≤ cost`` would fail) instead of being hidden."""
    return min(lower, cost) if lower <= cost * (1 + 1e-6) + 1e-9 else lower


def _lower_bound(
    groups: Sequence[NodeGroup],
    sizes: dict[str, int],
    final_nodes: Sequence[Node],
    held: Sequence[Workload],
) -> float:
    """The LP bound over what the plan holds (see ``bound``). A group is one column per shape
    of its nodes after the plan (0 to as many as it has: a node may be bigger or smaller than
    the template; only the labels a held workload selects or spreads on tell shapes apart)
    and one of new template nodes up to its ceiling, ``max(max_count, size)``; together at
    least its floor, ``min(min_count, size)``. The plan's own counts are a
    feasible point, so the bound never exceeds its cost."""
    by_id = {g.id: g for g in groups}
    fixed: list[Node] = []
    shapes: dict[tuple[str, str, tuple[tuple[str, int], ...], tuple[tuple[str, str], ...]], int]
    shapes = {}
    have: dict[str, int] = {}
    keys = {k for w in held for k in w.node_selector} | {w.spread_key for w in held}
    keys.discard("")
    for nd in final_nodes:
        gid = nd.labels.get(GROUP_LABEL, "")
        if gid not in by_id:
            fixed.append(nd)
            continue
        labels = tuple((k, v) for k, v in nd.labels.items() if k in keys) if keys else ()
        key = (gid, nd.gpu_model, tuple(nd.capacity.items()), labels)  # unsorted: see bound
        shapes[key] = shapes.get(key, 0) + 1
        have[gid] = have.get(gid, 0) + 1
    columns = [
        bound.GroupColumn(by_id[gid].price_per_hour, dict(cap), model, 0.0, float(n), gid,
                          dict(labels))
        for (gid, model, cap, labels), n in sorted(shapes.items(), key=repr)
    ]  # fmt: skip
    floors: dict[str, float] = {}
    for g in groups:
        now = have.get(g.id, 0)
        ceiling = max(g.max_count, sizes[g.id], now)
        template = g.new_node(0)
        columns.append(
            bound.GroupColumn(
                g.price_per_hour, template.capacity, template.gpu_model, 0.0,
                float(ceiling - now), g.id, template.labels,
            )
        )  # fmt: skip
        floors[g.id] = float(min(g.min_count, sizes[g.id], now))
    lp = bound.lower_bound(columns, held, fixed, floors)
    return lp.value if lp.feasible else 0.0
