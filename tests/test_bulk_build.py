"""Building a pushed snapshot in bulk equals allocating its replicas one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.model import Placement, RunningWorkload, Snapshot, Workload
from strata_policy.state.cluster import _allocate_one_by_one
from strata_policy.state.nodes import NodeMatrix
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


@settings(max_examples=300)
@given(workloads=st.lists(running, max_size=6))
def test_bulk_allocation_equals_one_by_one(workloads: list[RunningWorkload]) -> None:
    """Same verdict (fits or not) and, when it fits, the very same arrays."""
    snap = Snapshot(NODES, (), tuple(workloads))
    bulk, single = NodeMatrix.from_nodes(NODES), NodeMatrix.from_nodes(NODES)
    ok = bulk.allocate_running(workloads)
    problems = _allocate_one_by_one(single, snap, "snapshot")
    assert ok == (not problems)
    if ok:
        assert (bulk.allocated == single.allocated).all()
        assert (bulk.free == single.free).all()
        assert (bulk.gpu_free == single.gpu_free).all()
    else:
        fresh = NodeMatrix.from_nodes(NODES)
        assert (bulk.allocated == fresh.allocated).all()
        assert (bulk.gpu_free == fresh.gpu_free).all()
