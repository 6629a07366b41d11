"""``simulate --protocol autoscale``: a trace on its own clock, each autoscaler scaling the cluster.

The replay runs on the engine (``Engine``: push, place, release, update), in steps of
``step_s`` seconds of simulated time. Each step: workloads whose time is up are released;
ordered nodes whose provisioning delay has passed join the cluster; what waits is placed
(arrival order, the autoscaler's scheduler policy; for an autoscaler that ``arranges``, Strata,
as Strata places: ``strata_place``); then the autoscaler decides, seeing what
still waits minus what the ready nodes' free room and the nodes being provisioned will hold
together (an autoscaler's "upcoming nodes"). New nodes cost from the moment they are ordered;
a node being replaced goes only once its replacement is ready; a removed node's replicas are
evicted and wait again.

Figures per autoscaler: total cost; cost over the lower bound (``capacity.bound.lower_bound``
with integral node counts over the demand of every step, no count limits, joined over the
run by ``capacity.time_bound``: non-preemptible work pinned, each node paid from
``⌊delay / step⌋`` steps before it holds work, as here; a step whose solve hit the time
limit counts the bound proven by then and is counted in ``Timeline.inexact``); pending time
p50/p99 (arrival, or eviction, to placement); evictions;
node churn (added + removed); guarantee violations (steps, sampled every ``check_every``
steps, where ``capacity.checks.guarantee_backed`` finds an effective guarantee short).

**Never placed.** A workload whose departure passes while it still waits, after a step saw it
waiting (its whole life pending, or pending again after an eviction), counts as pending until
its departure, and in ``Timeline.never_placed``: it waited all that time and its demand then
ended, so that is the wait it saw. Dropping it (as the replay did before) left the worst waits
out of p99 exactly when an autoscaler is too slow for short-lived work; counting it until the
end of the run instead would make its wait depend on how long the trace goes on after it
left. A workload that arrives and leaves between two steps was seen by no decision (the
replay's resolution, the same for every autoscaler): it is counted in ``Timeline.unseen`` and
left out of the percentiles, which its short waits would only dilute. A workload still waiting
at the end (no departure, or the run stops) counts until the end.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from strata_policy.capacity import NodeGroup, checks, scratch, time_bound
from strata_policy.capacity.arrange import arrange
from strata_policy.capacity.catalog import GROUP_LABEL, could_hold, spread_by_label
from strata_policy.engine import Engine
from strata_policy.model import Node, RunningWorkload, Scope, Snapshot, Workload
from strata_policy.model.resources import GPU, MILLI_PER_GPU
from strata_policy.placement.place import PlacementOptions, place_batch
from strata_policy.simulate import autoscale_cost as cost_
from strata_policy.simulate import autoscale_failures as failures_
from strata_policy.simulate import strata_place
from strata_policy.simulate.autoscale_failures import Failure
from strata_policy.simulate.autoscalers import Actions, View
from strata_policy.simulate.trace import TimedWorkload
from strata_policy.state.changes import Delta
from strata_policy.state.nodes import NodeMatrix

CLUSTER = "autoscale"


class Autoscaler(Protocol):
    """What the replay drives."""

    @property
    def name(self) -> str:
        """The table's name for it."""

    @property
    def placement(self) -> PlacementOptions:
        """The scheduler policy its cluster runs."""

    def decide(self, view: View) -> Actions:
        """One decision on the current view."""


@dataclass
class Timeline:
    """One replay's series and totals."""

    name: str
    times_h: list[float] = field(default_factory=list)
    cost_per_hour: list[float] = field(default_factory=list)
    bound_per_hour: list[float] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    provisioning_per_hour: list[float] = field(default_factory=list)
    empty_per_hour: list[float] = field(default_factory=list)
    idle_per_hour: list[float] = field(default_factory=list)
    ready: list[dict[str, int]] = field(default_factory=list)
    """Per step, the ready nodes of each group (where the cost goes, per group and hour)."""
    added: int = 0
    removed: int = 0
    failures: list[Failure] = field(default_factory=list)
    waits_s: list[float] = field(default_factory=list)
    never_placed: int = 0
    unseen: int = 0
    inexact: int = 0
    bound_total: float = 0.0
    joined: bool = False
    bound_how: str = ""
    evictions: int = 0
    churn: int = 0
    violations: int = 0
    checked: int = 0

    def total(self, series: list[float], step_h: float) -> float:
        """∫ series dt in dollars."""
        return float(sum(series)) * step_h


