"""TaskMix.observe_many: the batch form of observe."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.model import Workload
from strata_policy.state.taskmix import TaskMix

workloads = st.builds(
    Workload,
    id=st.just("w"),
    scope_id=st.just("s"),
    # two equal dicts that are different objects, and amounts as bool (an int equal to 1)
    request=st.sampled_from(
        [
            {"cpu": 1000},
            {"cpu": 2000, "gpu": 500},
            {"gpu": 1000},
            {"cpu": 1000},
            {"cpu": True},
            {"cpu": 1},
        ]
    ),
    replicas=st.integers(1, 3),
    gpu_model=st.sampled_from(["", "A100", "T4|A100", "A100|T4"]),
)


@settings(max_examples=60, deadline=None)
@given(first=st.lists(workloads, max_size=20), then=st.lists(workloads, max_size=20))
def test_observe_many_is_observe_each(first: list[Workload], then: list[Workload]) -> None:
    """observe_many counts exactly what observing each workload in turn counts."""
    one, many = TaskMix(), TaskMix()
    for w in first + then:
        one.observe(w)
    many.observe_many(first)
    many.typical(1.0)  # fills the cache, which the next call must clear
    many.observe_many(then)
    assert many.total == one.total
    assert many.typical(1.0) == one.typical(1.0)
    assert many.typical(0.5) == one.typical(0.5)
