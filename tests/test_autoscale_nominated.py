"""The replay's ``strata`` row places as Strata decides (DESIGN §9): a workload the plan put on
a node it ordered waits for that node and runs exactly there; the rest is arranged."""

from __future__ import annotations

import pytest
from capacity_kit import state_of

from strata_policy.engine import Engine
from strata_policy.model import Policy, Snapshot
from strata_policy.placement.place import PlacementOptions
from strata_policy.simulate import strata_place
from strata_policy.simulate.autoscalers import StrataAutoscaler, View
from strata_policy.state.changes import Delta
from strata_policy.testing import group_node, node, node_group, scope, workload

MOST = PlacementOptions(policy=Policy.MOST_ALLOCATED)


def _engine(*nodes: object) -> Engine:
    engine = Engine(clock=lambda: 0)
    engine.push_snapshot("c", Snapshot(tuple(nodes), (scope("s"),), ()))  # type: ignore[arg-type]
    return engine


def _where(engine: Engine) -> dict[str, tuple[str, ...]]:
    _, snap = engine.snapshot("c")
    return {rw.workload.id: tuple(p.node_id for p in rw.placements) for rw in snap.workloads}


def test_a_nominated_workload_runs_on_its_node() -> None:
    """The scheduler's policy would pack ``p`` onto the half-full node; nominated to the other,
    it runs there, and the nomination is used up."""
    engine = _engine(node("a", cpu=4, memory_gi=16), node("b", cpu=4, memory_gi=16))
    first = workload("first", "s", cpu=2, memory_gi=2)
    assert strata_place.place(engine, "c", [first], {}, set(), MOST) == ["first"]
    p = workload("p", "s", cpu=1, memory_gi=1)
    other = "b" if _where(engine)["first"] == ("a",) else "a"
    nominated = {"p": (other,)}
    assert strata_place.place(engine, "c", [p], nominated, set(), MOST) == ["p"]
    assert (_where(engine)["p"], nominated) == ((other,), {})


def test_it_waits_for_a_node_being_provisioned() -> None:
    """No ready room: it waits for its coming node; a node that will not come lets the
    nomination lapse and it is placed like the rest once room is there."""
    engine = _engine(node("a", cpu=4, memory_gi=16))
    full = workload("full", "s", cpu=4, memory_gi=4)
    strata_place.place(engine, "c", [full], {}, set(), MOST)
    p = workload("p", "s", cpu=1, memory_gi=1)
    nominated = {"p": ("new-0",)}
    assert strata_place.place(engine, "c", [p], nominated, {"new-0"}, MOST) == []
    assert nominated == {"p": ("new-0",)}
    assert strata_place.place(engine, "c", [p], nominated, set(), MOST) == []
    assert nominated == {}


def test_ready_room_is_taken_before_the_coming_node() -> None:
    """Room freed since the plan: it runs now on a ready node, not 120 s later on its own."""
    engine = _engine(node("a", cpu=4, memory_gi=16))
    p = workload("p", "s", cpu=1, memory_gi=1)
    nominated = {"p": ("new-0",)}
    assert strata_place.place(engine, "c", [p], nominated, {"new-0"}, MOST) == ["p"]
    assert (_where(engine)["p"], nominated) == (("a",), {})


def test_a_lapsed_room_is_placed_like_the_rest() -> None:
    """Its node is ready but full: the nomination lapses and Strata places it elsewhere."""
    engine = _engine(node("a", cpu=4, memory_gi=16), node("b", cpu=4, memory_gi=16))
    big = workload("big", "s", cpu=4, memory_gi=4)
    strata_place.place(engine, "c", [big], {"big": ("b",)}, set(), MOST)
    nominated = {"p": ("b",)}
    assert strata_place.place(engine, "c", [workload("p", "s", cpu=1)], nominated, set(), MOST)
    assert (_where(engine)["p"], nominated) == (("a",), {})