@dataclass(frozen=True, slots=True)
class Summary:
    """One row of the table."""

    name: str
    cost: float
    lower_bound: float
    p50_s: float
    p99_s: float
    evictions: int
    churn: int
    violations: int
    checked: int
    provisioning: float = 0.0
    empty: float = 0.0
    idle: float = 0.0
    added: int = 0
    removed: int = 0
    failures: int = 0
    short: int = 0
    missed: int = 0
    false_alarms: int = 0
    never_placed: int = 0
    steps: int = 0
    inexact: int = 0
    joined: bool = False
    unseen: int = 0
    bound_how: str = ""

    @property
    def ratio(self) -> float:
        """Cost over the lower bound."""
        return self.cost / self.lower_bound if self.lower_bound else float("nan")


def replay(
    autoscaler: Autoscaler,
    groups: Sequence[NodeGroup],
    scopes: Sequence[Scope],
    trace: Sequence[TimedWorkload],
    *,
    speedup: float = 1.0,
    step_s: float = 60.0,
    delay_s: float = 120.0,
    check_every: int = 10,
    failures: Sequence[tuple[float, str]] = (),
    seed: int = 0,
    held: bool = False,
) -> Timeline:
    """Replay ``trace`` (its times divided by ``speedup``) under ``autoscaler``; at each
    ``(time_s, kind)`` of ``failures`` a node or a zone fails (``autoscale_failures``).

    The bound is over each step's demand (what runs and what waits: the same for every
    autoscaler, the figures' yardstick). With ``held`` it is over what this autoscaler's
    nodes hold at each step, each workload keyed by its nodes (a moved one is another), so
    it is ≤ what this autoscaler paid by construction: the demand bound is not, for an
    autoscaler that leaves work waiting pays for less than the demand (test
    ``test_demand_bound_is_a_yardstick``)."""
    engine = Engine(clock=lambda: 0)
    engine.push_snapshot(CLUSTER, _snapshot(scopes))
    by_id = {g.id: g for g in groups}
    events = sorted(trace, key=lambda tw: (tw.arrival_ms, tw.workload.id))
    end_s = max((_t(tw.departure_ms or tw.arrival_ms, speedup) for tw in events), default=0.0)
    out = Timeline(autoscaler.name)
    waiting: dict[str, tuple[Workload, float]] = {}
    leave: dict[str, float] = {}
    ordered: list[tuple[float, Node]] = []
    deferred: list[tuple[float, list[str]]] = []
    added_at: dict[str, float] = {}
    serial = 0
    due_failures = sorted(failures)
    rng = random.Random(seed)
    demands: list[list[Workload]] = []
    inexact: set[int] = set()  # steps whose integral bound hit its time limit
    options = autoscaler.placement
    arranges = getattr(autoscaler, "arranges", False) is True
    nominated: dict[str, tuple[str, ...]] = {}
    i, now = 0, 0.0
    while now <= end_s + step_s or waiting:
        if now > end_s + 48 * 3600:
            break
        while i < len(events) and _t(events[i].arrival_ms, speedup) <= now:
            tw = events[i]
            waiting[tw.workload.id] = (tw.workload, _t(tw.arrival_ms, speedup))
            if tw.departure_ms is not None:
                leave[tw.workload.id] = _t(tw.departure_ms, speedup)
            i += 1
        _, snap = engine.snapshot(CLUSTER)
        gone = [rw.workload.id for rw in snap.workloads if leave.get(rw.workload.id, 1e30) <= now]
        expired = [wid for wid in list(waiting) if leave.get(wid, 1e30) <= now]
        for wid in expired:  # never placed: pending until its departure (module docstring)
            since = waiting.pop(wid)[1]
            if since > now - step_s:  # arrived after the last step: no decision saw it
                out.unseen += 1
            else:
                out.waits_s.append(leave[wid] - since)
                out.never_placed += 1
        gone += expired
        if gone:
            engine.release(CLUSTER, gone)
        ready = [nd for t, nd in ordered if t <= now]
        ordered = [(t, nd) for t, nd in ordered if t > now]
        if ready:
            engine.update_snapshot(CLUSTER, Delta(upsert_nodes=tuple(ready)))
        due = [ids for t, ids in deferred if t <= now]
        deferred = [(t, ids) for t, ids in deferred if t > now]
        for ids in due:
            out.evictions += _remove(engine, ids, waiting, now)
            out.churn += len(ids)
            out.removed += len(ids)
        if waiting:
            queue = [w for w, _ in sorted(waiting.values(), key=lambda wa: (wa[1], wa[0].id))]
            if arranges:
                coming = {nd.id for _, nd in ordered}
                leaving = {nid for _, ids in deferred for nid in ids}
                placed = strata_place.place(
                    engine, CLUSTER, queue, nominated, coming, options, leaving
                )
            else:
                result = engine.place(CLUSTER, queue, options=options)
                placed = [r.workload_id for r in result.results if r.placements]
            for wid in placed:
                out.waits_s.append(now - waiting.pop(wid)[1])
        state = engine.store.slot(CLUSTER).require(CLUSTER)
        pending = [w for w, _ in waiting.values()]
        provisioning: dict[str, int] = {}
        for _, nd in ordered:
            gid = nd.labels[GROUP_LABEL]
            provisioning[gid] = provisioning.get(gid, 0) + 1
        running = [rw for rw in state.workloads.values() if rw.placed] if arranges else []
        uncovered, taken = _uncovered(
            state.matrix, pending, [nd for _, nd in ordered], options, running, arranges
        )
        awaited = frozenset(nid for ids in nominated.values() for nid in ids)
        view = View(now, state, uncovered, groups, provisioning, added_at, taken, awaited)
        actions = autoscaler.decide(view)
        names = {gid: iter(ids) for gid, ids in actions.names.items()}
        renamed: dict[str, str] = {}
        for gid, count in actions.add:
            for _ in range(count):
                nd = by_id[gid].new_node(serial)
                if (planned := next(names.get(gid, iter(())), None)) is not None:
                    renamed[planned] = nd.id
                serial += 1
                ordered.append((now + delay_s, nd))
                added_at[nd.id] = now
                out.churn += 1
                out.added += 1
        for wid, node_ids in actions.nominated.items():
            if wid in waiting:
                nominated[wid] = tuple(renamed.get(nid, nid) for nid in node_ids)
        if actions.remove:
            if actions.add:
                deferred.append((now + delay_s, list(actions.remove)))
            else:
                out.evictions += _remove(engine, actions.remove, waiting, now)
                out.churn += len(actions.remove)
                out.removed += len(actions.remove)
        while due_failures and due_failures[0][0] <= now:
            _, kind = due_failures.pop(0)
            failed = _fail(engine, kind, rng, autoscaler.placement, now)
            if failed is not None:
                out.failures.append(failed)
                out.evictions += _remove(engine, failed.node_ids, waiting, now)
        state = engine.store.slot(CLUSTER).require(CLUSTER)
        price = sum(
            by_id[nd.labels[GROUP_LABEL]].price_per_hour
            for nd in [*state.nodes, *(nd for _, nd in ordered)]
        )
        if held:
            demand = [cost_.keyed(rw) for rw in state.workloads.values() if rw.placed]
        else:
            demand = [rw.workload for rw in state.workloads.values()]
            demand += [w for w, _ in waiting.values()]
        out.times_h.append(now / 3600)
        out.cost_per_hour.append(price)
        out.provisioning_per_hour.append(
            sum(by_id[nd.labels[GROUP_LABEL]].price_per_hour for _, nd in ordered)
        )
        empty, idle = cost_.idle(state.matrix, state.nodes, by_id)
        out.empty_per_hour.append(empty)
        out.idle_per_hour.append(idle)
        out.ready.append(_count_groups(state.nodes))
        demands.append(demand)
        lower, exact = cost_.step_bound(groups, demand)
        out.bound_per_hour.append(lower)
        if not exact:
            inexact.add(len(out.bound_per_hour) - 1)
        out.pending.append(len(waiting))
        if len(out.times_h) % check_every == 0:
            out.checked += 1
            running = [rw for rw in state.workloads.values() if rw.placed]
            if checks.guarantee_backed(state.matrix, state.tree, running, pending):
                out.violations += 1
        now += step_s
    out.waits_s.extend(end_s - a for _, a in waiting.values())
    pinned = held or not out.failures  # with failures, non-preemptible work moves
    lead = math.floor(delay_s / step_s + 1e-9)  # steps a node is paid before it is ready
    joined = time_bound.time_bound(
        cost_.columns(groups), demands, out.bound_per_hour, step_s / 3600, pinned=pinned,
        lead=lead,
    )  # fmt: skip
    out.bound_total, out.joined, out.bound_how = joined.value, joined.joined, joined.why
    out.inexact = len(inexact | joined.inexact)
    out.bound_per_hour = list(joined.per_step)
    return out


