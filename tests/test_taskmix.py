"""TaskMix: observe_many is observe in bulk; commits handed over as pending count the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.model import Workload
from strata_policy.state.taskmix import MAX_PENDING, TaskMix

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


ops = st.one_of(
    st.tuples(st.just("commit"), st.lists(workloads, max_size=6)),
    st.tuples(st.just("read"), st.sampled_from([0.5, 0.95, 1.0])),
    st.tuples(st.just("forget"), workloads),
    st.tuples(st.just("copy"), st.none()),
)


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(ops, max_size=30))
def test_pending_commits_read_as_observed_at_once(steps: list[tuple[str, object]]) -> None:
    """Commits handed over as ``pending`` (engine.commit's hook), interleaved with reads, forgets
    and copies, answer exactly what observing each commit when it happens answers."""
    lazy, eager = TaskMix(), TaskMix()
    for op, arg in steps:
        if op == "commit":
            batch = list(arg)  # type: ignore[call-overload]
            lazy.pending.append(iter(batch))
            if len(lazy.pending) >= MAX_PENDING:
                lazy.fold()
            eager.observe_many(batch)
        elif op == "read":
            assert lazy.typical(arg) == eager.typical(arg)  # type: ignore[arg-type]
            assert lazy.total == eager.total
        elif op == "forget":
            lazy.forget(arg)  # type: ignore[arg-type]
            eager.forget(arg)  # type: ignore[arg-type]
        else:
            lazy = lazy.copy()
    assert lazy.typical(1.0) == eager.typical(1.0)
    assert lazy.total == eager.total
    assert not lazy.pending
