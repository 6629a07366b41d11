"""Trace variants: the FGD paper's families built from a trace, seeded and deterministic."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.errors import InvalidArgument
from strata_policy.model.resources import GPU
from strata_policy.simulate.cli import build_jobs, parse_variants
from strata_policy.simulate.policies import parse_policy
from strata_policy.simulate.report import Summary
from strata_policy.simulate.sweep import ReplayJob, run_job
from strata_policy.simulate.trace import TimedWorkload, Trace, load_trace
from strata_policy.simulate.variants import (
    GPU_SPEC_MIX,
    PAPER_VARIANTS,
    Variant,
    build_variant,
    parse_variant,
)
from strata_policy.testing import node, workload

OPENB = Path(__file__).resolve().parents[1] / "data" / "openb"
SPECS = {s for s, _ in GPU_SPEC_MIX}


@pytest.fixture(scope="module")
def openb() -> Trace:
    """The shipped openb default trace."""
    return load_trace(OPENB)


def _gpu(t: TimedWorkload) -> int:
    return int(t.workload.request.get(GPU, 0))


def _small_trace(n_share: int, n_whole: int, n_multi: int, n_cpu: int) -> Trace:
    nodes = (node("g2", cpu=96, gpus=8, model="G2"), node("t4", cpu=104, gpus=2, model="T4"))
    pods = (
        [workload(f"s{i}", "LS", cpu=4, gpu_milli=250 + i % 3 * 100) for i in range(n_share)]
        + [workload(f"w{i}", "LS", cpu=8, gpu_milli=1000) for i in range(n_whole)]
        + [workload(f"m{i}", "LS", cpu=16, gpu_milli=2000 * (1 + i % 4)) for i in range(n_multi)]
        + [workload(f"c{i}", "BE", cpu=2) for i in range(n_cpu)]
    )
    return Trace("small", nodes, tuple(TimedWorkload(w) for w in pods))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("gpuspec33", Variant("gpuspec", 33), id="gpu model share"),
        pytest.param("GPUSHARE100", Variant("gpushare", 100), id="case-insensitive, 100 % share"),
        pytest.param(" multigpu20 ", Variant("multigpu", 20), id="spaces trimmed"),
        pytest.param("nongpu5", Variant("nongpu", 5), id="non-gpu pod share"),
        pytest.param("gpuspec0", Variant("gpuspec", 0), id="zero share is the trace itself"),
    ],
)
def test_parse_variant(text: str, expected: Variant) -> None:
    """Variant names are a family and a whole percent."""
    assert parse_variant(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("cpu050", id="the paper's file name is not ours"),
        pytest.param("gpuspec", id="no share"),
        pytest.param("gpuspec101", id="share over 100 %"),
        pytest.param("nongpu100", id="every pod CPU-only has no GPU pod to keep"),
        pytest.param("gpuspec-5", id="negative share"),
    ],
)
def test_parse_variant_rejects(text: str) -> None:
    """A name outside the families or shares is refused with one clear error."""
    with pytest.raises(InvalidArgument):
        parse_variant(text)


@pytest.mark.parametrize("name", PAPER_VARIANTS)
def test_paper_variants_reach_their_share(openb: Trace, name: str) -> None:
    """Every published variant built from openb holds its share (within one pod) and unique ids."""
    v = parse_variant(name)
    built = build_variant(openb, v, seed=0)
    pods = built.workloads
    gpu_total = sum(_gpu(t) for t in pods)
    assert built.name == f"openb_pod_list_default+{name}"
    assert len({t.workload.id for t in pods}) == len(pods)
    assert built.nodes == openb.nodes
    if v.family == "nongpu":
        cpu_only = sum(1 for t in pods if not _gpu(t))
        assert cpu_only / len(pods) == pytest.approx(v.percent / 100, abs=1e-3)
        assert [t for t in pods if _gpu(t)] == [t for t in openb.workloads if _gpu(t)]
        return
    picked = {
        "gpuspec": lambda t: bool(t.workload.gpu_model),
        "gpushare": lambda t: 0 < _gpu(t) < 1000,
        "multigpu": lambda t: _gpu(t) >= 2000,
    }[v.family]
    held = sum(_gpu(t) for t in pods if picked(t))
    assert v.percent / 100 * gpu_total <= held + 8000
    assert held <= v.percent / 100 * gpu_total + 8000
    assert sum(1 for t in pods if not _gpu(t)) == sum(1 for t in openb.workloads if not _gpu(t))
    if v.family != "gpuspec":
        assert abs(gpu_total - sum(_gpu(t) for t in openb.workloads)) <= 2 * 8000


def test_gpuspec_draws_known_specs_that_fit(openb: Trace) -> None:
    """Constrained pods get only the source cluster's specs, and each fits some node alone."""
    built = build_variant(openb, "gpuspec33", seed=0)
    before = {t.workload.id: t.workload for t in openb.workloads}
    most: dict[str, int] = {}
    for n in openb.nodes:
        most[n.gpu_model] = max(most.get(n.gpu_model, 0), n.capacity.get(GPU, 0))
    named = [t.workload for t in built.workloads if t.workload.gpu_model]
    assert {w.gpu_model for w in named} <= SPECS
    assert {w.gpu_model for w in named} >= {"T4", "G2", "P100"}
    for w in named:
        assert before[w.id].request == w.request
        assert max(most.get(m, 0) for m in w.gpu_model.split("|")) >= _gpu(TimedWorkload(w))
    assert all(not t.workload.gpu_model for t in built.workloads if not _gpu(t))


