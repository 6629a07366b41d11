"""A pushed snapshot's nodes as columns (``state.node_columns``): a sequence equal to the plain
tuple whose nodes are made when read, and validated from its columns with exactly the plain
walk's violations."""

from __future__ import annotations

import pytest
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import Snapshot
from strata_policy.service import convert
from strata_policy.service.snapshot_decoder import nodes_from_bytes
from strata_policy.state import validate
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.node_columns import NodeColumns
from strata_policy.state.running_columns import nodes_plainly_valid

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)


def columns(nodes: list[pb.Node]) -> tuple[NodeColumns, tuple[object, ...]]:
    """``nodes`` read as columns from a snapshot's bytes, and converted one by one."""
    got = nodes_from_bytes(pb.Snapshot(nodes=nodes).SerializeToString(), None)
    assert isinstance(got, NodeColumns)
    return got, tuple(convert.node_from_proto(n) for n in nodes)


def gpu_node(i: int, **capacity: int) -> pb.Node:
    """A node ``n{i}`` with ``capacity`` (8 GPUs, a CPU and memory unless given)."""
    return pb.Node(id=f"n{i}", capacity={"cpu": 4, "memory": 8, "gpu": 8000, **capacity})


CASES = [
    pytest.param([gpu_node(i) for i in range(5)], True, id="valid"),
    pytest.param([], True, id="no nodes"),
    pytest.param([gpu_node(1), gpu_node(1)], False, id="an id twice"),
    pytest.param([pb.Node(id="", capacity={"cpu": 1})], False, id="empty id"),
    pytest.param([pb.Node(id="x" * 254, capacity={"cpu": 1})], False, id="id too long"),
    pytest.param([pb.Node(id="é" * 200, capacity={"cpu": 1})], True, id="long id in bytes only"),
    pytest.param([gpu_node(0, cpu=-1)], False, id="negative amount"),
    pytest.param([gpu_node(0, cpu=2**62 + 1)], False, id="amount above the maximum"),
    pytest.param([gpu_node(0, gpu=1500)], False, id="gpu not in whole devices"),
    pytest.param([gpu_node(0, gpu=65_000)], False, id="more devices than a node has"),
    pytest.param([gpu_node(0, cpu=2**62), gpu_node(1, cpu=1)], False, id="total above max"),
    pytest.param([gpu_node(0, cpu=2**61), gpu_node(1, cpu=2**61)], True, id="total at max"),
    pytest.param([pb.Node(id="n", capacity={"": 1})], False, id="empty resource name"),
    pytest.param(
        [pb.Node(id="n", capacity={f"r{k}": 1 for k in range(65)})], False, id="65 resources"
    ),
]


@pytest.mark.parametrize(("nodes", "valid"), CASES)
def test_columns_are_validated_as_the_plain_walk(nodes: list[pb.Node], valid: bool) -> None:
    """Vouched for from the columns exactly when the plain walk finds nothing; a snapshot of
    the columns gets the plain snapshot's violations, field paths and all."""
    got, plain = columns(nodes)
    assert nodes_plainly_valid(got) is valid
    assert nodes_plainly_valid(plain) is valid  # type: ignore[arg-type]
    walked = validate.snapshot_shape(Snapshot(plain))  # type: ignore[arg-type]
    assert (walked == []) is valid
    assert validate.snapshot_shape(Snapshot(got)) == walked


def test_nodes_are_made_when_read_and_once() -> None:
    """Building the matrix and validating read the columns only; a node read is made once and
    read again as the same object, and the sequence reads as the plain tuple."""
    got, plain = columns([gpu_node(i) for i in range(6)])
    assert nodes_plainly_valid(got)
    matrix = matrix_from_nodes(got)
    assert matrix.nodes is got
    assert got._made == [None] * 6  # nothing read a node
    assert got[2] is got[2]
    assert got[-1] == plain[-1]
    assert got[1:4] == plain[1:4]
    assert got == plain
    assert plain == got
    assert got != plain[:-1]
    assert repr(got) == repr(plain)
    assert list(got) == list(plain)
    with pytest.raises(IndexError):
        got[6]
    with pytest.raises(TypeError):
        hash(got)
