"""The replay's CSV says where the cost goes per step: the breakdown per hour and the ready
nodes per group, consistent with the step's cost."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from strata_policy.simulate import autoscale, autoscale_report
from strata_policy.simulate.autoscalers import StrataAutoscaler
from strata_policy.simulate.trace import TimedWorkload
from strata_policy.testing import node_group, scope, workload

SMALL = node_group("small", 0.2, cpu=4, memory_gi=16)
BIG = node_group("big", 0.7, cpu=16, memory_gi=64)


def test_csv_breaks_the_cost_down_per_step_and_group(tmp_path: Path) -> None:
    """Each row: ready nodes per group; their price plus provisioning is the step's cost; at
    step 0 all of it is provisioning; empty plus idle never above the ready nodes' price."""
    trace = [
        TimedWorkload(workload("w1", "t", cpu=3, memory_gi=4), 0, 600_000),
        TimedWorkload(workload("w2", "t", cpu=12, memory_gi=8), 240_000, 900_000),
    ]
    t = autoscale.replay(StrataAutoscaler(), [SMALL, BIG], [scope("t")], trace)
    path = tmp_path / "out.csv"
    autoscale_report.write_csv(path, [t])
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == len(t.times_h)
    price = {"small": 0.2, "big": 0.7}
    for row in rows:
        ready = dict(item.split(":") for item in row["ready_nodes"].split())
        held = sum(price[g] * int(n) for g, n in ready.items())
        cost = float(row["cost_per_hour"])
        assert held + float(row["provisioning_per_hour"]) == pytest.approx(cost, abs=1e-3)
        assert float(row["empty_per_hour"]) + float(row["idle_per_hour"]) <= held + 1e-9
    first = float(rows[0]["provisioning_per_hour"])
    assert first > 0
    assert first == pytest.approx(float(rows[0]["cost_per_hour"]), abs=1e-3)
    assert rows[0]["ready_nodes"] == ""
    assert any("big:1" in row["ready_nodes"] for row in rows)
