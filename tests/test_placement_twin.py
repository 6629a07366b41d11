"""Every policy's kernel against the naive twin, on random clusters, states and batches."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_placement import naive_from_matrix

from strata_policy.model import HOSTNAME_KEY, Node, Policy, Workload
from strata_policy.placement.place import (
    FgdScore,
    PlacementOptions,
    PlacementOutcome,
    place_batch,
    place_one,
)
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType
from strata_policy.testing import node, workload

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

MODELS = ["", "A", "B"]


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    """1-6 nodes: mixed sizes, GPU counts, models, zones, cordons and an extra resource."""
    out = []
    for i in range(draw(st.integers(1, 6))):
        gpus = draw(st.integers(0, 4))
        labels = {"zone": draw(st.sampled_from(["z1", "z2"]))} if draw(st.booleans()) else {}
        out.append(
            node(
                f"n{i}",
                cpu=draw(st.sampled_from([2, 4, 8])),
                memory_gi=draw(st.sampled_from([4, 16])),
                gpus=gpus,
                model=draw(st.sampled_from(MODELS[1:])) if gpus else "",
                labels=labels,
                unschedulable=draw(st.integers(0, 9)) == 0,
                extra={"rdma": draw(st.integers(0, 2))} if draw(st.booleans()) else None,
            )
        )
    return out


@st.composite
def workloads(draw: st.DrawFn, prefix: str) -> list[Workload]:
    """Batches mixing shares, whole GPUs, gangs, spread, selectors, models, rdma and fpga."""
    out = []
    for i in range(draw(st.integers(1, 6))):
        extra = {}
        if draw(st.integers(0, 5)) == 0:
            extra[draw(st.sampled_from(["rdma", "fpga"]))] = draw(st.integers(0, 1))
        out.append(
            workload(
                f"{prefix}{i}",
                "s",
                cpu=draw(st.sampled_from([0, 0.5, 1, 2, 3])),
                memory_gi=draw(st.sampled_from([0, 1, 4])),
                gpu_milli=draw(st.sampled_from([0, 250, 500, 750, 1000, 2000])),
                replicas=draw(st.integers(1, 3)),
                node_selector={"zone": "z1"} if draw(st.integers(0, 4)) == 0 else None,
                gpu_model=draw(st.sampled_from(["", "", "A", "A|B"])),
                spread_key=draw(st.sampled_from(["", "", HOSTNAME_KEY, "zone"])),
                extra=extra,
            )
        )
    return out


TYPES = st.lists(
    st.builds(
        TaskType,
        st.sampled_from([0, 1000, 4000]),
        st.sampled_from([0, 300, 500, 1000, 2000]),
        st.sampled_from(["", "A", "B|A"]),
        st.floats(0.05, 1.0),
    ),
    min_size=1,
    max_size=5,
)


@st.composite
def options(draw: st.DrawFn) -> PlacementOptions:
    """Any policy, optional weights, a seed, FGD shapes and FGD score."""
    weights = (
        draw(st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "rdma"]), st.floats(0.5, 3)))
        if draw(st.booleans())
        else {}
    )
    return PlacementOptions(
        policy=draw(st.sampled_from(list(Policy))),
        resource_weights=weights,
        seed=draw(st.integers(0, 3)),
        task_types=tuple(draw(TYPES)),
        fgd_score=draw(st.sampled_from(list(FgdScore))),
    )


def _prefilled(ns: list[Node], pre: list[Workload]) -> NodeMatrix:
    """A matrix with ``pre`` placed first-fit and committed (a non-empty starting state)."""
    m = matrix_from_nodes(ns)
    for out, wl in zip(
        place_batch(m, pre, PlacementOptions(policy=Policy.FIRST_FIT)), pre, strict=True
    ):
        for p in out.placements:
            m.allocate(m.index[p.node_id], wl.request, p.gpu_devices)
    return m


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(), workloads("p"), workloads("w"), options())
def test_kernel_matches_naive_twin(
    ns: list[Node], pre: list[Workload], batch: list[Workload], opts: PlacementOptions
) -> None:
    """place_batch equals the naive twin: placements, devices, scores and explanations."""
    m = _prefilled(ns, pre)
    twin = naive_from_matrix(m)
    got = place_batch(m, batch, opts)
    for wl, out in zip(batch, got, strict=True):
        want = twin.place(
            wl,
            opts.policy,
            opts.resource_weights,
            opts.seed,
            opts.task_types,
            opts.fgd_score.value,
        )
        assert out.placements == want.placements, (wl, out, want)
        assert out.explanation == want.explanation
        assert out.score == want.score


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(), workloads("p"), workloads("w"), options())
def test_batch_equals_repeated_place_one(
    ns: list[Node], pre: list[Workload], batch: list[Workload], opts: PlacementOptions
) -> None:
    """A batch equals place_one + commit one by one; nothing ends over capacity; the input
    matrix is left untouched."""
    m = _prefilled(ns, pre)
    before = (m.free.copy(), m.gpu_free.copy())
    got = place_batch(m, batch, opts)
    assert (m.free == before[0]).all()
    assert (m.gpu_free == before[1]).all()
    for wl, out in zip(batch, got, strict=True):
        one = place_one(m, wl, opts)
        assert one == out
        for p in one.placements:
            m.allocate(m.index[p.node_id], wl.request, p.gpu_devices)
    assert (m.free >= 0).all()
    assert (m.gpu_free[m.gpu_free >= 0] <= 1000).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes(),
    st.lists(workloads("s"), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 17), st.booleans()), min_size=5, max_size=40),
    options(),
)
def test_cached_place_one_tracks_commits_and_releases(
    ns: list[Node],
    pools: list[list[Workload]],
    steps: list[tuple[int, bool]],
    opts: PlacementOptions,
) -> None:
    """place_one's persistent score trees follow every allocate/deallocate: long runs of a few
    repeated shapes, committed or released, answer exactly like the naive twin."""
    pool = [wl for p in pools for wl in p]
    m = matrix_from_nodes(ns)
    held: list[tuple[Workload, PlacementOutcome]] = []
    for pick, release in steps:
        if release and held:
            wl, out = held.pop(pick % len(held))
            for p in out.placements:
                m.deallocate(m.index[p.node_id], wl.request, p.gpu_devices)
            continue
        wl = pool[pick % len(pool)]
        want = naive_from_matrix(m).place(
            wl,
            opts.policy,
            opts.resource_weights,
            opts.seed,
            opts.task_types,
            opts.fgd_score.value,
        )
        got = place_one(m, wl, opts)
        assert got.placements == want.placements, (wl, got, want)
        assert got.score == want.score
        assert got.explanation == want.explanation
        for p in got.placements:
            m.allocate(m.index[p.node_id], wl.request, p.gpu_devices)
        if got.placed:
            held.append((wl, got))
