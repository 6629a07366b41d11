"""Trace replay speed: the engine's FRAGMENTATION_AWARE vs a straightforward NumPy FGD.

One seed of the openb default trace under protocol 1 (the FGD paper's): the engine replays every
arrival (one ``place`` batch); the NumPy twin (``strata_policy.simulate.reference``) replays the
first ``STRATA_BENCH_NAIVE_PODS`` arrivals (default 1,500; set it to 0 for the whole seed, about
two minutes) on the same node order. Its per-decision cost does not depend on how full the
cluster is (it recomputes every node's fragmentation for every pod), so the prefix's rate is the
seed's rate. DESIGN §6 asks for ≥ 50×; ``tests/test_simulate_replay.py`` pins that the two agree.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from strata_policy.model import Policy
from strata_policy.simulate.arrivals import build_arrivals, shuffled_nodes
from strata_policy.simulate.metrics import typical_shapes
from strata_policy.simulate.policies import PolicySpec
from strata_policy.simulate.protocol1 import replay1
from strata_policy.simulate.reference import fgd_replay
from strata_policy.simulate.trace import load_trace

OPENB = Path(os.environ.get("STRATA_OPENB") or Path(__file__).resolve().parents[1] / "data/openb")
SEED = 42


def run() -> list[str]:
    """Markdown lines: decisions/s of both and their ratio, and whether they agree."""
    trace = load_trace(OPENB)
    spec = PolicySpec(Policy.FRAGMENTATION_AWARE, "paper")
    replay1(trace.head(200), spec, SEED)  # compile / load the kernels outside the timing
    ours = replay1(trace, spec, SEED)
    shapes = typical_shapes(t.workload for t in trace.workloads)
    arrivals = build_arrivals([t.workload for t in trace.workloads], trace.gpu_milli, SEED)
    limit = int(os.environ.get("STRATA_BENCH_NAIVE_PODS", "1500")) or len(arrivals)
    nodes = shuffled_nodes(trace, SEED).nodes
    started = time.perf_counter()
    naive = fgd_replay(nodes, arrivals[:limit], shapes, truncate=True)
    naive_s = time.perf_counter() - started
    naive_rate = len(naive) / naive_s
    naive_failed = sum(c is None for c in naive)
    return [
        f"### Trace replay, openb default, FRAGMENTATION_AWARE (paper's FGD), seed {SEED}",
        "",
        "| implementation | pods | decisions/s | seconds per seed | ratio |",
        "|---|---:|---:|---:|---:|",
        f"| NumPy FGD (reference.py) | {len(naive):,} | {naive_rate:,.0f} | "
        f"{ours.arrivals / naive_rate:,.1f} (extrapolated) | 1× |",
        f"| engine (one place batch) | {ours.arrivals:,} | {ours.decisions_per_s:,.0f} | "
        f"{ours.seconds:,.2f} | {ours.decisions_per_s / naive_rate:,.0f}× |",
        "",
        f"Allocated at 130 % arrived: {ours.at(130):.2f} % (paper's FGD: 95.39 %); "
        f"NumPy prefix failures: {naive_failed}.",
    ]


if __name__ == "__main__":
    print("\n".join(run()))