@pytest.mark.parametrize("name", ["gpuspec20", "gpushare60", "multigpu40", "nongpu20"])
def test_variant_is_seeded_and_deterministic(openb: Trace, name: str) -> None:
    """The same seed gives the same pods in the same order; another seed gives other draws."""
    a = build_variant(openb, name, seed=3)
    assert a == build_variant(openb, name, seed=3)
    assert a.workloads != build_variant(openb, name, seed=4).workloads


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.tuples(*(st.integers(0, 12) for _ in range(4))),
    family=st.sampled_from(["gpushare", "multigpu", "nongpu", "gpuspec"]),
    percent=st.integers(0, 99),
    seed=st.integers(0, 2**16),
)
def test_resized_pools_keep_their_pods(
    sizes: tuple[int, int, int, int], family: str, percent: int, seed: int
) -> None:
    """Every built pod is a trace pod (a copy keeps its request), ids stay unique, shares hold."""
    trace = _small_trace(*sizes)
    by_id = {t.workload.id: t.workload for t in trace.workloads}
    try:
        built = build_variant(trace, Variant(family, percent), seed)
    except InvalidArgument:
        kinds = {"gpushare": sizes[0], "multigpu": sizes[2], "nongpu": sizes[3]}
        assert percent > 0
        assert kinds[family] == 0
        return
    ids = [t.workload.id for t in built.workloads]
    assert len(set(ids)) == len(ids)
    for t in built.workloads:
        original = by_id[t.workload.id.split("~")[0]]
        assert t.workload.request == original.request
    if family == "nongpu" and sizes[3] and any(sizes[:3]):
        gpu_pods = sum(1 for t in built.workloads if _gpu(t))
        cpu_only = len(built.workloads) - gpu_pods
        assert abs(cpu_only - percent / 100 * gpu_pods / (1 - percent / 100)) <= 0.5


def test_parse_variants_expands_paper_and_default() -> None:
    """``paper`` is the sixteen published variants, ``default`` the trace itself."""
    assert parse_variants("") == ("",)
    assert parse_variants("default,gpuspec10,GPUSPEC10") == ("", "gpuspec10")
    assert parse_variants("paper") == PAPER_VARIANTS
    with pytest.raises(InvalidArgument):
        parse_variants("gpuspec10,bogus3")


def test_build_jobs_crosses_variants_policies_and_seeds() -> None:
    """A sweep is traces × variants × policies × seeds, variants carried by each job."""
    args = argparse.Namespace(
        traces=[OPENB],
        nodes=None,
        scopes=None,
        policies="FRAGMENTATION_AWARE,FRAGMENTATION_AWARE:paper",
        seeds="42-44",
        variant="default,gpuspec33",
        variant_seed=5,
        protocol=1,
        tune=1.3,
        head=0,
    )
    jobs = build_jobs(args)
    assert len(jobs) == 2 * 2 * 3
    assert [j.variant for j in jobs[:6]] == [""] * 6
    assert {j.variant for j in jobs[6:]} == {"gpuspec33"}
    assert {j.variant_seed for j in jobs} == {5}


def test_run_job_replays_the_variant() -> None:
    """A job names its variant and the replay runs on that trace (a short slice here)."""
    job = ReplayJob(
        trace_path=str(OPENB),
        policy=parse_policy("FRAGMENTATION_AWARE"),
        seed=42,
        head=300,
        variant="gpuspec33",
    )
    result = run_job(job)
    assert result.trace == "openb_pod_list_default+gpuspec33"


@pytest.mark.parametrize(
    ("trace", "policy", "want"),
    [
        pytest.param("openb_pod_list_default", "FRAGMENTATION_AWARE", 95.39, id="default trace"),
        pytest.param(
            "openb_pod_list_default+gpuspec33", "FRAGMENTATION_AWARE:paper", 94.55, id="variant"
        ),
        pytest.param("openb_pod_list_default+gpuspec33", "RANDOM", None, id="FGD only"),
        pytest.param("other+gpuspec33", "FRAGMENTATION_AWARE", None, id="other base trace"),
        pytest.param(
            "openb_pod_list_default+gpuspec7", "FRAGMENTATION_AWARE", None, id="unpublished"
        ),
    ],
)
def test_paper_figure_beside_variants(trace: str, policy: str, want: float | None) -> None:
    """The table shows the paper's FGD figure for the variants it published, and only those."""
    s = Summary(trace, policy, (42,), (0.0,), (0.0,), 0.0, 0.0, 0.0, 1.0)
    assert s.paper_130 == want
