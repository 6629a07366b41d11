"""A big Place batch (chunked kernel calls) answers exactly as placing one workload at a time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.engine import Engine
from strata_policy.engine.place import FAST_PATH_MIN
from strata_policy.model import Policy, Scope, Snapshot, Workload
from strata_policy.placement.place import PlacementOptions
from strata_policy.state.taskmix import TaskType
from strata_policy.testing import node

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

NODES = tuple(
    node(f"n{i}", cpu=8 + 8 * (i % 3), gpus=(i % 3) * 2, model="A100" if i % 2 else "T4")
    for i in range(12)
)
TASK_TYPES = (TaskType(cpu_milli=1000, gpu_milli=500, weight=0.5), TaskType(0, 1000, "", 0.5))
SCOPES = (Scope("org", limit={"gpu": 14000}), Scope("a", "org"), Scope("b", "org"))


@settings(max_examples=25)
@given(
    shapes=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.sampled_from([0, 1000, 2000, 3000]),
            st.sampled_from([0, 250, 500, 1000, 2000]),
            st.integers(1, 2),
            st.sampled_from(["", "A100", "T4"]),
        ),
        min_size=FAST_PATH_MIN,
        max_size=FAST_PATH_MIN * 3,
    ),
    policy=st.sampled_from(
        [Policy.FIRST_FIT, Policy.BEST_FIT, Policy.MOST_ALLOCATED, Policy.FRAGMENTATION_AWARE]
    ),
)
def test_batch_equals_one_by_one(
    shapes: list[tuple[str, int, int, int, str]], policy: Policy
) -> None:
    """Same decisions, placements and reasons; failures inside chunks are redone exactly."""
    workloads = [
        Workload(f"w{i}", s, {"cpu": cpu, "gpu": gpu}, replicas=r, gpu_model=m)
        for i, (s, cpu, gpu, r, m) in enumerate(shapes)
    ]
    options = PlacementOptions(policy=policy, task_types=TASK_TYPES)
    batch_engine, single_engine = Engine(clock=lambda: 1), Engine(clock=lambda: 1)
    for e in (batch_engine, single_engine):
        e.push_snapshot("c", Snapshot(NODES, SCOPES))
    together = batch_engine.place("c", workloads, options=options).results
    alone = [single_engine.place("c", [w], options=options).results[0] for w in workloads]
    assert together == tuple(alone)
    assert batch_engine.snapshot("c")[1] == single_engine.snapshot("c")[1]


def test_quota_freed_by_an_unplaced_workload_goes_to_the_next() -> None:
    """An unplaceable workload gives its quota back, so one behind it in the chunk is admitted."""
    limit = (Scope("org", limit={"gpu": 4000}),)
    nowhere = Workload("nowhere", "org", {"gpu": 4000}, gpu_model="H100")
    fits = [Workload(f"w{i}", "org", {"gpu": 1000}) for i in range(FAST_PATH_MIN)]
    engine = Engine(clock=lambda: 1)
    engine.push_snapshot("c", Snapshot(NODES, limit))
    results = engine.place("c", [nowhere, *fits]).results
    assert results[0].decision.value == "UNPLACED"
    assert [r.decision.value for r in results[1:5]] == ["PLACED"] * 4
    assert {r.decision.value for r in results[5:]} == {"DENIED"}
