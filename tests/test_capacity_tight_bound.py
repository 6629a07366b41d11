"""The tight LP bound: usable sets, gangs and big replicas, and never above a feasible plan."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from capacity_kit import plan
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.capacity import NodeGroup, bound
from strata_policy.capacity.catalog import could_hold
from strata_policy.model import HOSTNAME_KEY, Workload
from strata_policy.model.decisions import Policy
from strata_policy.model.resources import CPU, GPU
from strata_policy.testing import node_group, scope, workload

ZONE = "topology.kubernetes.io/zone"


def columns(groups: Sequence[NodeGroup], hi: float = 100.0) -> list[bound.GroupColumn]:
    """One column per group, its template's shape and labels, 0 to ``hi`` nodes."""
    out = []
    for g in groups:
        t = g.new_node(0)
        out.append(bound.GroupColumn(g.price_per_hour, t.capacity, t.gpu_model, 0.0, hi, g.id,
                                     t.labels))  # fmt: skip
    return out


def tight(groups: Sequence[NodeGroup], demand: Sequence[Workload]) -> float:
    """The tight bound of ``demand`` over ``groups``."""
    lp = bound.lower_bound(columns(groups), demand)
    assert lp.feasible
    return lp.value


@pytest.mark.parametrize(
    ("groups", "demand", "old", "new"),
    [
        pytest.param([node_group("s", 1.0, cpu=4, memory_gi=16)],
                     [workload(f"w{i}", "t", cpu=1) for i in range(6)], 1.5, 1.5,
                     id="small replicas: the fractional bound is unchanged"),
        pytest.param([node_group("s", 1.0, cpu=4, memory_gi=16)],
                     [workload(f"w{i}", "t", cpu=3) for i in range(3)], 2.25, 3.0,
                     id="replicas over half a node: one node each"),
        pytest.param([node_group("s", 1.0, cpu=9, memory_gi=16)],
                     [workload(f"w{i}", "t", cpu=4) for i in range(4)], 16 / 9, 2.0,
                     id="replicas over a third: two per node"),
        pytest.param([node_group("s", 1.0, cpu=16, memory_gi=64)],
                     [workload("pg", "t", cpu=1, replicas=3, spread_key=HOSTNAME_KEY)],
                     3 / 16, 3.0, id="a spread gang of 3 needs 3 nodes"),
        pytest.param([node_group("a", 1.0, cpu=16, memory_gi=64, labels={ZONE: "a"}),
                      node_group("b", 1.0, cpu=16, memory_gi=64, labels={ZONE: "b"})],
                     [workload("pg", "t", cpu=1, replicas=2, spread_key=ZONE)],
                     2 / 16, 2.0, id="a zone-spread gang of 2 needs 2 nodes"),
        pytest.param([node_group("big", 8.0, cpu=64, memory_gi=256, gpus=8, model="T4"),
                      node_group("one", 0.5, cpu=8, memory_gi=32, gpus=1, model="T4")],
                     [workload("train", "t", gpu_milli=8000, gpu_model="T4"),
                      workload("tiny", "t", gpu_milli=1000)], 4.5, 8.5,
                     id="an 8-GPU job can only use 8-GPU nodes"),
        pytest.param([node_group("east", 1.0, cpu=4, memory_gi=16, labels={ZONE: "a"}),
                      node_group("west", 3.0, cpu=4, memory_gi=16, labels={ZONE: "b"})],
                     [workload("w", "t", cpu=4, node_selector={ZONE: "b"})], 1.0, 3.0,
                     id="a selector restricts the demand to its groups"),
    ],
)  # fmt: skip
def test_tight_bound(groups: list, demand: list, old: float, new: float) -> None:  # type: ignore[type-arg]
    """The old bound (per resource and model rows) and the tight one on named cases."""
    per_resource, per_models = bound.demand(demand)
    assert bound.solve(columns(groups), per_resource, per_models).value == pytest.approx(old)
    assert tight(groups, demand) == pytest.approx(new)


def test_unholdable_workload_left_out() -> None:
    """A workload no group can hold is no plan's demand: the bound covers the rest."""
    groups = [node_group("s", 1.0, cpu=4, memory_gi=16)]
    assert tight(groups, [workload("huge", "t", cpu=64), workload("w", "t", cpu=4)]) == 1.0


