"""Similar node groups at scale-up: a fill spread over zones (``estimate.balanced``), and the
planner pricing both zone orders when zone-spread work waits, as named cases and a property."""

from __future__ import annotations

import pytest
from capacity_kit import state_of
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.capacity import NodeGroup, PlanOptions, plan_capacity, scale_up
from strata_policy.capacity.estimate import balanced, similar_groups
from strata_policy.model import Policy, Workload
from strata_policy.placement.place import PlacementOptions
from strata_policy.testing import node_group, scope, workload

ZONE = "topology.kubernetes.io/zone"
MOST = PlacementOptions(policy=Policy.MOST_ALLOCATED)
REPLAY = PlanOptions(placement=MOST, checks=False, fill_by_mix=True, arrange=True)


def _catalog() -> list[NodeGroup]:
    """The synthetic day's CPU, T4 and A10 shapes in zones a, b, c (its prices)."""
    shapes = (("m-4", 0.192, 4, 16, 0, ""), ("t4-1", 0.786, 8, 32, 1, "T4"),
              ("a10-1", 1.226, 8, 32, 1, "A10"))  # fmt: skip
    return [
        node_group(f"{name}-{z}", price, cpu, mem, gpus, model, max_count=50,
                   labels={ZONE: z})
        for name, price, cpu, mem, gpus, model in shapes
        for z in "abc"
    ]  # fmt: skip


def _chat(wid: str) -> Workload:
    return workload(wid, "s", cpu=2, memory_gi=8, gpu_milli=500, gpu_model="T4",
                    preemptible=False)  # fmt: skip


def _vision(wid: str) -> Workload:
    return workload(wid, "s", cpu=2, memory_gi=8, gpu_milli=1000, gpu_model="A10",
                    preemptible=False)  # fmt: skip


def _pg(wid: str, cpu: int) -> Workload:
    return workload(wid, "s", cpu=cpu, memory_gi=4 * cpu, replicas=3, preemptible=False,
                    spread_key=ZONE)  # fmt: skip


def _plan(pending: list[Workload]) -> tuple[float, dict[str, int]]:
    """The plan's cost per hour and its new nodes per group."""
    plan = plan_capacity(state_of([], [scope("s")]), _catalog(), pending, REPLAY)
    return plan.cost_per_hour, {s.node_group_id: s.count for s in plan.scale_up}


@pytest.mark.parametrize(
    ("b", "similar"),
    [
        pytest.param(node_group("x-b", 1.0, 8, 32, labels={ZONE: "b"}), True,
                     id="similar: another zone"),
        pytest.param(node_group("x-a2", 1.0, 8, 32, labels={ZONE: "a"}), True,
                     id="similar: same zone, another group"),
        pytest.param(node_group("x-b", 1.1, 8, 32, labels={ZONE: "b"}), False,
                     id="not similar: another price"),
        pytest.param(node_group("x-b", 1.0, 16, 32, labels={ZONE: "b"}), False,
                     id="not similar: another capacity"),
        pytest.param(node_group("x-b", 1.0, 8, 32, labels={ZONE: "b", "pool": "p"}), False,
                     id="not similar: another label"),
    ],
)  # fmt: skip
def test_similar_groups(b: NodeGroup, similar: bool) -> None:
    """Groups alike but for the zone (and their own id) are similar, as CA's balancing says."""
    a = node_group("x-a", 1.0, 8, 32, labels={ZONE: "a"})
    assert similar_groups(a, b) is similar


@pytest.mark.parametrize(
    ("caps", "headroom", "total", "spread"),
    [
        pytest.param({0: 5, 1: 5, 2: 5}, [5, 5, 5], 3, [(0, 1), (1, 1), (2, 1)],
                     id="balanced: one each"),
        pytest.param({0: 5, 1: 5, 2: 5}, [3, 5, 5], 3, [(1, 2), (2, 1)],
                     id="balanced: the smallest group first"),
        pytest.param({0: 1, 1: 5, 2: 5}, [5, 5, 5], 5, [(0, 1), (1, 2), (2, 2)],
                     id="balanced: within each cap"),
        pytest.param({0: 1, 1: 0, 2: 0}, [5, 5, 5], 4, [(0, 1)], id="balanced: caps bound it"),
    ],
)  # fmt: skip
def test_balanced(
    caps: dict[int, int], headroom: list[int], total: int, spread: list[tuple[int, int]]
) -> None:
    """Nodes go one at a time to the group with the most headroom left, within its cap."""
    assert balanced([0, 1, 2], caps, headroom, total) == spread


@pytest.mark.parametrize(
    ("pending", "cost", "added"),
    [
        pytest.param(
            [*(_chat(f"c{i}") for i in range(4)), _pg("pg0", 2), _pg("pg1", 2)], 1.764,
            {"t4-1-a": 1, "t4-1-b": 1, "m-4-c": 1},
            id="balanced is cheaper: the T4 nodes in two zones hold two zones' replicas",
        ),
        pytest.param(
            [_vision("v0"), _vision("v1"), *(_chat(f"c{i}") for i in range(4)),
             _pg("pg0", 4), _pg("pg1", 2)], 4.024,
            {"a10-1-b": 1, "a10-1-c": 1, "t4-1-a": 2},
            id="the catalog order is cheaper: both T4 nodes' room in one zone",
        ),
    ],
)  # fmt: skip
def test_the_plan_keeps_the_cheaper_zone_order(
    pending: list[Workload], cost: float, added: dict[str, int]
) -> None:
    """With zone-spread work waiting, the plan prices both zone orders and keeps the cheaper."""
    got_cost, got_added = _plan(pending)
    assert got_cost == pytest.approx(cost)
    assert got_added == added


def test_a_tie_goes_to_the_balanced_order() -> None:
    """Equal cost: the new nodes of one fill spread over the zones (room each zone's gang
    replica can use, and a zone lost takes less)."""
    cost, added = _plan([_vision("v0"), _vision("v1"), _pg("pg0", 4), _pg("pg1", 4)])
    assert cost == pytest.approx(3.22)  # the catalog order: a10-1-a 2, m-4-b 2, m-4-c 2
    assert added == {"a10-1-a": 1, "a10-1-b": 1, "m-4-a": 1, "m-4-b": 1, "m-4-c": 2}


def test_without_zone_spread_work_the_catalog_order_stays() -> None:
    """No zone-spread work waiting: one estimate in the catalog's order, as before."""
    _, added = _plan([_vision("v0"), _vision("v1")])
    assert added == {"a10-1-a": 2}


_SIZES = st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None)
@given(vision=st.integers(0, 3), chat=st.integers(0, 4), sizes=_SIZES)
def test_never_dearer_than_the_catalog_order(vision: int, chat: int, sizes: list[int]) -> None:
    """The plan costs no more than the catalog order's alone and places as much."""
    pending = [*(_vision(f"v{i}") for i in range(vision)), *(_chat(f"c{i}") for i in range(chat))]
    pending += [_pg(f"pg{i}", s) for i, s in enumerate(sizes)]
    state = state_of([], [scope("s")])
    both = plan_capacity(state, _catalog(), pending, REPLAY)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scale_up, "spread_by_label", lambda w: False)
        plain = plan_capacity(state, _catalog(), pending, REPLAY)
    assert len(both.unplaceable) <= len(plain.unplaceable)
    assert both.cost_per_hour <= plain.cost_per_hour + 1e-9