def test_pinned_devices_are_the_fullest_that_fit() -> None:
    """A half-GPU replica pinned to a node goes on the device already half used."""
    engine = _engine(node("g", cpu=8, memory_gi=32, gpus=2, model="T4"))
    half = [workload(f"h{i}", "s", cpu=1, gpu_milli=500, gpu_model="T4") for i in range(2)]
    strata_place.place(engine, "c", half[:1], {"h0": ("g",)}, set(), MOST)
    strata_place.place(engine, "c", half[1:], {"h1": ("g",)}, set(), MOST)
    _, snap = engine.snapshot("c")
    devices = {rw.workload.id: rw.placements[0].gpu_devices for rw in snap.workloads}
    assert devices["h0"] == devices["h1"]


def test_a_departed_workload_loses_its_nomination() -> None:
    """A nomination of a workload no longer waiting is dropped."""
    engine = _engine(node("a", cpu=4, memory_gi=16))
    nominated = {"gone": ("new-0",)}
    strata_place.place(engine, "c", [], nominated, {"new-0"}, MOST)
    assert nominated == {}


def test_the_autoscaler_names_the_nodes_its_plan_orders() -> None:
    """Strata's actions say which new node each pending workload waits for, by the plan's ids."""
    big = node_group("big", 0.6, cpu=16, memory_gi=64)
    pods = [workload(f"p{i}", "s", cpu=6, memory_gi=6) for i in range(2)]
    view = View(0.0, state_of([], [scope("s")]), pods, [big], {}, {})
    act = StrataAutoscaler().decide(view)
    assert act.add == [("big", 1)]
    assert act.names == {"big": ["big-0"]}
    assert act.nominated == {"p0": ("big-0",), "p1": ("big-0",)}


def test_placements_are_committed_as_upserts() -> None:
    """Upserts are how placements are committed: the engine holds them as placed."""
    engine = _engine(node("a", cpu=4, memory_gi=16))
    strata_place.place(engine, "c", [workload("p", "s", cpu=1)], {}, set(), MOST)
    engine.update_snapshot("c", Delta(remove_workload_ids=("p",)))
    assert _where(engine) == {}


def test_nothing_lands_on_a_leaving_node() -> None:
    """A node whose removal is due takes no non-preemptible work; a nomination naming it
    lapses."""
    engine = _engine(node("a", cpu=4, memory_gi=16), node("b", cpu=4, memory_gi=16))
    half = workload("half", "s", cpu=2, memory_gi=2)
    strata_place.place(engine, "c", [half], {"half": ("a",)}, set(), MOST)
    nominated = {"p": ("a",)}
    p = workload("p", "s", cpu=1, memory_gi=1, preemptible=False)
    assert strata_place.place(engine, "c", [p], nominated, set(), MOST, {"a"}) == ["p"]
    assert (_where(engine)["p"], nominated) == (("b",), {})


@pytest.mark.parametrize(
    ("awaited", "removed"),
    [
        pytest.param(frozenset(), ["n0"], id="an empty node nobody awaits goes"),
        pytest.param(frozenset({"n0"}), [], id="an empty node nominated work awaits stays"),
    ],
)
def test_awaited_nodes_are_not_consolidated(awaited: frozenset[str], removed: list[str]) -> None:
    """A node nominated work waits for is empty at plan time; removing it would evict that
    work when it lands (a non-preemptible gang, evicted again and again with failures)."""
    small = node_group("small", 0.2, cpu=4, memory_gi=16)
    nodes = [group_node("n0", "small", cpu=4, memory_gi=16)]
    view = View(0.0, state_of(nodes, [scope("s")]), [], [small], {}, {}, {}, awaited)
    assert StrataAutoscaler().decide(view).remove == removed


def test_preemptible_work_may_use_a_leaving_node() -> None:
    """Preemptible work may take a leaving node's room until it goes (moved then, as any)."""
    engine = _engine(node("a", cpu=4, memory_gi=16), node("b", cpu=4, memory_gi=16))
    half = workload("half", "s", cpu=2, memory_gi=2)
    strata_place.place(engine, "c", [half], {"half": ("a",)}, set(), MOST)
    p = workload("p", "s", cpu=1, memory_gi=1)
    assert strata_place.place(engine, "c", [p], {}, set(), MOST, {"a"}) == ["p"]
    assert _where(engine)["p"] == ("a",)
