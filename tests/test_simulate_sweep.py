"""Sweeps run the same replays wherever they execute: inline, or on a real Dask cluster."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from strata_policy.simulate.policies import parse_policy
from strata_policy.simulate.progress import Progress
from strata_policy.simulate.protocol1 import Replay1Result
from strata_policy.simulate.sweep import Replay, ReplayJob, executor_for, run_job, run_sweep

TRACE = {
    "nodes": [
        {"id": f"n{i}", "capacity": {"cpu": "32", "memory": "128Gi", "gpu": "4"}, "gpu_model": "A"}
        for i in range(6)
    ],
    "workloads": [
        {"id": f"w{i:02d}", "scope_id": "team", "request": {"cpu": "2", "gpu": g}}
        for i, g in enumerate(["0.5", "1", "0.3", "2", "0.7", "1", "0.25", "4"] * 3)
    ],
}


@pytest.fixture
def jobs(tmp_path: Path) -> list[ReplayJob]:
    """Four small protocol-1 replays: two policies × two seeds."""
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TRACE))
    return [
        ReplayJob(str(path), parse_policy(p), seed)
        for p in ("RANDOM", "FRAGMENTATION_AWARE")
        for seed in (1, 2)
    ]


def test_inline_sweep_keeps_job_order(jobs: list[ReplayJob]) -> None:
    """Results come back in job order, one per job, each as run_job computes it."""
    with executor_for(jobs=1) as executor:
        results = run_sweep(jobs, executor, Progress(len(jobs), enabled=False))
    assert [(r.policy, r.seed) for r in results] == [(j.policy.label, j.seed) for j in jobs]
    assert _figures(results[:1]) == _figures([run_job(jobs[0])])


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_results(jobs: list[ReplayJob]) -> None:
    """A real LocalCluster with two worker processes returns what the inline sweep returns."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    )
    with cluster, executor_for(dask=cluster.scheduler_address) as executor:
        remote = run_sweep(jobs, executor)
    with executor_for(jobs=1) as executor:
        local = run_sweep(jobs, executor)
    assert _figures(remote) == _figures(local)


def _figures(results: list[Replay]) -> list[tuple[object, ...]]:
    """What must agree between two runs of the same jobs (NaN buckets made comparable)."""
    out: list[tuple[object, ...]] = []
    for r in results:
        assert isinstance(r, Replay1Result)
        curve = tuple(None if math.isnan(v) else v for v in r.curve)
        out.append((r.policy, r.seed, r.failed, curve, r.frag_ratio))
    return out
