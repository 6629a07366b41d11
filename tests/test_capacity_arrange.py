"""``arrange``: Strata's order and rule for pending work (steady CPU work last, into the spare
room of GPU nodes that stay, the GPUs' CPU reserved), as named cases."""

from __future__ import annotations

import pytest
from capacity_kit import state_of

from strata_policy.capacity import PlanOptions, plan_capacity
from strata_policy.capacity.arrange import arrange, per_gpu, steady_cpu
from strata_policy.model import Policy, Workload
from strata_policy.placement.place import PlacementOptions, place_batch
from strata_policy.testing import node, node_group, running, scope, workload

MOST = PlacementOptions(policy=Policy.MOST_ALLOCATED)


def _t4(nid: str) -> object:
    return node(nid, cpu=8, memory_gi=32, gpus=1, model="T4")


def _chat(wid: str, preemptible: bool = False) -> Workload:
    return workload(wid, "s", cpu=2, memory_gi=8, gpu_milli=500, gpu_model="T4",
                    preemptible=preemptible)  # fmt: skip


def _pg(wid: str, cpu: int) -> Workload:
    return workload(wid, "s", cpu=cpu, memory_gi=4 * cpu, preemptible=False)


def _where(nodes: list, pending: list, run: list | None = None) -> dict[str, tuple[str, ...]]:  # type: ignore[type-arg]
    state = state_of(nodes, [scope("s")], run or [])
    out = arrange(state.matrix, pending, MOST, run or [])
    return {w.id: tuple(p.node_id for p in o.placements) for w, o in zip(pending, out, strict=True)}


def test_steady_cpu_work_takes_the_gpu_nodes_spare_room() -> None:
    """Arriving first, a steady 4-CPU replica would take the empty CPU node (the scheduler's
    tie); arranged, it goes after the GPU work, into the T4 node's spare 4 CPUs."""
    nodes = [node("cpu", cpu=4, memory_gi=16), _t4("t4")]
    pending = [_pg("pg", 4), _chat("c1"), _chat("c2")]
    assert _where(nodes, pending) == {"pg": ("t4",), "c1": ("t4",), "c2": ("t4",)}


@pytest.mark.parametrize(
    ("cpu", "where"),
    [
        pytest.param(4, ("t4",), id="4 CPUs fit beside the CPU the free half GPU needs"),
        pytest.param(6, ("cpu",), id="6 CPUs would strand the free half GPU: the CPU node"),
    ],
)
def test_free_gpus_keep_their_cpu(cpu: int, where: tuple[str, ...]) -> None:
    """A T4 node running one half-T4 replica of 2 CPUs keeps 2 CPUs for the other half."""
    nodes = [node("cpu", cpu=8, memory_gi=32), _t4("t4")]
    run = [running(_chat("c0"), ("t4", (0,)))]
    assert _where(nodes, [_pg("pg", cpu)], run)["pg"] == where


@pytest.mark.parametrize(
    ("preemptible", "where"),
    [
        pytest.param(True, ("cpu",), id="burst only: the node goes with it, avoided"),
        pytest.param(False, ("t4",), id="a guaranteed base replica: the node stays, taken"),
    ],
)
def test_gpu_nodes_of_burst_work_are_avoided(preemptible: bool, where: tuple[str, ...]) -> None:
    """Steady CPU work pins its node: not a GPU node whose work is all preemptible."""
    nodes = [node("cpu", cpu=8, memory_gi=32), _t4("t4")]
    run = [running(_chat("c0", preemptible), ("t4", (0,)))]
    assert _where(nodes, [_pg("pg", 2)], run)["pg"] == where


def test_without_steady_cpu_work_it_is_place_batch() -> None:
    """No non-preemptible CPU work (openb): the outcomes are ``place_batch``'s, in order."""
    nodes = [node("cpu", cpu=4, memory_gi=16), _t4("t4")]
    pending = [workload("p", "s", cpu=4, memory_gi=4), _chat("c1", True), _chat("c2")]
    state = state_of(nodes, [scope("s")])
    assert arrange(state.matrix, pending, MOST) == place_batch(state.matrix, pending, MOST)


def test_spread_gangs_keep_one_replica_per_zone() -> None:
    """A zone-spread steady gang still gets distinct zones, each into that zone's room."""
    zone = "topology.kubernetes.io/zone"
    nodes = [
        node(f"t4-{z}", cpu=8, memory_gi=32, gpus=1, model="T4", labels={zone: z}) for z in "ab"
    ]
    gang = workload("pg", "s", cpu=4, memory_gi=16, replicas=2, preemptible=False,
                    spread_key=zone)  # fmt: skip
    pending = [gang, _chat("c1"), _chat("c2"), _chat("c3"), _chat("c4")]
    assert sorted(_where(nodes, pending)["pg"]) == ["t4-a", "t4-b"]


def test_the_matrix_is_not_changed() -> None:
    """Like ``place_batch``, arranging reads the matrix and leaves it as it was."""
    state = state_of([_t4("t4")], [scope("s")])
    before = state.matrix.free.copy()
    arrange(state.matrix, [_chat("c1"), _pg("pg", 4)], MOST)
    assert (state.matrix.free == before).all()


@pytest.mark.parametrize(
    ("w", "steady"),
    [
        pytest.param(_pg("pg", 1), True, id="non-preemptible CPU work is steady"),
        pytest.param(_chat("c"), False, id="GPU work is not"),
        pytest.param(workload("b", "s", cpu=1), False, id="preemptible CPU work is not"),
    ],
)
def test_steady_cpu(w: Workload, steady: bool) -> None:
    """Which work the second pass arranges."""
    assert steady_cpu(w) is steady


def test_per_gpu_is_the_largest_ask_per_whole_gpu() -> None:
    """Half a T4 with 2 CPUs asks 4 CPUs per T4; the larger of two shapes wins."""
    big = workload("v", "s", cpu=6, gpu_milli=1000, gpu_model="T4")
    assert per_gpu([_chat("c"), big])["T4"]["cpu"] == 6000
    assert per_gpu([_chat("c")])["T4"]["cpu"] == 4000


def _vision(wid: str) -> Workload:
    return workload(wid, "s", cpu=2, memory_gi=8, gpu_milli=1000, gpu_model="A10",
                    preemptible=False)  # fmt: skip


@pytest.mark.parametrize(
    ("arranged", "bought"),
    [
        pytest.param(
            False, [("a10", 3), ("m4", 1)],
            id="arrival order: the dbs take an A10 node's CPU, a third A10 node is bought",
        ),
        pytest.param(
            True, [("a10", 2), ("m4", 1)],
            id="arranged: one db beside each vision replica, the third on a CPU node",
        ),
    ],
)  # fmt: skip
def test_the_plan_buys_for_the_arrangement(arranged: bool, bought: list[tuple[str, int]]) -> None:
    """``PlanOptions.arrange`` plans with the same rule: no GPU node bought for its CPU."""
    groups = [
        node_group("m4", 0.192, cpu=4, memory_gi=16),
        node_group("a10", 1.226, cpu=8, memory_gi=32, gpus=1, model="A10"),
    ]
    options = PlanOptions(placement=MOST, checks=False, fill_by_mix=True, arrange=arranged)
    pending = [_pg("p1", 4), _pg("p2", 4), _pg("p3", 4), _vision("v1"), _vision("v2")]
    plan = plan_capacity(state_of([], [scope("s")]), groups, pending, options)
    assert [(s.node_group_id, s.count) for s in plan.scale_up] == bought
