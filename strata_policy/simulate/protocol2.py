"""Protocol 2, the trace's own clock: arrivals, departures, quotas, reclaim, over time.

Each workload arrives at its ``arrival_ms`` and, once placed, runs for its trace duration
(``departure_ms − arrival_ms``; forever when the trace has no departure), so time spent pending
pushes its departure back. At each distinct event time the replay first releases what departs,
then offers the engine the pending workloads (the first ``window`` in arrival order plus every
new arrival) in one ``place`` call, which admits against the scopes' quotas and places. A
workload the engine answers NEEDS_RECLAIM is then reclaimed for, committed
(``require_placement=True``): its victims are evicted and go back to the queue with the run time
they had left. DENIED and UNPLACED workloads wait for the next event. A departure of an evicted
run is ignored (each run carries a token).

It reports the time-weighted GPU utilisation, the pending time of the workloads that started
(mean and p95), the reclaims and evictions, and a timeline (hours, GPU %, pending count).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from strata_policy.engine import Engine
from strata_policy.model import Decision, Placement, Scope, Snapshot, Workload
from strata_policy.simulate.metrics import ClusterMirror, typical_shapes
from strata_policy.simulate.policies import PolicySpec, placement_options
from strata_policy.simulate.protocol1 import CLUSTER_ID
from strata_policy.simulate.trace import Trace

DEFAULT_WINDOW = 32
TIMELINE_POINTS = 400
MS_PER_HOUR = 3_600_000


@dataclass(frozen=True, slots=True)
class Replay2Result:
    """One protocol-2 replay: utilisation, pending times, reclaims, and a timeline."""

    trace: str
    policy: str
    seed: int
    workloads: int
    started: int  # workloads that ran at least once
    never_started: int
    reclaims: int  # committed reclaims
    evictions: int  # victims those reclaims evicted
    mean_pending_s: float
    p95_pending_s: float
    gpu_util_pct: float  # time-weighted mean of allocated / capacity GPU
    timeline: tuple[tuple[float, float, int], ...]  # (hours, GPU allocated %, pending)
    decisions: int
    seconds: float

    @property
    def decisions_per_s(self) -> float:
        """Workload decisions (place or reclaim) per second of engine time."""
        return self.decisions / self.seconds if self.seconds > 0 else float("inf")


@dataclass(slots=True)
class _Run:
    workload: Workload
    placements: tuple[Placement, ...]
    started_ms: int
    remaining_ms: int | None
    token: int


class _Queue:
    """The replay's moving parts: the event heap, pending and running work, the mirror."""

    def __init__(self, trace: Trace) -> None:
        self.mirror = ClusterMirror(trace.nodes)
        self.by_id = {t.workload.id: t.workload for t in trace.workloads}
        self.arrival = {t.workload.id: t.arrival_ms for t in trace.workloads}
        self.duration: dict[str, int | None] = {
            t.workload.id: None if t.departure_ms is None else max(0, t.departure_ms - t.arrival_ms)
            for t in trace.workloads
        }
        # (time, 0 = departure / 1 = arrival, run token, workload id): departures first at a time
        self.events = [(t.arrival_ms, 1, 0, t.workload.id) for t in trace.workloads]
        heapq.heapify(self.events)
        self.pending: dict[str, Workload] = {}
        self.running: dict[str, _Run] = {}
        self.first_start: dict[str, int] = {}
        self.tokens = 0

    def pop_due(self) -> tuple[int, list[str], list[Workload]]:
        """The next event time, the runs that end then (dropped here), and the arrivals."""
        now = self.events[0][0]
        released: list[str] = []
        fresh: list[Workload] = []
        while self.events and self.events[0][0] == now:
            _, kind, token, wid = heapq.heappop(self.events)
            if kind == 1:
                self.pending[wid] = self.by_id[wid]
                fresh.append(self.by_id[wid])
            elif wid in self.running and self.running[wid].token == token:
                run = self.running.pop(wid)
                self.mirror.apply(run.workload, run.placements, sign=-1)
                released.append(wid)
        return now, released, fresh

    def start(self, w: Workload, placements: Sequence[Placement], now: int) -> None:
        """``w`` runs from ``now`` on ``placements``; its departure joins the heap."""
        self.tokens += 1
        self.pending.pop(w.id, None)
        remaining = self.duration[w.id]
        self.running[w.id] = _Run(w, tuple(placements), now, remaining, self.tokens)
        self.mirror.apply(w, placements)
        self.first_start.setdefault(w.id, now)
        if remaining is not None:
            heapq.heappush(self.events, (now + remaining, 0, self.tokens, w.id))

    def evict(self, workload_id: str, now: int) -> bool:
        """A reclaim took ``workload_id``: back to the queue with the run time it had left."""
        run = self.running.pop(workload_id, None)
        if run is None:
            return False
        self.mirror.apply(run.workload, run.placements, sign=-1)
        if run.remaining_ms is not None:
            self.duration[workload_id] = max(0, run.remaining_ms - (now - run.started_ms))
        self.pending[workload_id] = run.workload
        return True


