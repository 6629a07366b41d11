"""Honest pending times in the autoscaling replay: a workload whose departure passes while it
still waits counts as pending until its departure, for every autoscaler alike."""

from __future__ import annotations

import pytest

from strata_policy.simulate import autoscale
from strata_policy.simulate.autoscale_baselines import ClusterAutoscaler, Karpenter
from strata_policy.simulate.autoscalers import StrataAutoscaler
from strata_policy.simulate.trace import TimedWorkload
from strata_policy.testing import node_group, scope, workload

SMALL = node_group("small", 0.2, cpu=4, memory_gi=16)
SCALERS = [StrataAutoscaler(), ClusterAutoscaler("price"), Karpenter()]


def _run(scaler: autoscale.Autoscaler, trace: list[TimedWorkload]) -> autoscale.Summary:
    t = autoscale.replay(scaler, [SMALL], [scope("t")], trace, step_s=60, delay_s=120)
    return autoscale.summarise(t, 60)


@pytest.mark.parametrize("scaler", SCALERS, ids=lambda s: s.name)
@pytest.mark.parametrize(
    ("arrive_s", "leave_s", "never", "unseen", "p99"),
    [
        pytest.param(0, 90, 1, 0, 90.0, id="leaves before its node is ready: pending 90 s"),
        pytest.param(0, 30, 1, 0, 30.0, id="seen at step 0, leaves before step 60: 30 s"),
        pytest.param(10, 40, 0, 1, 0.0, id="arrives and leaves between steps: seen by none"),
        pytest.param(0, 600, 0, 0, 120.0, id="outlives the provisioning delay: placed at 120 s"),
    ],
)  # fmt: skip
def test_pending_until_departure(
    scaler: autoscale.Autoscaler, arrive_s: int, leave_s: int, never: int, unseen: int,
    p99: float,
) -> None:  # fmt: skip
    """One workload on an empty cluster (provisioning 120 s): its wait is until placement, or
    until its departure when it never placed (it used to be dropped: no wait at all); one no
    step saw is counted apart and has no wait."""
    trace = [TimedWorkload(workload("w", "t", cpu=1), arrive_s * 1000, leave_s * 1000)]
    s = _run(scaler, trace)
    assert (s.never_placed, s.unseen) == (never, unseen)
    assert s.p99_s == pytest.approx(p99)


def test_dropped_waits_raise_p99() -> None:
    """Fifty workloads that leave before any node is ready and one that places: the fifty set
    the median (100 s each); dropped, the only wait counted was the placed one's 120 s."""
    trace = [TimedWorkload(workload(f"s{i}", "t", cpu=1), 0, 100_000) for i in range(50)]
    trace.append(TimedWorkload(workload("long", "t", cpu=1), 0, 3_600_000))
    s = _run(StrataAutoscaler(), trace)
    assert s.never_placed == 50
    assert s.p50_s == pytest.approx(100.0)
