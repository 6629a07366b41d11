"""The block search's static levels from cached parts (``inputs.search_levels``): their
``&`` equals the ``StaticMask``'s levels, and a first placement with a new selector answers like
the general path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_placement import naive_from_matrix
from test_placement_blocks import RESOURCE_POLICIES, block_sizes

from strata_policy.model import Node, Policy, Workload
from strata_policy.placement.index import index_of
from strata_policy.placement.inputs import search_levels, static_mask
from strata_policy.placement.place import PlacementOptions, place_batch, place_one
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.testing import node, workload

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

SELECTORS = st.sampled_from(
    [
        {},
        {"zone": "z1"},
        {"zone": "z2"},
        {"zone": "nowhere"},
        {"nowhere": "z1"},
        {"zone": "z1", "rack": "r1"},
        {"rack": "r2", "zone": "z2"},
    ]
)


@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    """4-30 nodes of a few types and models, some cordoned, in zones and racks (or neither)."""
    types = draw(
        st.lists(
            st.tuples(st.sampled_from([2, 4, 8]), st.integers(0, 4), st.sampled_from(["A", "B"])),
            min_size=1,
            max_size=3,
        )
    )
    out = []
    for i in range(draw(st.integers(4, 30))):
        cpu, gpus, model = types[draw(st.integers(0, len(types) - 1))]
        labels = {}
        zone = draw(st.sampled_from(["", "z1", "z2"]))
        if zone:
            labels["zone"] = zone
        if draw(st.booleans()):
            labels["rack"] = draw(st.sampled_from(["r1", "r2"]))
        out.append(
            node(
                f"n{i}",
                cpu=cpu,
                memory_gi=16,
                gpus=gpus,
                model=model if gpus else "",
                labels=labels,
                unschedulable=draw(st.integers(0, 8)) == 0,
            )
        )
    return out


def _workload(selector: dict[str, str], models: str, gpu_milli: int, cpu: float = 1) -> Workload:
    return workload(
        "w", "s", cpu=cpu, memory_gi=1, gpu_milli=gpu_milli, node_selector=selector,
        gpu_model=models,
    )  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(
    clusters(),
    SELECTORS,
    st.sampled_from(["", "A", "B", "A|B"]),
    st.sampled_from([0, 500, 1000]),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_search_levels_equal_the_static_mask(
    ns: list[Node], selector: dict[str, str], models: str, gpu: int, block: int, sup: int
) -> None:
    """search_levels gives the StaticMask's selected nodes, and its block and superblock levels
    as two parts whose ``&`` they are."""
    with block_sizes(block, sup):
        m = matrix_from_nodes(ns)
        wl = _workload(selector, models, gpu)
        selected, blocks, supers, select_blocks, select_supers = search_levels(m, wl)
        static = static_mask(m, wl)
        assert selected.tolist() == static.selected.tolist()
        assert (blocks & select_blocks).tolist() == static.blocks.tolist()
        assert (supers & select_supers).tolist() == static.supers.tolist()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    st.lists(
        st.tuples(
            SELECTORS,
            st.sampled_from(["", "A", "B"]),
            st.sampled_from([0, 500, 2000]),
            st.sampled_from([1, 4, 16]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(RESOURCE_POLICIES),
    st.integers(1, 3),
)
def test_first_placement_of_a_selector_equals_the_general_path(
    ns: list[Node],
    asks: list[tuple[dict[str, str], str, int, float]],
    policy: Policy,
    block: int,
) -> None:
    """A new selector's first place_one equals place_batch and the twin, state left alone."""
    opts = PlacementOptions(policy=policy)
    with block_sizes(block, 2):
        m = matrix_from_nodes(ns)
        for selector, models, gpu, cpu in asks:
            wl = _workload(selector, models, gpu, cpu)
            index_of(m).lineage.masks.clear()
            index_of(m).lineage.queries.clear()
            free, gpu_free = m.free.copy(), m.gpu_free.copy()
            got = place_one(m, wl, opts)
            assert np.array_equal(m.free, free)
            assert np.array_equal(m.gpu_free, gpu_free)
            (want,) = place_batch(m, [wl], opts)
            assert got == want
            twin = naive_from_matrix(m).place(wl, policy, {})
            assert (got.placements, got.explanation) == (twin.placements, twin.explanation)
            for p in got.placements:
                m.allocate(m.index[p.node_id], wl.request, p.gpu_devices)


NODES = [
    node("a", cpu=8, gpus=2, model="A", labels={"zone": "z1"}),
    node("b", cpu=8, gpus=2, model="B", labels={"zone": "z1"}),
    node("c", cpu=8, gpus=0, labels={"zone": "z2"}),
    node("d", cpu=8, gpus=2, model="A", labels={"zone": "z2"}, unschedulable=True),
]


@pytest.mark.parametrize(
    ("selector", "models", "gpu", "placed_on", "explanation"),
    [
        pytest.param({"zone": "z1"}, "B", 500, "b", "", id="selector and model: the B node"),
        pytest.param({"zone": "z2"}, "", 0, "c", "", id="cordoned node of the zone skipped"),
        pytest.param({"zone": "z2"}, "A", 0, "c", "", id="no GPU asked: a GPU-less node passes"),
        pytest.param(
            {"zone": "z2"}, "A", 500, "",
            "0/4 nodes fit: 2 node_selector mismatch, 1 gpu_model mismatch, 1 unschedulable",
            id="nothing fits: counts as before",
        ),
        pytest.param(
            {"zone": "z3"}, "", 0, "",
            "0/4 nodes fit: 3 node_selector mismatch, 1 unschedulable",
            id="a value no node has",
        ),
    ],
)  # fmt: skip
def test_first_placement_of_a_selector(
    selector: dict[str, str], models: str, gpu: int, placed_on: str, explanation: str
) -> None:
    """A new selector's first placement: the node chosen, or the reasons counted as before."""
    m = matrix_from_nodes(NODES)
    out = place_one(m, _workload(selector, models, gpu), PlacementOptions())
    assert [p.node_id for p in out.placements] == ([placed_on] if placed_on else [])
    assert out.explanation == explanation
