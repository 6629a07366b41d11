"""NodeMatrix: layout, fit checks, allocate/deallocate, totals; TaskMix counting."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.model.resources import GPU
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.taskmix import TaskMix, TaskType
from strata_policy.testing import node, resources, workload

NODES = [
    node("a", cpu=8, memory_gi=32, gpus=2, model="A100"),
    node("b", cpu=4, memory_gi=16, extra={"rdma": 2}),
    node("c", cpu=16, memory_gi=64, gpus=4, model="V100", unschedulable=True),
]


def test_layout_reserved_columns_first_then_sorted() -> None:
    """Columns are cpu, memory, gpu, then other resources sorted; absent amounts are 0."""
    m = matrix_from_nodes(NODES)
    assert m.resources == ("cpu", "memory", "gpu", "rdma")
    assert m.index == {"a": 0, "b": 1, "c": 2}
    assert m.capacity.dtype == np.int64
    assert m.capacity.flags.c_contiguous
    assert m.capacity[1].tolist() == [4000, 16 * 1024**3, 0, 2]
    assert m.gpu_free.tolist() == [[1000, 1000, -1, -1], [-1] * 4, [1000] * 4]
    assert m.schedulable.tolist() == [True, True, False]


def test_empty_matrix_has_one_device_column() -> None:
    """No nodes still gives well-formed arrays (D is at least 1)."""
    m = matrix_from_nodes([])
    assert m.capacity.shape == (0, 3)
    assert m.gpu_free.shape == (0, 1)
    assert m.total_capacity() == {"cpu": 0, "memory": 0, "gpu": 0}


@pytest.mark.parametrize(
    ("n", "request_", "devices", "expected"),
    [
        pytest.param(0, resources(cpu=2, gpu_milli=500), (1,), None, id="share on one device"),
        pytest.param(0, resources(gpu_milli=2000), (0, 1), None, id="two whole devices"),
        pytest.param(1, resources(cpu=1), (), None, id="cpu only"),
        pytest.param(
            1, resources(cpu=6), (), "insufficient cpu: 4000 free, 6000 requested", id="short cpu"
        ),
        pytest.param(
            0, resources(gpu_milli=500), (9,), "gpu device 9 does not exist", id="bad dev"
        ),
        pytest.param(
            0, resources(gpu_milli=500), (), "gpu request 500 needs 1 device(s), got 0", id="no dev"
        ),
        pytest.param(
            0, resources(gpu_milli=1000), (1, 1), "gpu devices [1, 1] are not distinct", id="dup"
        ),
        pytest.param(
            1,
            resources(extra={"fpga": 1}),
            (),
            "insufficient fpga: 0 free, 1 requested",
            id="unknown resource",
        ),
        pytest.param(1, resources(extra={"fpga": 0}), (), None, id="unknown resource, zero"),
        pytest.param(
            1, resources(cpu=1), (0,), "gpu device 0 does not exist", id="devices on cpu node"
        ),
    ],
)
def test_replica_fit_error(
    n: int, request_: dict[str, int], devices: tuple[int, ...], expected: str | None
) -> None:
    """replica_fit_error names the first problem, or None when the replica fits."""
    assert matrix_from_nodes(NODES).replica_fit_error(n, request_, devices) == expected


def test_device_level_shortfall_after_share() -> None:
    """A device holding a share cannot give a whole device or a larger share."""
    m = matrix_from_nodes(NODES)
    m.allocate(0, {GPU: 700}, (0,))
    assert m.replica_fit_error(0, {GPU: 500}, (0,)) == "gpu device 0 has 300 free, 500 requested"
    assert m.replica_fit_error(0, {GPU: 1000}, (0,)) == (
        "gpu device 0 has 300 free, 1000 requested"
    )
    assert m.allocated[0, 2] == 700
    assert m.free[0, 2] == 1300


def test_allocate_refuses_overcommit() -> None:
    """allocate raises instead of over-committing; nothing changes."""
    m = matrix_from_nodes(NODES)
    with pytest.raises(ValueError, match="insufficient cpu"):
        m.allocate(1, resources(cpu=5), ())
    assert not m.allocated.any()


def test_copy_is_independent() -> None:
    """Mutating a copy leaves the original as it was."""
    m = matrix_from_nodes(NODES)
    c = m.copy()
    c.allocate(0, resources(cpu=1, gpu_milli=300), (0,))
    assert not m.allocated.any()
    assert m.gpu_free[0, 0] == 1000
    assert m.version[0] == 0
    assert c.allocated[0, 0] == 1000
    assert c.gpu_free[0, 0] == 700
    assert c.version[0] == 1


def test_totals() -> None:
    """total_capacity skips unschedulable nodes unless asked; total_allocated sums all."""
    m = matrix_from_nodes(NODES)
    m.allocate(2, resources(cpu=1, gpu_milli=1000), (3,))
    assert m.total_capacity()["gpu"] == 2000
    assert m.total_capacity(schedulable_only=False)["gpu"] == 6000
    assert m.total_allocated() == {"cpu": 1000, "memory": 0, "gpu": 1000, "rdma": 0}


_REQUESTS = st.tuples(
    st.integers(0, 3),
    st.sampled_from([0, 100, 500, 999, 1000, 2000]),
    st.integers(0, 3),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_REQUESTS, max_size=12), st.randoms(use_true_random=False))
def test_allocate_then_deallocate_restores(steps: list[tuple[int, int, int]], rnd: object) -> None:
    """Any fitting sequence of allocations, undone in any order, restores the empty state;
    the gpu column always equals the per-device sum and no amount goes negative."""
    m = matrix_from_nodes(NODES)
    done = []
    for cpu, gpu, raw_n in steps:
        n = raw_n % 3
        req = resources(cpu=cpu, gpu_milli=gpu)
        devs = [d for d in range(int(m.gpu_devices[n])) if m.gpu_free[n, d] >= min(gpu, 1000)]
        k = 0 if gpu == 0 else max(1, gpu // 1000)
        chosen = tuple(devs[:k])
        if m.replica_fit_error(n, req, chosen) is None:
            m.allocate(n, req, chosen)
            done.append((n, req, chosen))
        assert (m.free >= 0).all()
        used = np.where(m.gpu_free >= 0, 1000 - m.gpu_free, 0).sum(axis=1)
        assert used.tolist() == m.allocated[:, 2].tolist()
    rnd.shuffle(done)  # type: ignore[attr-defined]  # hypothesis Random
    for n, req, chosen in done:
        m.deallocate(n, req, chosen)
    fresh = matrix_from_nodes(NODES)
    assert (m.free == fresh.free).all()
    assert (m.gpu_free == fresh.gpu_free).all()


def test_taskmix_typical_covers_and_renormalises() -> None:
    """typical() takes the most common shapes until coverage, weights summing to 1."""
    mix = TaskMix()
    for i in range(10):
        mix.observe(workload(f"a{i}", "s", cpu=1, gpu_milli=500))
    for i in range(5):
        mix.observe(workload(f"b{i}", "s", cpu=2, gpu_milli=1000, gpu_model="V100|A100"))
    mix.observe(workload("c", "s", cpu=4, replicas=2))
    assert mix.total == 17
    assert mix.typical(0.8) == (
        TaskType(1000, 500, "", 10 / 15),
        TaskType(2000, 1000, "A100|V100", 5 / 15),
    )
    assert len(mix.typical(1.0)) == 3
    copy = mix.copy()
    mix.forget(workload("c", "s", cpu=4, replicas=2))
    assert len(mix.typical(1.0)) == 2
    assert len(copy.typical(1.0)) == 3


def test_taskmix_empty() -> None:
    """An empty mix has no typical shapes."""
    assert TaskMix().typical() == ()
