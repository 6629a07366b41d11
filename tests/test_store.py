"""The store's idempotency memory and slots: bounded, per caller, nothing kept for unknown ids."""

from __future__ import annotations

import threading

import pytest

from strata_policy.engine.commit import RequestKey, Store, request_digest
from strata_policy.errors import ClusterNotFound, RequestIdReused
from strata_policy.model import BatchResult, Decision, WorkloadResult
from strata_policy.placement.outputs import ColumnarBatch, PlacedColumns
from strata_policy.state.request_checks import Limits
from strata_policy.testing import node, snapshot

D1, D2 = request_digest(b"body-1"), request_digest(b"body-2")


def key(request_id: str, method: str = "admit", caller: str = "", cluster: str = "c") -> RequestKey:
    """A remembered answer's key."""
    return (caller, cluster, method, request_id)


def test_remembered_answers_are_bounded_by_results_held() -> None:
    """Idempotency memory forgets the oldest answers once they hold too many results."""
    store = Store(Limits(idempotency_entries=100, idempotency_results=10))
    big = BatchResult(1, tuple(WorkloadResult(f"w{i}", Decision.ADMITTED) for i in range(6)))
    store.remember(key("r1"), D1, big)
    store.remember(key("r2"), D1, big)
    assert store.answer(key("r1"), D1) is None
    assert store.answer(key("r2"), D1) is big
    store.remember(key("r3", "release"), D1, 7)
    assert store.answer(key("r3", "release"), D1) == 7
    store.forget_cluster("c")
    assert store.answer(key("r2"), D1) is None


def test_remembered_answers_are_bounded_in_entries() -> None:
    """However many ids are sent, at most ``idempotency_entries`` answers are kept."""
    store = Store(Limits(idempotency_entries=5))
    for i in range(50):
        store.remember(key(f"r{i}"), D1, i)
    assert store.remembered() == 5
    assert store.answer(key("r49"), D1) == 49
    assert store.answer(key("r0"), D1) is None


def test_an_answer_in_columns_weighs_its_results() -> None:
    """A columnar answer counts every result it holds, in columns or as values."""
    store = Store(Limits(idempotency_entries=100, idempotency_results=10))
    run = PlacedColumns([f"w{i}" for i in range(5)], [()] * 5, [{}] * 5, [0.0] * 5)
    big = ColumnarBatch(1, (run, (WorkloadResult("u", Decision.UNPLACED),)))
    store.remember(key("r1", "place"), D1, big)
    store.remember(key("r2", "place"), D1, big)
    assert store.answer(key("r1", "place"), D1) is None
    assert store.answer(key("r2", "place"), D1) is big


@pytest.mark.parametrize(
    ("asked", "digest", "expected"),
    [
        pytest.param(key("r1"), D1, 1, id="same caller, same body: the first answer"),
        pytest.param(key("r1", caller="bob"), D1, None, id="another caller: not remembered"),
        pytest.param(key("r1", cluster="d"), D1, None, id="another cluster: not remembered"),
        pytest.param(key("r1", "release"), D1, None, id="another method: not remembered"),
        pytest.param(key("r1"), D2, RequestIdReused, id="same id, another body: reused"),
    ],
)
def test_answers_are_per_caller_and_body(
    asked: RequestKey, digest: bytes, expected: object
) -> None:
    """An answer is found only under its own caller, cluster and method, and only for the
    same body; another body with the same id is ``RequestIdReused``."""
    store = Store()
    store.remember(key("r1"), D1, 1)
    if expected is RequestIdReused:
        with pytest.raises(RequestIdReused) as err:
            store.answer(asked, digest)
        assert err.value.reason == "REQUEST_ID_REUSED"
        assert err.value.violations[0].field == "request_id"
    else:
        assert store.answer(asked, digest) == expected


def test_unknown_ids_keep_no_slot() -> None:
    """Looking up an unknown cluster fails without keeping anything for its id."""
    store = Store()
    for i in range(100):
        with pytest.raises(ClusterNotFound):
            store.slot(f"nope-{i}" * 50)
    assert store._slots == {}


def test_a_claim_left_empty_is_dropped() -> None:
    """A claimed slot that never got a state (a refused or dry push) is gone afterwards."""
    store = Store()
    with pytest.raises(ValueError, match="refused"), store.claim("new"):
        raise ValueError("refused")
    with store.claim("dry"):
        pass
    assert store._slots == {}


def test_a_claim_after_a_delete_gets_the_current_slot() -> None:
    """A push that waited on a slot a delete then dropped creates the cluster in a fresh slot,
    not in the orphan, so the cluster it made is the one the store serves."""
    from strata_policy.state.cluster import ClusterState  # noqa: PLC0415  # test-only builder

    store = Store()
    state = ClusterState.build("c", snapshot([node("n1", gpus=1)]), 1)
    with store.claim("c") as slot:
        slot.state = state
    old = store.slot("c")
    old.lock.acquire()  # a delete holds the lock ...
    pushed = threading.Event()

    def push() -> None:
        with store.claim("c") as s:
            s.state = state
        pushed.set()

    t = threading.Thread(target=push)
    t.start()
    old.state = None  # ... empties the cluster, and releases (dropping the slot)
    old.__exit__()
    t.join(timeout=10)
    assert pushed.is_set()
    assert store.slot("c") is not old
    assert store.cluster_ids() == ["c"]
