"""The batch lane's shortcuts equal the general code: values built through their slots, and a
batch validated as a whole."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.errors import InvalidArgument
from strata_policy.model import (
    Decision,
    Placement,
    RunningWorkload,
    Snapshot,
    Workload,
    WorkloadResult,
)
from strata_policy.model.resources import MAX_AMOUNT
from strata_policy.model.slots import setters
from strata_policy.placement import outputs
from strata_policy.placement.outputs import PlacedColumns
from strata_policy.quota.batch import group
from strata_policy.state import request_checks
from strata_policy.state.cluster import ClusterState
from strata_policy.testing import node, scope

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

W = Workload("w1", "org", {"cpu": 1000})
ON_N1 = (Placement("n1", (0,)),)


@pytest.mark.parametrize(
    ("built", "constructed"),
    [
        pytest.param(outputs.placement("n1", (2, 3)), Placement("n1", (2, 3)), id="placement"),
        pytest.param(outputs.running(W, ON_N1, 7), RunningWorkload(W, ON_N1, 7), id="running"),
        pytest.param(
            outputs.placed_result("w1", ON_N1, {"gpu": 1000}, 0.5),
            WorkloadResult("w1", Decision.PLACED, ON_N1, borrowed={"gpu": 1000}, score=0.5),
            id="placed result",
        ),
    ],
)
def test_values_built_through_slots_equal_the_constructors(
    built: object, constructed: object
) -> None:
    """A value built through its slots is equal to the constructor's, and reads the same."""
    assert built == constructed
    assert repr(built) == repr(constructed)


def test_setters_refuse_a_field_list_that_drifted() -> None:
    """A builder naming other fields than the class has fails at import, not silently."""
    with pytest.raises(TypeError, match="fields"):
        setters(Placement, ("node_id",))


SCOPES = (scope("org"), scope("team", "org"))
NODES = (node("n1", cpu=8, gpus=2),)

ids = st.sampled_from(["a", "b", "held", "", "x" * (request_checks.MAX_ID_LENGTH + 1)])
amounts = st.sampled_from([0, 1, 500, 1000, 1500, 3000, -1, MAX_AMOUNT, MAX_AMOUNT + 1])
batches = st.lists(
    st.builds(
        Workload,
        id=ids,
        scope_id=st.sampled_from(["org", "team", "", "nope"]),
        request=st.dictionaries(st.sampled_from(["cpu", "gpu", "", "rdma"]), amounts, max_size=3),
        replicas=st.sampled_from([1, 1, 2, 0, request_checks.MAX_REPLICAS + 1]),
    ),
    min_size=2,
    max_size=4,
)


def _state() -> ClusterState:
    held = (RunningWorkload(Workload("held", "org", {"cpu": 1})),)
    return ClusterState.build("c", Snapshot(NODES, SCOPES, held), 1)


@settings(max_examples=300)
@given(workloads=batches)
def test_a_batch_checked_whole_is_one_the_walk_accepts(workloads: list[Workload]) -> None:
    """The whole-batch check passes a batch only when the field-by-field walk finds nothing,
    and a batch the walk accepts passes it when no gang could overflow."""
    state = _state()
    out: list = []
    seen: set[str] = set()
    for i, w in enumerate(workloads):
        request_checks.workload(w, f"workloads[{i}]", state.tree.scopes, out)
        if w.id in seen or w.id in state.workloads:
            out.append(w.id)
        seen.add(w.id)
    plain = request_checks.workloads_plainly_valid(workloads, state.tree.scopes, state.workloads)
    if plain:
        assert out == []
    elif not out:
        assert any(w.replicas > 1 for w in workloads)  # only the overflow guard is coarse
    if out:
        with pytest.raises(InvalidArgument):
            request_checks.check_new_workloads(state, workloads, "workloads")
    else:
        request_checks.check_new_workloads(state, workloads, "workloads")


