"""Building a pushed snapshot in bulk equals allocating its replicas one by one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matrix_state import matrix_state

from strata_policy.model import Placement, RunningWorkload, Snapshot, Workload
from strata_policy.state.cluster import allocate_one_by_one
from strata_policy.state.matrix_build import allocate_running, matrix_from_nodes, running_rows
from strata_policy.state.nodes import NodeMatrix, ReplicaRows
from strata_policy.testing import node

NODES = (
    node("a", cpu=8, gpus=2),
    node("b", cpu=4, gpus=4, extra={"rdma": 2}),
    node("c", cpu=16, gpus=0),
)

replica = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.lists(st.integers(-1, 4), max_size=3, unique=True).map(tuple),
)
running = st.builds(
    lambda i, cpu, gpu, rdma, places: RunningWorkload(
        Workload(f"w{i}", "s", {"cpu": cpu, "gpu": gpu, "rdma": rdma}, replicas=len(places)),
        tuple(Placement(n, d) for n, d in places),
    ),
    st.integers(0, 10**6),
    st.sampled_from([0, 1000, 3000]),
    st.sampled_from([0, 300, 700, 1000, 2000]),
    st.sampled_from([0, 0, 1]),
    st.lists(replica, min_size=1, max_size=2),
)


def _prefilled(before: int) -> tuple[NodeMatrix, int]:
    """A fresh matrix after ``before`` one-milli CPU replicas on node c (moving the journal
    towards its end), and its epoch then."""
    m = matrix_from_nodes(NODES)
    for _ in range(before):
        m.allocate(2, {"cpu": 1}, ())
    return m, m.epoch


@settings(max_examples=300)
@given(workloads=st.lists(running, max_size=6), before=st.sampled_from([0, 60, 70, 75]))
def test_bulk_allocation_equals_one_by_one(workloads: list[RunningWorkload], before: int) -> None:
    """Same verdict (fits or not) and, when it fits, the very same arrays, versions and journal
    (a journal filled part way starts a new one at the same replica); else nothing changed."""
    snap = Snapshot(NODES, (), tuple(workloads))
    (bulk, bulk_epoch), (single, single_epoch) = _prefilled(before), _prefilled(before)
    start = matrix_state(bulk)
    ok = allocate_running(bulk, workloads)
    problems = allocate_one_by_one(single, snap, "snapshot")
    assert ok == (not problems)
    if ok:
        assert matrix_state(bulk) == matrix_state(single)
        assert (bulk.epoch == bulk_epoch) == (single.epoch == single_epoch)
    else:
        assert matrix_state(bulk) == start
        assert bulk.epoch == bulk_epoch


@pytest.mark.parametrize(
    ("before", "count"),
    [
        pytest.param(0, 200, id="journal: wraps twice from empty"),
        pytest.param(75, 1, id="journal: the replica filling the last slot starts a new one"),
        pytest.param(74, 1, id="journal: one slot short of full"),
        pytest.param(10, 0, id="journal: no replicas, nothing written"),
    ],
)
def test_rows_journal_like_one_by_one(before: int, count: int) -> None:
    """allocate_rows journals and versions exactly as allocate does, across a full journal."""
    (bulk, bulk_epoch), (single, single_epoch) = _prefilled(before), _prefilled(before)
    nodes = np.array([i % 3 for i in range(count)], dtype=np.int64)
    req = np.zeros((count, len(bulk.resources)), dtype=np.int64)
    req[:, 0] = 1
    assert bulk.allocate_rows(ReplicaRows(nodes, req, np.full((count, 2), -1, dtype=np.int64)))
    for n in nodes.tolist():
        single.allocate(n, {"cpu": 1}, ())
    assert matrix_state(bulk) == matrix_state(single)
    assert (bulk.epoch == bulk_epoch) == (single.epoch == single_epoch)


def _deallocate_one_by_one(m: NodeMatrix, workloads: list[RunningWorkload]) -> bool:
    try:
        for rw in reversed(workloads):
            for p in reversed(rw.placements):
                m.deallocate(m.index[p.node_id], rw.workload.request, p.gpu_devices)
    except ValueError:
        return False
    return True


@settings(max_examples=200)
@given(workloads=st.lists(running, max_size=6), stray=st.lists(running, max_size=3))
def test_bulk_deallocation_is_the_inverse_one_by_one(
    workloads: list[RunningWorkload], stray: list[RunningWorkload]
) -> None:
    """deallocate_rows frees what allocate_rows took exactly as deallocate one by one, last
    first (arrays, versions, journal); it never frees what one by one refuses, and a refusal
    changes nothing (it may refuse malformed rows one by one lets through: its caller then
    frees one by one)."""
    bulk, single = matrix_from_nodes(NODES), matrix_from_nodes(NODES)
    if allocate_running(bulk, workloads):
        assert allocate_running(single, workloads)
        rows = running_rows(bulk, workloads)
        assert rows is not None
        assert bulk.deallocate_rows(rows)
        assert _deallocate_one_by_one(single, workloads)
        assert matrix_state(bulk) == matrix_state(single)
        assert matrix_state(bulk)[:3] == matrix_state(matrix_from_nodes(NODES))[:3]
    fresh, reference = matrix_from_nodes(NODES), matrix_from_nodes(NODES)
    rows = running_rows(fresh, stray)
    if rows is not None:
        before = matrix_state(fresh)
        freed = fresh.deallocate_rows(rows)
        if freed:
            assert _deallocate_one_by_one(reference, stray)
            assert matrix_state(fresh) == matrix_state(reference)
        else:
            assert matrix_state(fresh) == before
