"""QuotaTree: paths, children, usage roll-up, charge/refund, borrowed, at-limit, statuses."""

from __future__ import annotations

import pytest

from strata_policy.errors import InvalidArgument
from strata_policy.quota import QuotaTree
from strata_policy.testing import resources, scope

SCOPES = [
    scope("team-b", parent="org", guarantee=resources(gpu_milli=4000)),
    scope("org", guarantee=resources(gpu_milli=8000), limit=resources(gpu_milli=16000)),
    scope("team-a", parent="org", guarantee=resources(gpu_milli=4000)),
    scope("proj-x", parent="team-a", limit=resources(cpu=8)),
    scope("other"),
]


def build() -> QuotaTree:
    """The shared fixture tree (scopes deliberately out of order)."""
    return QuotaTree.build(SCOPES)


@pytest.mark.parametrize(
    ("scope_id", "expected"),
    [
        pytest.param("org", ("org",), id="top-level: itself only"),
        pytest.param("team-a", ("team-a", "org"), id="child: self then parent"),
        pytest.param("proj-x", ("proj-x", "team-a", "org"), id="grandchild: up to the top"),
    ],
)
def test_path(scope_id: str, expected: tuple[str, ...]) -> None:
    """A path lists the scope first and the top-level scope last."""
    assert build().path(scope_id) == expected


@pytest.mark.parametrize(
    ("scope_id", "expected"),
    [
        pytest.param(None, ("org", "other"), id="top level sorted by id"),
        pytest.param("org", ("team-a", "team-b"), id="children sorted by id"),
        pytest.param("proj-x", (), id="leaf has none"),
    ],
)
def test_children(scope_id: str | None, expected: tuple[str, ...]) -> None:
    """Children come sorted by id; None means the top-level scopes."""
    assert build().children(scope_id) == expected


def test_charge_rolls_usage_up_the_tree() -> None:
    """A charge at a grandchild raises usage at each ancestor and the root, not at siblings."""
    tree = build()
    tree.charge("proj-x", resources(cpu=2, gpu_milli=1000))
    assert dict(tree.usage("proj-x")) == resources(cpu=2, gpu_milli=1000)
    assert dict(tree.usage("team-a")) == resources(cpu=2, gpu_milli=1000)
    assert dict(tree.usage("org")) == resources(cpu=2, gpu_milli=1000)
    assert dict(tree.total_usage()) == resources(cpu=2, gpu_milli=1000)
    assert dict(tree.usage("team-b")) == {}
    assert dict(tree.own_usage("team-a")) == {}
    assert dict(tree.own_usage("proj-x")) == resources(cpu=2, gpu_milli=1000)


def test_refund_undoes_charge_exactly() -> None:
    """Release undoing admit: refund restores every usage dict to equality (no zero entries)."""
    tree = build()
    tree.charge("team-b", resources(cpu=1))
    before = {sid: dict(tree.usage(sid)) for sid in tree.scopes}
    tree.charge("proj-x", resources(cpu=2, gpu_milli=500))
    tree.refund("proj-x", resources(cpu=2, gpu_milli=500))
    assert {sid: dict(tree.usage(sid)) for sid in tree.scopes} == before
    assert dict(tree.total_usage()) == resources(cpu=1)


def test_refund_beyond_usage_changes_nothing() -> None:
    """Refunding more than was charged is a caller bug: it raises and leaves usage intact."""
    tree = build()
    tree.charge("team-a", resources(gpu_milli=1000))
    with pytest.raises(ValueError, match="exceeds"):
        tree.refund("team-a", resources(gpu_milli=2000))
    assert dict(tree.usage("org")) == resources(gpu_milli=1000)


def test_copy_is_independent() -> None:
    """A copy has the same usage and charging it leaves the original unchanged."""
    tree = build()
    tree.charge("team-a", resources(gpu_milli=1000))
    twin = tree.copy()
    twin.charge("team-a", resources(gpu_milli=1000))
    assert dict(tree.usage("org")) == resources(gpu_milli=1000)
    assert dict(twin.usage("org")) == resources(gpu_milli=2000)


@pytest.mark.parametrize(
    ("charges", "scope_id", "expected"),
    [
        pytest.param([], "org", {}, id="idle: nothing borrowed"),
        pytest.param([("team-a", 6000)], "team-a", {"gpu": 2000}, id="above guarantee: the excess"),
        pytest.param([("team-a", 6000)], "org", {}, id="parent within its own guarantee"),
        pytest.param(
            [("other", 1000)], "other", {"gpu": 1000}, id="no guarantee: all usage borrowed"
        ),
    ],
)
def test_borrowed(charges: list[tuple[str, int]], scope_id: str, expected: dict[str, int]) -> None:
    """Borrowed is usage above guarantee per resource, an absent guarantee counting as 0."""
    tree = build()
    for sid, gpu in charges:
        tree.charge(sid, resources(gpu_milli=gpu))
    assert tree.borrowed(scope_id) == expected


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        pytest.param(15000, (), id="below limit"),
        pytest.param(16000, ("gpu",), id="exactly at limit"),
    ],
)
def test_at_limit(gpu: int, expected: tuple[str, ...]) -> None:
    """A resource is at its limit once usage reaches it."""
    tree = build()
    tree.charge("team-b", resources(gpu_milli=gpu))
    assert tree.at_limit("org") == expected


def test_statuses_depth_first() -> None:
    """Statuses list parents before children and siblings by id, with usage and counts."""
    tree = build()
    tree.charge("proj-x", resources(cpu=8))
    statuses = tree.statuses({"proj-x": 3})
    assert [s.id for s in statuses] == ["org", "team-a", "proj-x", "team-b", "other"]
    proj = statuses[2]
    assert proj.usage == resources(cpu=8)
    assert proj.at_limit == ("cpu",)
    assert proj.workload_count == 3
    assert proj.parent_id == "team-a"
    assert statuses[0].borrowed == resources(cpu=8)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda t: t.path("nope"), id="path"),
        pytest.param(lambda t: t.usage("nope"), id="usage"),
        pytest.param(lambda t: t.charge("nope", {"cpu": 1}), id="charge"),
        pytest.param(lambda t: t.borrowed("nope"), id="borrowed"),
        pytest.param(lambda t: t.children("nope"), id="children"),
        pytest.param(lambda t: t.status("nope", 0), id="status"),
    ],
)
def test_unknown_scope_is_invalid_argument(call: object) -> None:
    """An unknown scope id raises InvalidArgument, never KeyError."""
    with pytest.raises(InvalidArgument, match="unknown scope"):
        call(build())  # type: ignore[operator]  # the table holds plain lambdas