def _fail(
    engine: Engine, kind: str, rng: random.Random, options: PlacementOptions, now: float
) -> Failure | None:
    """Pick the domain, take the N+1 check, re-place for real (``autoscale_failures``)."""
    state = engine.store.slot(CLUSTER).require(CLUSTER)
    chosen = failures_.choose(state, kind, rng)
    if chosen is None:
        return None
    domain, node_ids = chosen
    _, snap = engine.snapshot(CLUSTER)
    return Failure(
        now, domain, node_ids, failures_.predicted(state, domain, options),
        failures_.actual(snap, state, node_ids, options),
    )  # fmt: skip


def _count_groups(nodes: Sequence[Node]) -> dict[str, int]:
    out: dict[str, int] = {}
    for nd in nodes:
        gid = nd.labels.get(GROUP_LABEL, "")
        out[gid] = out.get(gid, 0) + 1
    return out


def _t(ms: int, speedup: float) -> float:
    return ms / 1000 / speedup


def _snapshot(scopes: Sequence[Scope]) -> Snapshot:
    return Snapshot((), tuple(scopes), ())


def _remove(
    engine: Engine, node_ids: Sequence[str], waiting: dict[str, tuple[Workload, float]], now: float
) -> int:
    """Evict what runs on ``node_ids`` (queued again) and drop the nodes; returns evictions."""
    _, snap = engine.snapshot(CLUSTER)
    ids = set(node_ids)
    evicted = [rw for rw in snap.workloads if any(p.node_id in ids for p in rw.placements)]
    if evicted:
        engine.release(CLUSTER, [rw.workload.id for rw in evicted])
        for rw in evicted:
            waiting[rw.workload.id] = (rw.workload, now)
    present = [nid for nid in node_ids if any(nd.id == nid for nd in snap.nodes)]
    if present:
        engine.update_snapshot(CLUSTER, Delta(remove_node_ids=tuple(present)))
    return sum(len(rw.placements) for rw in evicted)


