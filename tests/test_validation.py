"""Scope-tree validation: cycles and depth, reported once each, in time linear in the tree."""

from __future__ import annotations

import pytest

from strata_policy.errors import InvalidArgument
from strata_policy.model import Scope, Snapshot
from strata_policy.state import request_checks, validate
from strata_policy.state.validate import MAX_SCOPE_DEPTH
from strata_policy.testing import node


def chain(length: int, prefix: str = "s") -> list[Scope]:
    """A chain of scopes, each the parent of the next."""
    return [Scope(f"{prefix}{i}", f"{prefix}{i - 1}" if i else "") for i in range(length)]


def violations(scopes: list[Scope]) -> list[tuple[str, str]]:
    """The tree's violations as (path, description)."""
    return [(v.field, v.description) for v in validate.snapshot_shape(Snapshot((), tuple(scopes)))]


@pytest.mark.parametrize(
    ("scopes", "expected"),
    [
        pytest.param(chain(MAX_SCOPE_DEPTH), [], id="as deep as allowed"),
        pytest.param(
            chain(MAX_SCOPE_DEPTH + 1),
            [(f"snapshot.scopes[{MAX_SCOPE_DEPTH}].parent_id", "too deep")],
            id="one level too deep",
        ),
        pytest.param(
            [Scope("a", "b"), Scope("b", "c"), Scope("c", "a"), Scope("d", "a")],
            [("snapshot.scopes[0].parent_id", "cycle in the scope tree: a -> b -> c -> a")],
            id="a three-cycle with a branch hanging off it, reported once",
        ),
        pytest.param(
            [Scope("a", "a")],
            [("snapshot.scopes[0].parent_id", "a scope cannot be its own parent")],
            id="own parent",
        ),
        pytest.param(
            [*chain(3), Scope("x", "ghost")],
            [("snapshot.scopes[3].parent_id", "unknown parent 'ghost'")],
            id="unknown parent",
        ),
    ],
)
def test_tree_violations(scopes: list[Scope], expected: list[tuple[str, str]]) -> None:
    """Each malformed tree gets exactly the violations expected, at the right paths."""
    got = violations(scopes)
    assert [path for path, _ in got] == [path for path, _ in expected]
    for (_, description), (_, want) in zip(got, expected, strict=True):
        assert want in description or (want == "too deep" and "levels deep" in description)


def test_a_long_chain_is_rejected_quickly_and_once() -> None:
    """100,000 scopes in a chain: one depth violation (the walk is linear, not quadratic)."""
    got = violations(chain(100_000))
    assert len(got) == 1
    assert "levels deep" in got[0][1]


def test_many_cycles_each_reported_once() -> None:
    """Thousands of two-cycles: one violation each."""
    scopes = []
    for i in range(2000):
        scopes += [Scope(f"a{i}", f"b{i}"), Scope(f"b{i}", f"a{i}")]
    assert len(violations(scopes)) == 2000
    with pytest.raises(InvalidArgument):
        request_checks.check(validate.snapshot_shape(Snapshot((), tuple(scopes))))


def test_too_many_resource_names_on_nodes() -> None:
    """Every distinct node resource is a matrix column, so their number is bounded."""
    nodes = tuple(node(f"n{i}", extra={f"r{i}": 1}) for i in range(100))
    got = validate.snapshot_shape(Snapshot(nodes, ()))
    assert len(got) == 1
    assert got[0].field == "snapshot.nodes[62].capacity"
