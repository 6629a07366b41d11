"""The store's idempotency memory: bounded, forgotten with its cluster."""

from __future__ import annotations

from strata_policy.model import BatchResult, ColumnarBatch, Decision, PlacedColumns, WorkloadResult
from strata_policy.state.limits import Limits
from strata_policy.state.store import Store


def test_remembered_answers_are_bounded_by_results_held() -> None:
    """Idempotency memory forgets the oldest answers once they hold too many results."""
    store = Store(Limits(idempotency_entries=100, idempotency_results=10))
    big = BatchResult(1, tuple(WorkloadResult(f"w{i}", Decision.ADMITTED) for i in range(6)))
    store.remember("c", "admit", "r1", big)
    store.remember("c", "admit", "r2", big)
    assert store.answer("c", "admit", "r1") is None
    assert store.answer("c", "admit", "r2") is big
    store.remember("c", "release", "r3", 7)
    assert store.answer("c", "release", "r3") == 7
    store.forget_cluster("c")
    assert store.answer("c", "admit", "r2") is None


def test_an_answer_in_columns_weighs_its_results() -> None:
    """A columnar answer counts every result it holds, in columns or as values."""
    store = Store(Limits(idempotency_entries=100, idempotency_results=10))
    run = PlacedColumns([f"w{i}" for i in range(5)], [()] * 5, [{}] * 5, [0.0] * 5)
    big = ColumnarBatch(1, (run, (WorkloadResult("u", Decision.UNPLACED),)))
    store.remember("c", "place", "r1", big)
    store.remember("c", "place", "r2", big)
    assert store.answer("c", "place", "r1") is None
    assert store.answer("c", "place", "r2") is big