def _uncovered(
    matrix: NodeMatrix,
    pending: list[Workload],
    coming: list[Node],
    options: PlacementOptions,
    running: Sequence[RunningWorkload] = (),
    arranges: bool = False,
) -> tuple[list[Workload], dict[str, frozenset[str]]]:
    """What waits minus what the ready nodes' free room and the nodes being provisioned will
    hold (an autoscaler's "upcoming nodes"), in order; and, for each gang left whose spread
    is by a label other than the hostname, the values of that label where a ready or coming
    node has room for one of its replicas (a zone ordered for it in an earlier loop). An
    autoscaler that ``arranges`` is asked with its own rule (``arrange.arrange``): room it
    would not use covers nothing."""
    if not pending:
        return pending, {}
    m = scratch.extend(matrix, coming) if coming else matrix.copy()
    out = []
    if arranges:
        outcomes = arrange(m, pending, options, running)
    else:
        outcomes = place_batch(m, pending, options)
    for w, o in zip(pending, outcomes, strict=True):
        if o.placed:
            scratch.allocate(m, w.request, o.placements)
        else:
            out.append(w)
    taken: dict[str, frozenset[str]] = {}
    for w in out:
        if not spread_by_label(w):
            continue
        key = w.spread_key
        values = {
            v for n in range(len(m))
            if (v := m.nodes[n].label(key)) is not None and could_hold(m.nodes[n], w)
            and _fits_free(m, n, w)
        }  # fmt: skip
        if values:
            taken[w.id] = frozenset(values)
    return out, taken


def _fits_free(m: NodeMatrix, n: int, w: Workload) -> bool:
    free = m.free_of(n)
    return all(free.get(r, 0) >= a for r, a in w.request.items() if r != GPU) and (
        w.request.get(GPU, 0) == 0
        or int(m.gpu_free[n].max(initial=0)) >= min(w.request.get(GPU, 0), MILLI_PER_GPU)
    )


def summarise(t: Timeline, step_s: float) -> Summary:
    """A timeline's totals."""
    step_h = step_s / 3600
    waits = np.asarray(t.waits_s or [0.0])
    return Summary(
        t.name, t.total(t.cost_per_hour, step_h),
        t.bound_total if t.joined else t.total(t.bound_per_hour, step_h),
        float(np.percentile(waits, 50)), float(np.percentile(waits, 99)),
        t.evictions, t.churn, t.violations, t.checked,
        t.total(t.provisioning_per_hour, step_h), t.total(t.empty_per_hour, step_h),
        t.total(t.idle_per_hour, step_h), t.added, t.removed, len(t.failures),
        sum(1 for f in t.failures if f.actual), sum(1 for f in t.failures if f.missed),
        sum(1 for f in t.failures if f.false_alarm), t.never_placed, len(t.times_h), t.inexact,
        t.joined, t.unseen, t.bound_how,
    )  # fmt: skip
