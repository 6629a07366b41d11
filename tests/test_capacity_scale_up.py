"""Scale-up (DESIGN §8): which groups and counts, which workload lands where, and why not."""

from __future__ import annotations

import pytest
from capacity_kit import plan, state_of

from strata_policy.capacity import PlanOptions, plan_capacity
from strata_policy.model import ReasonCode
from strata_policy.model.decisions import Policy
from strata_policy.placement.place import PlacementOptions
from strata_policy.testing import group_node, node_group, resources, running, scope, workload

SMALL = node_group("small", 0.2, cpu=4, memory_gi=16)
BIG = node_group("big", 0.6, cpu=16, memory_gi=64)
T4 = node_group("t4", 0.5, cpu=8, memory_gi=32, gpus=1, model="T4")
A100 = node_group("a100", 3.0, cpu=16, memory_gi=128, gpus=1, model="A100")
ZONE_B = node_group("zb", 0.3, cpu=4, memory_gi=16, labels={"zone": "b"})
ONE_SMALL = node_group("small", 0.2, cpu=4, memory_gi=16, max_count=1)


def _cpus(n: int, cpu: float = 1, **kw: object) -> list:  # type: ignore[type-arg]
    return [workload(f"w{i}", "t", cpu=cpu, **kw) for i in range(n)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("nodes", "groups", "pending", "want"),
    [
        pytest.param(
            [group_node("a", "small", cpu=4, memory_gi=16)], [SMALL, BIG], _cpus(3), {},
            id="fits the existing node: nothing added",
        ),
        pytest.param([], [SMALL, BIG], _cpus(1, cpu=2), {"small": 1},
                     id="one small workload: the cheapest group that fits"),
        pytest.param([], [SMALL, BIG], _cpus(16), {"big": 1},
                     id="16 CPUs: one big node (0.6) beats four small ones (0.8)"),
        pytest.param([], [SMALL, BIG], _cpus(5), {"small": 2},
                     id="5 CPUs: two small nodes (0.4) beat one big one (0.6)"),
        pytest.param([], [T4, A100], [workload("g", "t", cpu=2, gpu_milli=1000, gpu_model="A100")],
                     {"a100": 1}, id="gpu_model A100: the dearer A100 group, not T4"),
        pytest.param([], [SMALL, ZONE_B], [workload("z", "t", cpu=1, node_selector={"zone": "b"})],
                     {"zb": 1}, id="node_selector: only the group whose template matches"),
        pytest.param([], [SMALL], [workload("s", "t", cpu=1, replicas=3,
                                            spread_key="kubernetes.io/hostname")],
                     {"small": 3}, id="hostname-spread gang of 3: three new nodes"),
        pytest.param([], [SMALL, T4], [*_cpus(2), workload("g", "t", cpu=2, gpu_milli=500)],
                     {"t4": 1}, id="GPU share and CPU work share the one T4 node"),
    ],
)  # fmt: skip
def test_scale_up_counts(nodes: list, groups: list, pending: list, want: dict) -> None:  # type: ignore[type-arg]
    """Scale-up adds exactly these counts per group and places every pending workload."""
    got = plan(nodes, [scope("t")], groups, pending, consolidate=False)
    assert {s.node_group_id: s.count for s in got.scale_up} == want
    assert not got.unplaceable
    assert set(got.placements) == {w.id for w in pending}


def test_scale_up_names_landing_workloads() -> None:
    """Each scale-up entry lists the workloads that land on its new nodes, and their ids."""
    got = plan([], [scope("t")], [SMALL], _cpus(5), consolidate=False)
    (entry,) = got.scale_up
    assert entry.node_ids == ("small-0", "small-1")
    assert set(entry.workload_ids) == {f"w{i}" for i in range(5)}
    assert got.cost_per_hour == pytest.approx(0.4)


def test_limit_denies_planning() -> None:
    """A workload its scope's limit would deny is unplaceable with LIMIT_EXCEEDED, not planned."""
    scopes = [scope("t", limit=resources(cpu=4))]
    got = plan([], scopes, [SMALL], _cpus(2, cpu=3), consolidate=False)
    assert [u.workload_id for u in got.unplaceable] == ["w1"]
    assert got.unplaceable[0].reasons[0].code == ReasonCode.LIMIT_EXCEEDED
    assert got.unplaceable[0].reasons[0].scope_id == "t"
    assert set(got.placements) == {"w0"}