def replay2(
    trace: Trace, spec: PolicySpec, seed: int, window: int = DEFAULT_WINDOW
) -> Replay2Result:
    """Replay ``trace`` on its own clock with one policy; see the module docstring."""
    shapes = typical_shapes(t.workload for t in trace.workloads)
    options = placement_options(spec, seed, shapes)
    rng = np.random.default_rng([seed, 1])
    nodes = tuple(trace.nodes[i] for i in rng.permutation(len(trace.nodes)))
    clock = [0]  # the replay's time, which the engine reads as its clock
    engine = Engine(clock=lambda: clock[0])
    engine.push_snapshot(CLUSTER_ID, Snapshot(nodes=nodes, scopes=_scopes(trace)))
    q = _Queue(trace)
    capacity = q.mirror.gpu_capacity or 1
    reclaims = evictions = decisions = 0
    samples: list[tuple[int, float, int]] = []
    engine_s = 0.0

    while q.events:
        now, released, fresh = q.pop_due()
        clock[0] = now
        started = time.perf_counter()
        if released:
            engine.release(CLUSTER_ID, released)
        head = list(q.pending.values())[:window]
        in_head = {w.id for w in head}
        offer = head + [w for w in fresh if w.id not in in_head]
        results = (
            engine.place(CLUSTER_ID, workloads=offer, options=options, now_ms=now).results
            if offer
            else ()
        )
        engine_s += time.perf_counter() - started
        decisions += len(offer)
        to_reclaim: list[Workload] = []
        for result in results:
            w = q.pending.get(result.workload_id)
            if w is not None and result.decision is Decision.PLACED:
                q.start(w, result.placements, now)
            elif w is not None and result.decision is Decision.NEEDS_RECLAIM:
                to_reclaim.append(w)
        for w in to_reclaim:
            started = time.perf_counter()
            answer = engine.reclaim(CLUSTER_ID, w, require_placement=True, options=options)
            engine_s += time.perf_counter() - started
            decisions += 1
            done = answer.result
            if not answer.satisfiable or done is None or done.decision is not Decision.PLACED:
                continue
            reclaims += 1
            evictions += sum(q.evict(v.workload_id, now) for v in answer.victims)
            q.start(w, done.placements, now)
        samples.append((now, 100.0 * q.mirror.gpu_allocated / capacity, len(q.pending)))

    waits = np.array([t - q.arrival[i] for i, t in q.first_start.items()], dtype=np.float64)
    waits /= 1000
    return Replay2Result(
        trace=trace.name,
        policy=spec.label,
        seed=seed,
        workloads=len(trace.workloads),
        started=len(q.first_start),
        never_started=len(trace.workloads) - len(q.first_start),
        reclaims=reclaims,
        evictions=evictions,
        mean_pending_s=float(waits.mean()) if waits.size else 0.0,
        p95_pending_s=float(np.percentile(waits, 95)) if waits.size else 0.0,
        gpu_util_pct=_time_weighted(samples),
        timeline=_downsample(samples),
        decisions=decisions,
        seconds=engine_s,
    )


def _scopes(trace: Trace) -> tuple[Scope, ...]:
    """The trace's scopes plus an unlimited top-level scope for any scope id they lack."""
    known = {s.id for s in trace.scopes}
    missing = sorted({t.workload.scope_id for t in trace.workloads} - known)
    return tuple(trace.scopes) + tuple(Scope(id=s) for s in missing)


def _time_weighted(samples: Sequence[tuple[int, float, int]]) -> float:
    if len(samples) < 2:
        return samples[0][1] if samples else 0.0
    times = np.array([s[0] for s in samples], dtype=np.float64)
    util = np.array([s[1] for s in samples], dtype=np.float64)
    span = times[-1] - times[0]
    return float((util[:-1] * np.diff(times)).sum() / span) if span > 0 else float(util.mean())


def _downsample(samples: Sequence[tuple[int, float, int]]) -> tuple[tuple[float, float, int], ...]:
    step = max(1, len(samples) // TIMELINE_POINTS)
    picked = list(samples[::step])
    if samples and picked[-1] is not samples[-1]:
        picked.append(samples[-1])
    return tuple((t / MS_PER_HOUR, round(u, 3), p) for t, u, p in picked)
