"""The replay's bound: integral node counts per step (a MILP), and the LP that joins the steps
where non-preemptible work stays on nodes alive through each window. Both stay below any plan
that holds the demand, and at or above the fractional bound."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from capacity_kit import plan
from hypothesis import given, settings
from hypothesis import strategies as st
from test_capacity_tight_bound import columns, optimum, tiny

from strata_policy.capacity import NodeGroup, bound
from strata_policy.capacity import time_bound as time_bound_module
from strata_policy.capacity.catalog import could_hold
from strata_policy.capacity.time_bound import time_bound
from strata_policy.model import Workload
from strata_policy.model.decisions import Policy
from strata_policy.testing import node_group, scope, workload


def integral(
    groups: Sequence[NodeGroup], demand: Sequence[Workload], **kw: float
) -> bound.LpResult:
    """The integral bound of ``demand`` over ``groups`` (memo cleared: a fresh solve)."""
    bound._MEMO.clear()
    return bound.lower_bound(columns(groups), demand, integral=True, **kw)  # type: ignore[arg-type]


def fractional(groups: Sequence[NodeGroup], demand: Sequence[Workload]) -> float:
    """The same rows with fractional counts."""
    return bound.lower_bound(columns(groups), demand).value


M4 = node_group("m", 1.0, cpu=4, memory_gi=16)
M2 = node_group("s", 0.6, cpu=2, memory_gi=16)


@pytest.mark.parametrize(
    ("groups", "demand", "lp", "whole"),
    [
        pytest.param([M4], [workload(f"w{i}", "t", cpu=1) for i in range(6)], 1.5, 2.0,
                     id="6 CPUs on 4-CPU nodes: 1.5 nodes fractional, 2 whole"),
        pytest.param([M4, M2], [workload(f"w{i}", "t", cpu=1) for i in range(5)], 1.25, 1.6,
                     id="5 CPUs: a 4-CPU and a 2-CPU node beat two 4-CPU or three 2-CPU"),
        pytest.param([M4], [workload(f"w{i}", "t", cpu=1) for i in range(8)], 2.0, 2.0,
                     id="8 CPUs on 4-CPU nodes: already whole"),
        pytest.param([M4], [], 0.0, 0.0, id="nothing to hold: 0"),
    ],
)  # fmt: skip
def test_integral_bound(groups: list, demand: list, lp: float, whole: float) -> None:  # type: ignore[type-arg]
    """Whole nodes on named cases: the fractional bound and the integral one."""
    assert fractional(groups, demand) == pytest.approx(lp)
    got = integral(groups, demand)
    assert (got.value, got.exact) == (pytest.approx(whole), True)


def test_time_limit_keeps_a_proven_bound() -> None:
    """Past its time limit the integral solve reports what it proved (``exact`` False), never
    above the integral optimum and never below the fractional bound."""
    demand = [workload(f"w{i}", "t", cpu=1 + i % 3) for i in range(40)]
    groups = [node_group(f"g{c}", 0.3 * c + 0.1 * (c % 2), cpu=c, memory_gi=64) for c in (3, 5, 7)]
    lp = fractional(groups, demand)
    full = integral(groups, demand)
    cut = integral(groups, demand, time_limit_s=1e-9)
    assert full.exact
    assert not cut.exact
    assert lp - 1e-9 <= cut.value <= full.value + 1e-9


@settings(max_examples=60, deadline=None)
@given(tiny())
def test_integral_between_lp_and_brute_force(case: tuple) -> None:  # type: ignore[type-arg]
    """On tiny random cases: fractional ≤ integral ≤ the exact optimum (brute force)."""
    groups, demand = case
    got = integral(groups, demand)
    assert got.value >= fractional(groups, demand) - 1e-6
    best = optimum(groups, demand)
    holdable = [w for w in demand if any(could_hold(g.template, w) for g in groups)]
    if best is not None and len(holdable) == len(demand):
        assert got.value <= best + 1e-6


@settings(max_examples=20, deadline=None)
@given(tiny(), st.sampled_from(list(Policy)[1:]))
def test_integral_below_every_policys_plan(case: tuple, policy: Policy) -> None:  # type: ignore[type-arg]
    """The integral bound of what a plan holds never exceeds that plan's cost, whatever the
    placement policy that built it."""
    groups, demand = case
    got = plan([], [scope("t")], groups, demand, policy=policy, consolidate=False)
    held = [w for w in demand if w.id in got.placements]
    assert integral(groups, held).value <= got.cost_per_hour + 1e-6


# The joined bound: a steady database that may not move, a GPU job that comes and goes.

GPU_NODE = node_group("g", 4.0, cpu=8, memory_gi=64, gpus=1, model="T4")
DB = workload("db", "t", cpu=4, preemptible=False)
JOB = workload("job", "t", cpu=1, gpu_milli=1000)


def _joined(demand: list[list[Workload]], pinned: bool = True) -> float:
    cols = columns([M4, GPU_NODE])
    floors = [integral([M4, GPU_NODE], d).value for d in demand]
    return time_bound(cols, demand, floors, 1.0, pinned=pinned).value


@pytest.mark.parametrize(
    ("demand", "pinned", "value"),
    [
        pytest.param([[DB, JOB], [DB]], True, 6.0,
                     id="the db cannot ride the GPU node's spare CPU then move: 6, not 4 + 1"),
        pytest.param([[DB, JOB], [DB]], False, 5.0,
                     id="without pinning (a run with failures): the per-step sum"),
        pytest.param([[workload("db", "t", cpu=4), JOB], [workload("db", "t", cpu=4)]], True,
                     5.0, id="a preemptible db may move: the per-step sum"),
        pytest.param([[DB], [DB]], True, 2.0, id="nothing comes and goes: the per-step sum"),
    ],
)  # fmt: skip
def test_joined_bound(demand: list, pinned: bool, value: float) -> None:  # type: ignore[type-arg]
    """Two steps of an hour. The cheapest plan that never moves the db: an m node for it
    both hours plus the GPU node for the job (1 + 4 + 1 = 6), or the GPU node both hours (8)."""
    assert _joined(demand, pinned) == pytest.approx(value)


@settings(max_examples=30, deadline=None)
@given(tiny(), st.lists(st.sets(st.integers(0, 3)), min_size=1, max_size=3), st.booleans())
def test_joined_between_steps_and_a_static_plan(case: tuple, present: list, steady: bool) -> None:  # type: ignore[type-arg]
    """Random steps over tiny cases (workloads present at some steps, the first one maybe
    non-preemptible and present throughout): the joined bound is ≥ the sum of the per-step
    integral bounds and ≤ a plan that never moves anything, the brute-force optimum of every
    workload at once, held at every step."""
    groups, demand = case
    if steady:
        demand[0] = workload(demand[0].id, "t", cpu=demand[0].request["cpu"] // 1000,
                             replicas=demand[0].replicas, preemptible=False)  # fmt: skip
    steps = [[w for j, w in enumerate(demand) if j in p or (steady and j == 0)] for p in present]
    floors = [integral(groups, d).value for d in steps]
    got = time_bound(columns(groups), steps, floors, 1.0).value
    assert got >= sum(floors) - 1e-6
    everything = [w for w in demand if any(w in d for d in steps)]
    best = optimum(groups, everything)
    holdable = [w for w in everything if any(could_hold(g.template, w) for g in groups)]
    if best is not None and len(holdable) == len(everything):
        assert got <= best * len(steps) + 1e-6


def test_joined_time_limit_falls_back_to_the_steps() -> None:
    """A joined LP that does not finish in time gives the per-step sum, and says so."""
    demand = [[DB, JOB], [DB]]
    floors = [integral([M4, GPU_NODE], d).value for d in demand]
    time_bound_module._MEMO.clear()
    got = time_bound(columns([M4, GPU_NODE]), demand, floors, 1.0, time_limit_s=1e-9)
    assert (got.value, got.joined, got.why) == (pytest.approx(5.0), False,
                                                time_bound_module.TIMED_OUT)  # fmt: skip