def test_whole_batch_check_refuses_nan_amounts_it_cannot_order() -> None:
    """A NaN among the amounts sends the batch to the walk (which decides it)."""
    state = _state()
    batch = [
        Workload("a", "org", {"cpu": float("nan")}),  # type: ignore[dict-item]
        Workload("b", "org", {"cpu": -1}),
    ]
    assert not request_checks.workloads_plainly_valid(batch, state.tree.scopes, state.workloads)
    with pytest.raises(InvalidArgument):
        request_checks.check_new_workloads(state, batch, "workloads")


@pytest.mark.parametrize(
    ("batch", "plain"),
    [
        pytest.param(
            [Workload("a", "org", {"cpu": 1000, "gpu": 500}), Workload("b", "team", {"gpu": 2000})],
            True,
            id="whole batch: valid, passes without the walk",
        ),
        pytest.param(
            [Workload("a", "org", {"gpu": 1500}), Workload("b", "org")],
            False,
            id="whole batch: a GPU request neither share nor whole devices",
        ),
        pytest.param(
            [Workload("a", "org"), Workload("held", "org")],
            False,
            id="whole batch: an id the cluster holds",
        ),
        pytest.param(
            [Workload("a", "org", {"cpu": 2**61}, replicas=4), Workload("b", "org")],
            False,
            id="whole batch: a gang whose total could overflow",
        ),
    ],
)
def test_whole_batch_check_cases(batch: list[Workload], plain: bool) -> None:
    """Named batches the whole-batch check passes or sends to the walk."""
    assert (
        request_checks.workloads_plainly_valid(batch, _state().tree.scopes, _state().workloads)
        is plain
    )


alike = st.builds(
    Workload,
    id=st.just("w"),
    scope_id=st.sampled_from(["org", "team"]),
    request=st.sampled_from(
        [{"cpu": 1}, {"cpu": 1, "gpu": 500}, {"gpu": 500, "cpu": 1}, {"cpu": True}, {}]
    ),
    replicas=st.integers(1, 2),
    node_selector=st.sampled_from([{}, {"zone": "a"}, {"cpu": "1"}]),
    gpu_model=st.sampled_from(["", "A100"]),
    spread_key=st.sampled_from(["", "zone"]),
)


@settings(max_examples=200)
@given(workloads=st.lists(alike, max_size=12))
def test_groups_hold_workloads_alike_in_all_the_lane_reads(workloads: list[Workload]) -> None:
    """Workloads of one group agree on scope, request, replicas, selector, model and spread;
    groups are numbered by first appearance and their sizes add up."""
    found = group(workloads)
    assert len(found.group) == len(workloads)
    assert sum(found.sizes) == len(workloads)
    seen: list[int] = []
    for w, g in zip(workloads, found.group, strict=True):
        first = found.firsts[g]
        assert (w.scope_id, w.request, w.replicas, w.node_selector, w.gpu_model, w.spread_key) == (
            first.scope_id,
            first.request,
            first.replicas,
            first.node_selector,
            first.gpu_model,
            first.spread_key,
        )
        if g not in seen:
            assert g == len(seen)
            assert w is first
            seen.append(g)
    assert found.sizes == [found.group.count(g) for g in range(len(found.firsts))]


def test_values_built_by_column_equal_those_built_one_by_one() -> None:
    """running_many and PlacedColumns.results build what running and placed_result build."""
    workloads = [W, Workload("w2", "org", {"gpu": 500})]
    placements = [ON_N1, (Placement("n2", (1,)), Placement("n3", ()))]
    assert outputs.running_many(workloads, placements, 9) == [
        RunningWorkload(w, p, 9) for w, p in zip(workloads, placements, strict=True)
    ]
    assert PlacedColumns(["w1", "w2"], placements, [{}, {"gpu": 500}], [0.25, 1.0]).results() == [
        WorkloadResult("w1", Decision.PLACED, ON_N1, score=0.25),
        WorkloadResult("w2", Decision.PLACED, placements[1], borrowed={"gpu": 500}, score=1.0),
    ]
