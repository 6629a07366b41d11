"""A cluster's capacity per resource stays within int64: a larger total is refused, not wrapped."""

from __future__ import annotations

import pytest

from strata_policy.engine import Engine
from strata_policy.errors import InvalidArgument
from strata_policy.model import Node
from strata_policy.model.resources import MAX_AMOUNT
from strata_policy.state.changes import Delta
from strata_policy.testing import node, scope, snapshot, workload

BIG = {"rdma": MAX_AMOUNT}  # each node's amount is allowed on its own


def _nodes(count: int, prefix: str = "n") -> list[Node]:
    return [node(f"{prefix}{i}", extra=BIG) for i in range(count)]


@pytest.mark.parametrize(
    ("count", "refused"),
    [
        pytest.param(1, False, id="one node at the maximum: fine"),
        pytest.param(2, True, id="two: the total is above the maximum"),
        pytest.param(4, True, id="four: the total would wrap int64 to 0"),
    ],
)
def test_push_refuses_a_total_above_the_maximum(count: int, refused: bool) -> None:
    """PushSnapshot refuses nodes whose summed capacity of a resource exceeds MAX_AMOUNT."""
    engine = Engine()
    snap = snapshot(_nodes(count), [scope("s")])
    if not refused:
        engine.push_snapshot("c", snap)
        assert engine.get_cluster("c").capacity["rdma"] == MAX_AMOUNT
        return
    with pytest.raises(InvalidArgument) as err:
        engine.push_snapshot("c", snap)
    assert err.value.violations[0].field == "snapshot.nodes"
    assert "total rdma" in err.value.violations[0].description
    assert engine.cluster_ids() == []


def test_update_refuses_a_total_above_the_maximum_and_changes_nothing() -> None:
    """A node upsert that would push a total past the maximum is refused; the state stays."""
    engine = Engine()
    engine.push_snapshot("c", snapshot(_nodes(1), [scope("s")]))
    before = engine.snapshot("c")
    with pytest.raises(InvalidArgument) as err:
        engine.update_snapshot("c", Delta(upsert_nodes=tuple(_nodes(1, "m"))))
    assert "total rdma" in err.value.violations[0].description
    assert engine.snapshot("c") == before
    result = engine.admit("c", [workload("w", "s", cpu=1)], dry_run=True)
    assert result.results[0].decision.name == "ADMITTED"