def test_fixed_nodes_are_free_capacity() -> None:
    """A free node outside the catalog holds what fits it at no cost."""
    from strata_policy.testing import node  # noqa: PLC0415

    groups = [node_group("s", 1.0, cpu=4, memory_gi=16)]
    lp = bound.lower_bound(columns(groups), [workload("w", "t", cpu=4)], [node("f", 4, 16)])
    assert lp.value == pytest.approx(0.0)


# Tiny random cases: the bound is below the brute-force optimum and every policy's plan.


@st.composite
def tiny(draw: st.DrawFn) -> tuple[list[NodeGroup], list[Workload]]:
    """2 groups (CPU, maybe one GPU, maybe a zone) and 1 to 4 small workloads."""
    groups = []
    for i in range(2):
        gpus = draw(st.integers(0, 2))
        groups.append(node_group(
            f"g{i}", draw(st.sampled_from([0.5, 1.0, 1.5, 2.5])),
            cpu=draw(st.sampled_from([2, 4, 6])),
            memory_gi=16, gpus=gpus, model="T4" if gpus else "", max_count=4,
            labels={ZONE: "ab"[i]},
        ))  # fmt: skip
    demand = []
    for j in range(draw(st.integers(1, 4))):
        spread = draw(st.sampled_from(["", HOSTNAME_KEY, ZONE]))
        demand.append(workload(
            f"w{j}", "t", cpu=draw(st.integers(1, 4)),
            gpu_milli=draw(st.sampled_from([0, 0, 1000])),
            replicas=draw(st.integers(1, 2)), spread_key=spread,
            node_selector=draw(st.sampled_from([{}, {}, {ZONE: "a"}])),
        ))  # fmt: skip
    return groups, demand


def optimum(groups: Sequence[NodeGroup], demand: Sequence[Workload]) -> float | None:
    """The cheapest counts (0..3 per group) some assignment of every replica fits, by brute
    force (whole GPUs only, spread as distinct nodes or label values); None if none does."""
    best: float | None = None
    for counts in itertools.product(range(4), repeat=len(groups)):
        cost = sum(c * g.price_per_hour for c, g in zip(counts, groups, strict=True))
        if best is not None and cost >= best:
            continue
        nodes = [g.new_node(k) for c, g in zip(counts, groups, strict=True) for k in range(c)]
        if _fits(nodes, [(w, r) for w in demand for r in range(w.replicas)], {}, {}):
            best = cost
    return best


def _fits(nodes: list, items: list, used: dict, spread: dict) -> bool:  # type: ignore[type-arg]
    if not items:
        return True
    (w, _), rest = items[0], items[1:]
    for n, nd in enumerate(nodes):
        if not could_hold(nd, w):
            continue
        value = nd.label(w.spread_key) if w.spread_key else None
        if value is not None and value in spread.get(w.id, set()):
            continue
        have = used.get(n, {})
        if any(have.get(r, 0) + a > nd.capacity.get(r, 0) for r, a in w.request.items()):
            continue
        used[n] = {r: have.get(r, 0) + w.request.get(r, 0) for r in (CPU, GPU)}
        if value is not None:
            spread.setdefault(w.id, set()).add(value)
        if _fits(nodes, rest, used, spread):
            return True
        used[n] = have
        if value is not None:
            spread[w.id].discard(value)
    return False


@settings(max_examples=60, deadline=None)
@given(tiny())
def test_bound_below_brute_force_optimum(case: tuple) -> None:  # type: ignore[type-arg]
    """On tiny cases the tight bound never exceeds the exact optimum (brute force)."""
    groups, demand = case
    best = optimum(groups, demand)
    holdable = [w for w in demand if any(could_hold(g.template, w) for g in groups)]
    if best is None or len(holdable) < len(demand):
        return
    assert tight(groups, demand) <= best + 1e-6


@settings(max_examples=20, deadline=None)
@given(tiny(), st.sampled_from(list(Policy)[1:]))
def test_bound_below_every_policys_plan(case: tuple, policy: Policy) -> None:  # type: ignore[type-arg]
    """The catalog bound of what a plan holds never exceeds that plan's cost, whatever the
    placement policy that built it."""
    groups, demand = case
    got = plan([], [scope("t")], groups, demand, policy=policy, consolidate=False)
    held = [w for w in demand if w.id in got.placements]
    assert tight(groups, held) <= got.cost_per_hour + 1e-6
    assert got.lower_bound_per_hour <= got.cost_per_hour + 1e-6
