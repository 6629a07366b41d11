"""The catalog's bad input: one INVALID_ARGUMENT naming every bad field, or a size limit."""

from __future__ import annotations

import pytest
from capacity_kit import state_of

from strata_policy.capacity import MAX_NODE_GROUPS, NodeGroup, plan_capacity
from strata_policy.errors import InvalidArgument, SizeLimitExceeded
from strata_policy.testing import group_node, node, node_group, scope

OK = node_group("ok", 1.0, cpu=4, memory_gi=16)


@pytest.mark.parametrize(
    ("group", "field"),
    [
        pytest.param(node_group("g", -1.0), "node_groups[1].price_per_hour", id="negative price"),
        pytest.param(node_group("g", float("nan")), "node_groups[1].price_per_hour",
                     id="NaN price"),
        pytest.param(node_group("g", 1.0, min_count=3, max_count=2), "node_groups[1].min_count",
                     id="min above max"),
        pytest.param(NodeGroup("g", node("g-", extra={"rdma": 1}), 1.0, 0, 1),
                     'node_groups[1].template.capacity["rdma"]', id="unknown resource"),
        pytest.param(NodeGroup("g", node("g-", cpu=0, memory_gi=0), 1.0, 0, 1),
                     "node_groups[1].template.capacity", id="empty template"),
        pytest.param(NodeGroup("g", node("g-", unschedulable=True), 1.0, 0, 1),
                     "node_groups[1].template.unschedulable", id="unschedulable template"),
        pytest.param(NodeGroup("g", node("g-", gpus=1), 1.0, 0, 1),
                     "node_groups[1].template.gpu_model", id="GPUs of no model"),
        pytest.param(node_group("ok", 1.0), "node_groups[1].id", id="duplicate id"),
        pytest.param(node_group("g", 1.0, current_count=2), "node_groups[1].current_count",
                     id="current_count disagrees with the snapshot"),
        pytest.param(NodeGroup("", node("g-"), 1.0, 0, 1), "node_groups[1].id", id="empty id"),
    ],
)  # fmt: skip
def test_bad_catalog(group: NodeGroup, field: str) -> None:
    """A bad group is INVALID_ARGUMENT naming its field."""
    state = state_of([group_node("n1", "g")], [scope("t")])
    with pytest.raises(InvalidArgument) as err:
        plan_capacity(state, [OK, group])
    assert field in {v.field for v in err.value.violations}


def test_current_count_that_agrees_is_fine() -> None:
    """A client-sent current_count equal to the snapshot's is accepted."""
    state = state_of([group_node("n1", "g")], [scope("t")])
    plan_capacity(state, [node_group("g", 1.0, current_count=1)])


def test_too_many_groups() -> None:
    """More than MAX_NODE_GROUPS groups is a size limit (RESOURCE_EXHAUSTED)."""
    state = state_of([], [scope("t")])
    groups = [node_group(f"g{i}", 1.0) for i in range(MAX_NODE_GROUPS + 1)]
    with pytest.raises(SizeLimitExceeded) as err:
        plan_capacity(state, groups)
    assert err.value.limit == "max_node_groups"