def test_no_group_can_hold_says_why() -> None:
    """A workload bigger than every template is unplaceable with Place's node-count reasons."""
    got = plan([], [scope("t")], [SMALL, BIG], [workload("huge", "t", cpu=32)], consolidate=False)
    (u,) = got.unplaceable
    assert u.reasons[0].code == ReasonCode.NODES_UNFIT
    assert "insufficient cpu" in u.reasons[0].message
    assert not got.scale_up


def test_max_count_caps_a_group() -> None:
    """A group at max_count takes no more nodes; the dearer alike group takes the rest."""
    dearer = node_group("small2", 0.25, cpu=4, memory_gi=16)
    got = plan([], [scope("t")], [ONE_SMALL, dearer, BIG], _cpus(2, cpu=3), consolidate=False)
    assert {s.node_group_id: s.count for s in got.scale_up} == {"small": 1, "small2": 1}


def test_admitted_but_unplaced_is_pending() -> None:
    """A running workload without placements (admitted only) is planned for like a new one."""
    admitted = running(workload("adm", "t", cpu=2))
    got = plan([], [scope("t")], [SMALL], running=[admitted], consolidate=False)
    assert got.placements == {"adm": ("small-0",)}


def test_new_node_ids_skip_existing() -> None:
    """A new node's id never repeats an existing node's id."""
    nodes = [group_node("small-0", "small", cpu=1, memory_gi=1)]
    got = plan(nodes, [scope("t")], [SMALL], _cpus(1, cpu=2), consolidate=False)
    assert got.scale_up[0].node_ids == ("small-1",)


def test_group_at_max_count_says_so() -> None:
    """A workload only a full group could hold is unplaceable, naming the group at max_count."""
    full = node_group("small", 0.2, cpu=4, memory_gi=16, max_count=1)
    got = plan([], [scope("t")], [full], _cpus(2, cpu=3), consolidate=False)
    (u,) = got.unplaceable
    assert u.workload_id == "w1"
    assert u.reasons[0].message == "fits new nodes of small, at max_count"


@pytest.mark.parametrize(
    ("pending", "by_mix", "want"),
    [
        pytest.param(_cpus(5), False, {"small": 2},
                     id="one-shot: 5 CPUs on two small nodes, cheapest now (0.4)"),
        pytest.param(_cpus(5), True, {"big": 1},
                     id="by mix: one big node (0.6), the cheaper shape per CPU once it fills"),
        pytest.param(_cpus(16), True, {"big": 1}, id="by mix, 16 CPUs: one big node"),
        pytest.param(_cpus(1, cpu=6), True, {"big": 1},
                     id="by mix, a replica only the big shape holds: the big group"),
    ],
)  # fmt: skip
def test_fill_by_mix(pending: list, by_mix: bool, want: dict) -> None:  # type: ignore[type-arg]
    """``fill_by_mix`` picks the group whose shape holds the pending mix at least price per
    value; the count still follows the replicas pending."""
    options = PlanOptions(
        placement=PlacementOptions(policy=Policy.MOST_ALLOCATED), fill_by_mix=by_mix
    )
    got = plan_capacity(state_of([], [scope("t")]), [SMALL, BIG], pending, options)
    assert {s.node_group_id: s.count for s in got.scale_up} == want


def test_zone_spread_gang_opens_one_node_per_zone() -> None:
    """A gang of 3 spread by zone: one new node in each of three zones, never two in one."""
    zone = "topology.kubernetes.io/zone"
    groups = [node_group(f"m-{z}", 0.2, cpu=4, memory_gi=16, labels={zone: z}) for z in "abcd"]
    pg = workload("pg", "t", cpu=1, memory_gi=1, replicas=3, spread_key=zone)
    got = plan([], [scope("t")], groups, [pg, workload("pg2", "t", cpu=1, memory_gi=1,
                                                       replicas=3, spread_key=zone)])  # fmt: skip
    counts = {s.node_group_id: s.count for s in got.scale_up}
    assert sorted(counts.values()) == [1, 1, 1]
    assert set(got.placements) == {"pg", "pg2"}
