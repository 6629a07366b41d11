"""QuotaTree: paths, children, usage roll-up, charge/refund, effective guarantee G, borrowed,
at-limit, oversubscribed, statuses."""

from __future__ import annotations

import pytest

from strata_policy.errors import InvalidArgument
from strata_policy.model import Scope
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
            [("other", 1000)], "other", {"gpu": 1000}, id="leaf without guarantee: all borrowed"
        ),
        pytest.param(
            [("proj-x", 3000)], "proj-x", {"gpu": 3000}, id="leaf under guaranteed parent: G is 0"
        ),
        pytest.param(
            [("proj-x", 3000)], "team-a", {}, id="parent: usage within its G is not borrowed"
        ),
    ],
)
def test_borrowed(charges: list[tuple[str, int]], scope_id: str, expected: dict[str, int]) -> None:
    """Borrowed is usage above the effective guarantee G per resource."""
    tree = build()
    for sid, gpu in charges:
        tree.charge(sid, resources(gpu_milli=gpu))
    assert tree.borrowed(scope_id) == expected


GPU = resources(gpu_milli=1000)


@pytest.mark.parametrize(
    ("scopes", "scope_id", "effective", "oversubscribed"),
    [
        pytest.param([scope("a")], "a", {}, (), id="leaf without guarantee: 0"),
        pytest.param(
            [scope("a", guarantee=GPU)], "a", GPU, (), id="leaf with a guarantee: the value"
        ),
        pytest.param(
            [
                scope("root"),
                scope("team-a", parent="root", guarantee=resources(cpu=512, gpu_milli=64000)),
                scope("team-b", parent="root"),
            ],
            "root",
            resources(cpu=512, gpu_milli=64000),
            (),
            id="openb: ungoverned root protects what its team is guaranteed",
        ),
        pytest.param(
            [
                scope("org"),
                scope("mid", parent="org"),
                scope("a", parent="mid", guarantee=resources(gpu_milli=2000)),
                scope("b", parent="mid", guarantee=resources(gpu_milli=3000, cpu=1)),
            ],
            "org",
            resources(cpu=1, gpu_milli=5000),
            (),
            id="sums carry up through ungoverned levels",
        ),
        pytest.param(
            [
                scope("org", guarantee=resources(cpu=4)),
                scope("a", parent="org", guarantee=resources(cpu=1, gpu_milli=2000)),
            ],
            "org",
            resources(cpu=4, gpu_milli=2000),
            (),
            id="per resource: set where set, children's sum where absent",
        ),
        pytest.param(
            [
                scope("org", guarantee=resources(gpu_milli=3000)),
                scope("a", parent="org", guarantee=resources(gpu_milli=2000)),
                scope("b", parent="org", guarantee=resources(gpu_milli=2000)),
            ],
            "org",
            resources(gpu_milli=3000),
            ("gpu",),
            id="explicit value below the children's sum wins and is oversubscribed",
        ),
        pytest.param(
            [
                scope("org", guarantee={"gpu": 0}),
                scope("a", parent="org", guarantee=resources(gpu_milli=2000)),
            ],
            "org",
            {},
            ("gpu",),
            id="explicit zero is a value, not absent",
        ),
        pytest.param(
            [
                scope("org", guarantee=resources(gpu_milli=9000)),
                scope("a", parent="org", guarantee=resources(gpu_milli=2000)),
            ],
            "org",
            resources(gpu_milli=9000),
            (),
            id="explicit value above the children's sum: not oversubscribed",
        ),
    ],
)
def test_effective_guarantee(
    scopes: list[Scope], scope_id: str, effective: dict[str, int], oversubscribed: tuple[str, ...]
) -> None:
    """G is the set guarantee, else the children's summed G, else 0; oversubscribed flagged."""
    tree = QuotaTree.build(scopes)
    assert dict(tree.effective_guarantee(scope_id)) == effective
    assert tree.oversubscribed(scope_id) == oversubscribed
    status = tree.status(scope_id, 0)
    assert (status.effective_guarantee, status.oversubscribed) == (effective, oversubscribed)


def test_recompute_guarantees_follows_changed_scopes() -> None:
    """G is cached per tree; recompute_guarantees picks up scopes changed in place."""
    tree = QuotaTree.build([scope("org"), scope("a", parent="org", guarantee=GPU)])
    assert dict(tree.effective_guarantee("org")) == GPU
    changed = dict(tree.scopes)
    changed["a"] = scope("a", parent="org", guarantee=resources(gpu_milli=5000))
    tree.scopes = changed
    tree.recompute_guarantees()
    assert dict(tree.effective_guarantee("org")) == resources(gpu_milli=5000)


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
    assert statuses[0].effective_guarantee == resources(gpu_milli=8000)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda t: t.path("nope"), id="path"),
        pytest.param(lambda t: t.usage("nope"), id="usage"),
        pytest.param(lambda t: t.charge("nope", {"cpu": 1}), id="charge"),
        pytest.param(lambda t: t.borrowed("nope"), id="borrowed"),
        pytest.param(lambda t: t.children("nope"), id="children"),
        pytest.param(lambda t: t.status("nope", 0), id="status"),
        pytest.param(lambda t: t.effective_guarantee("nope"), id="effective_guarantee"),
        pytest.param(lambda t: t.oversubscribed("nope"), id="oversubscribed"),
    ],
)
def test_unknown_scope_is_invalid_argument(call: object) -> None:
    """An unknown scope id raises InvalidArgument, never KeyError."""
    with pytest.raises(InvalidArgument, match="unknown scope"):
        call(build())  # type: ignore[operator]  # the table holds plain lambdas
