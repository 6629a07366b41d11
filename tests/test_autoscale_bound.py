"""The replay's bound against what the autoscalers actually pay, on small random replays."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.capacity import time_bound
from strata_policy.simulate import autoscale, autoscale_report
from strata_policy.simulate.autoscale_baselines import ClusterAutoscaler, Karpenter
from strata_policy.simulate.autoscale_catalog import day_catalog, synthetic_day
from strata_policy.simulate.autoscalers import StrataAutoscaler
from strata_policy.simulate.trace import TimedWorkload
from strata_policy.testing import scope, workload

SCALERS = [StrataAutoscaler(), ClusterAutoscaler("least-waste"), ClusterAutoscaler("price"),
           Karpenter()]  # fmt: skip


@settings(max_examples=3, deadline=None)
@given(st.integers(0, 10_000))
def test_every_autoscaler_pays_at_least_the_bound_of_what_it_held(seed: int) -> None:
    """Two seeded hours of the synthetic day (PostgreSQL pinned, inference coming and going):
    every autoscaler's cost is ≥ the bound of what its nodes held at each step (integral per
    step, joined over time); the demand bound (the figures' yardstick) is one for all."""
    scopes, trace = synthetic_day(seed, 2)
    bounds = set()
    for scaler in SCALERS:
        t = autoscale.replay(scaler, day_catalog(), scopes, trace, step_s=300, held=True)
        s = autoscale.summarise(t, 300)
        assert s.cost >= s.lower_bound > 0
        demand = autoscale.summarise(
            autoscale.replay(scaler, day_catalog(), scopes, trace, step_s=300), 300
        )
        assert demand.joined
        bounds.add(round(demand.lower_bound, 6))
    assert len(bounds) == 1


def test_demand_bound_is_a_yardstick() -> None:
    """The demand bound holds every step's demand, the waiting work too: cluster-autoscaler's
    price expander (one option per loop) leaves pods waiting for half an hour here and pays
    less than it (15.83 against 15.93), while staying above the bound of what it held."""
    scopes, trace = synthetic_day(899, 2)
    scaler = ClusterAutoscaler("price")
    t = autoscale.replay(scaler, day_catalog(), scopes, trace, step_s=300)
    s = autoscale.summarise(t, 300)
    assert max(t.pending[1:6]) > 0
    assert s.cost < s.lower_bound
    held = autoscale.summarise(
        autoscale.replay(scaler, day_catalog(), scopes, trace, step_s=300, held=True), 300
    )
    assert held.cost >= held.lower_bound > 0


@pytest.mark.parametrize(
    ("inexact", "how", "says"),
    [
        pytest.param(0, time_bound.JOINED, "optimal at every step; joined over time",
                     id="exact and joined"),
        pytest.param(0, time_bound.NOT_PINNED, "per step (pinning off: failures",
                     id="a run with failures"),
        pytest.param(0, time_bound.TIMED_OUT, "the joined LP hit its time limit",
                     id="joined LP timed out"),
        pytest.param(3, time_bound.NOTHING_PINNED, "3 of 50 steps (x) hit the time limit",
                     id="per-step time limit said"),
    ],
)  # fmt: skip
def test_bound_note_says_how_it_was_solved(inexact: int, how: str, says: str) -> None:
    """The line under the table says how the bound was solved, and names the steps whose
    solve hit the time limit, if any."""
    row = autoscale.Summary("x", 1.0, 1.0, 0.0, 0.0, 0, 0, 0, 0, steps=50, inexact=inexact,
                            bound_how=how)  # fmt: skip
    assert says in autoscale_report.bound_note([row])


@st.composite
def short_pods(draw: st.DrawFn) -> list[TimedWorkload]:
    """Up to 12 pods over 20 minutes, many living less than the 120 s provisioning delay
    (openb's shape at a high speedup), some non-preemptible, some on half a T4."""
    out = []
    for i in range(draw(st.integers(1, 12))):
        arrival = draw(st.integers(0, 20 * 60)) * 1000
        life = draw(st.sampled_from([30, 90, 150, 400, 900])) * 1000
        gpu = draw(st.sampled_from([0, 0, 500]))
        w = workload(f"p{i}", "t", cpu=draw(st.integers(1, 6)), memory_gi=4, gpu_milli=gpu,
                     gpu_model="T4" if gpu else "", preemptible=draw(st.booleans()))  # fmt: skip
        out.append(TimedWorkload(w, arrival, arrival + life))
    return out


@settings(max_examples=4, deadline=None)
@given(short_pods())
def test_every_autoscaler_pays_at_least_the_held_bound_with_lead(trace: list) -> None:  # type: ignore[type-arg]
    """Short pods, 60 s steps and a 120 s delay (a lead of 2 steps): every autoscaler pays
    at least the bound of what its nodes held, nodes paid from 2 steps before they hold."""
    for scaler in SCALERS:
        t = autoscale.replay(scaler, day_catalog(("a",)), [scope("t")], trace, step_s=60,
                             delay_s=120, held=True)  # fmt: skip
        s = autoscale.summarise(t, 60)
        assert s.cost >= s.lower_bound - 1e-6
