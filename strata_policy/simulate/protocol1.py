"""Protocol 1, the FGD paper's: arrivals only, in a seeded order, up to 130 % of the GPUs.

The workload is built as the paper's simulator builds it: the trace's pods sorted by name and
shuffled with the seed, then tuned to ``tune`` × the cluster's GPU milli — while short, pods drawn
uniformly with replacement from the trace are appended until the next draw would overshoot; while
over, random pods are deleted. The nodes are shuffled with the seed too (the paper prefixes node
names with a per-seed random string and breaks ties by name; our engine breaks ties to the lowest
snapshot index, so a shuffled snapshot is the same rule). Nothing departs; a pod that fits nowhere
is skipped and still counts as arrived.

The whole arrival list goes to the engine in one ``place`` call (its fast path): with no
departures and failures skipped, that is exactly one call per arrival in sequence, which
``per_arrival=True`` does instead (a test pins that both agree).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from strata_policy.engine import Engine
from strata_policy.model import Decision, Order, Workload, WorkloadResult
from strata_policy.simulate.arrivals import DEFAULT_TUNE, build_arrivals, gpu_of, shuffled_nodes
from strata_policy.simulate.metrics import (
    BUCKETS,
    ClusterMirror,
    Shape,
    bucket_curve,
    typical_shapes,
)
from strata_policy.simulate.policies import PolicySpec, placement_options
from strata_policy.simulate.trace import Trace
from strata_policy.state.request_checks import Limits

CLUSTER_ID = "simulate"


@dataclass(frozen=True, slots=True)
class Replay1Result:
    """One protocol-1 replay: allocation curve, fragmentation, failures and speed."""

    trace: str
    policy: str
    seed: int
    arrivals: int
    failed: int
    curve: tuple[float, ...]  # allocated % of cluster GPUs per arrived bucket 0 … 130 %
    frag_ratio: float  # Σ F_n / Σ idle GPU milli after the last arrival
    seconds: float  # wall time of the engine calls only

    def at(self, arrived_pct: int) -> float:
        """Allocated % of the cluster's GPUs at ``arrived_pct`` % arrived (NaN if never)."""
        return self.curve[arrived_pct] if 0 <= arrived_pct < BUCKETS else float("nan")

    @property
    def decisions_per_s(self) -> float:
        """Placement decisions per second of engine time."""
        return self.arrivals / self.seconds if self.seconds > 0 else float("inf")


def replay1(
    trace: Trace,
    spec: PolicySpec,
    seed: int,
    *,
    tune: float = DEFAULT_TUNE,
    per_arrival: bool = False,
) -> Replay1Result:
    """Replay ``trace`` under protocol 1 with one policy and seed; see the module docstring."""
    arrivals = build_arrivals([t.workload for t in trace.workloads], trace.gpu_milli, seed, tune)
    shapes = typical_shapes(t.workload for t in trace.workloads)
    options = placement_options(spec, seed, shapes)
    # Protocol 1 has no clock (every arrival at time 0) and one batch may exceed the server's
    # default batch limit, which guards a network API, not an in-process replay.
    replicas = sum(w.replicas for w in arrivals)
    limits = Limits(max_batch=max(len(arrivals), 1), max_batch_replicas=max(replicas, 1))
    engine = Engine(clock=lambda: 0, limits=limits)
    engine.push_snapshot(CLUSTER_ID, shuffled_nodes(trace, seed))
    started = time.perf_counter()
    if per_arrival:
        results: list[WorkloadResult] = []
        for w in arrivals:
            one = engine.place(CLUSTER_ID, workloads=[w], options=options, order=Order.FIFO)
            results.extend(one.results)
    else:
        batch = engine.place(CLUSTER_ID, workloads=arrivals, options=options, order=Order.FIFO)
        results = list(batch.results)
    seconds = time.perf_counter() - started
    return summarise(
        trace=trace,
        spec=spec,
        seed=seed,
        arrivals=arrivals,
        results=results,
        shapes=shapes,
        seconds=seconds,
    )


def summarise(
    *,
    trace: Trace,
    spec: PolicySpec,
    seed: int,
    arrivals: Sequence[Workload],
    results: Sequence[WorkloadResult],
    shapes: Sequence[Shape],
    seconds: float,
) -> Replay1Result:
    """Turn the engine's answers, in arrival order, into the paper's metrics."""
    by_id = {r.workload_id: r for r in results}
    mirror = ClusterMirror(trace.nodes)
    arrived = np.zeros(len(arrivals), dtype=np.int64)
    allocated = np.zeros(len(arrivals), dtype=np.int64)
    total_arrived = total_allocated = failed = 0
    for i, w in enumerate(arrivals):
        result = by_id.get(w.id)
        total_arrived += gpu_of(w)
        if result is not None and result.decision is Decision.PLACED:
            mirror.apply(w, result.placements)
            total_allocated += gpu_of(w) * len(result.placements)
        else:
            failed += 1
        arrived[i], allocated[i] = total_arrived, total_allocated
    capacity = mirror.gpu_capacity
    curve = bucket_curve(arrived, allocated, capacity) if capacity else np.full(BUCKETS, np.nan)
    frag = mirror.fragmentation_ratio(shapes)
    return Replay1Result(
        trace=trace.name,
        policy=spec.label,
        seed=seed,
        arrivals=len(arrivals),
        failed=failed,
        curve=tuple(float(v) for v in curve),
        frag_ratio=frag,
        seconds=seconds,
    )
