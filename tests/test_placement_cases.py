"""Placement semantics as named cases: ties, device choice, gangs, spread, explanations."""

from __future__ import annotations

import pytest

from strata_policy.model import HOSTNAME_KEY, Node, Placement, Policy, Workload
from strata_policy.placement.place import PlacementOptions, PlacementOutcome, _placed, place_one
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.testing import node, workload

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

TWO_EQUAL = [node("a", gpus=2), node("b", gpus=2)]
MIXED = [
    node("a", cpu=8, gpus=2, model="A100"),
    node("b", cpu=4, gpus=1, model="V100", labels={"zone": "z1"}),
    node("c", unschedulable=True),
]


@pytest.mark.parametrize(
    ("nodes", "wl", "policy", "expected"),
    [
        pytest.param(
            TWO_EQUAL,
            workload("w", "s", cpu=1),
            Policy.LEAST_ALLOCATED,
            [("a", ())],
            id="tie goes to the lowest index",
        ),
        pytest.param(
            MIXED,
            workload("w", "s", gpu_milli=500, gpu_model="V100"),
            Policy.FIRST_FIT,
            [("b", (0,))],
            id="model filter",
        ),
        pytest.param(
            MIXED,
            workload("w", "s", cpu=1, node_selector={"zone": "z1"}),
            Policy.FIRST_FIT,
            [("b", ())],
            id="selector",
        ),
        pytest.param(
            TWO_EQUAL,
            workload("w", "s", gpu_milli=1000, replicas=2, spread_key=HOSTNAME_KEY),
            Policy.MOST_ALLOCATED,
            [("a", (0,)), ("b", (0,))],
            id="spread over hosts",
        ),
        pytest.param(
            TWO_EQUAL,
            workload("w", "s", gpu_milli=2000, replicas=2),
            Policy.MOST_ALLOCATED,
            [("a", (0, 1)), ("b", (0, 1))],
            id="gang of whole devices",
        ),
    ],
)
def test_placements(
    nodes: list[Node], wl: Workload, policy: Policy, expected: list[tuple[str, tuple[int, ...]]]
) -> None:
    """The chosen nodes and devices per replica."""
    out = place_one(matrix_from_nodes(nodes), wl, PlacementOptions(policy=policy))
    assert [(p.node_id, p.gpu_devices) for p in out.placements] == expected


def test_share_goes_to_best_fit_device() -> None:
    """A share takes the device with the least free milli that fits."""
    m = matrix_from_nodes([node("a", gpus=3)])
    m.allocate(0, {"gpu": 300}, (1,))
    m.allocate(0, {"gpu": 600}, (2,))
    out = place_one(m, workload("w", "s", gpu_milli=400), PlacementOptions())
    assert out.placements[0].gpu_devices == (2,)


@pytest.mark.parametrize(
    ("wl", "message"),
    [
        pytest.param(
            workload("w", "s", gpu_milli=2000, gpu_model="V100"),
            "0/3 nodes fit: 1 gpu_model mismatch, 1 insufficient gpu, 1 unschedulable",
            id="kubernetes style counts",
        ),
        pytest.param(
            workload("w", "s", gpu_milli=1000, replicas=3, spread_key=HOSTNAME_KEY),
            "only 2/3 replicas fit; 0/3 nodes fit: 1 insufficient gpu, 1 spread conflict, "
            "1 unschedulable",
            id="gang partly fits",
        ),
        pytest.param(
            workload("w", "s", cpu=1, extra={"fpga": 1}),
            "0/3 nodes fit: 2 insufficient fpga, 1 unschedulable",
            id="resource no node has",
        ),
    ],
)
def test_explanations(wl: Workload, message: str) -> None:
    """An unplaced workload gets aggregated per-node reasons and no placements."""
    out = place_one(matrix_from_nodes(MIXED), wl, PlacementOptions())
    assert not out.placed
    assert out.explanation == message
    assert out.reasons[0].message == message


def test_random_is_deterministic() -> None:
    """RANDOM gives the same answer for the same seed and workload id."""
    m = matrix_from_nodes([node(f"n{i}", gpus=4) for i in range(20)])
    opts = PlacementOptions(policy=Policy.RANDOM, seed=7)
    wl = workload("w", "s", gpu_milli=500)
    assert place_one(m, wl, opts) == place_one(m.copy(), wl, opts)


RESOURCE_POLICIES = [
    Policy.FIRST_FIT,
    Policy.BEST_FIT,
    Policy.LEAST_ALLOCATED,
    Policy.MOST_ALLOCATED,
    Policy.BALANCED_ALLOCATION,
    Policy.DOT_PRODUCT,
]
VARIED = [
    node("a", cpu=8, memory_gi=16, gpus=2),
    node("b", cpu=4, memory_gi=64, gpus=1),
    node("c", cpu=16, memory_gi=8),
    node("d", cpu=8, memory_gi=16, gpus=2),
]


@pytest.mark.parametrize("policy", [pytest.param(p, id=p.value) for p in RESOURCE_POLICIES])
@pytest.mark.parametrize(
    "wl",
    [
        pytest.param(workload("w", "s", cpu=2, memory_gi=4), id="cpu only"),
        pytest.param(workload("w", "s", cpu=1, gpu_milli=500), id="gpu share"),
        pytest.param(workload("w", "s", cpu=1, gpu_milli=2000), id="two whole gpus"),
        pytest.param(workload("w", "s", cpu=64), id="fits nowhere"),
    ],
)
def test_first_call_scan_equals_tree(policy: Policy, wl: Workload) -> None:
    """A shape's first place_one (fused scan), second (tree build) and third (tree) agree."""
    m = matrix_from_nodes(VARIED)
    m.allocate(0, {"cpu": 1000}, ())
    opts = PlacementOptions(policy=policy)
    first = place_one(m, wl, opts)
    assert place_one(m, wl, opts) == first
    assert place_one(m, wl, opts) == first


def test_fast_outcome_equals_the_dataclass() -> None:
    """Outcomes built through the slots equal (and hash like) ones built by __init__."""
    placements = (Placement("n1", (0,)),)
    fast, slow = _placed(placements, 1.5), PlacementOutcome(placements, 1.5)
    assert fast == slow
    assert hash(fast) == hash(slow)
    assert fast.placed
    assert repr(fast) == repr(slow)
