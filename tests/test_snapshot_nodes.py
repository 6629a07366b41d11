"""A snapshot's nodes read from its bytes (``kernels.snapshot_nodes.walk_nodes``,
``snapshot_decoder.nodes_from_bytes``) equal protobuf's parse converted node by node
(``convert.node_from_proto``), however they are encoded, or are declined."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strata.policy.v1 import types_pb2 as pb
from test_snapshot_wire import field, varint
from wire_strategies import int64s, message_of, texts

from strata_policy.model import Node
from strata_policy.service import convert
from strata_policy.service.snapshot_decoder import nodes_from_bytes
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.node_columns import NodeColumns
from strata_policy.state.running_columns import nodes_plainly_valid

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

names = st.sampled_from(["cpu", "gpu", "memory", "x", "é", ""])
strings = st.sampled_from([b"", b"n1", b"A100", "é".encode(), b"a\x00b"]) | st.binary(max_size=4)
amounts = st.sampled_from([0, 1, 1000, 8000, -1, 2**62, 2**63 - 1])


def entry(draw: st.DrawFn, key: bytes, value: int | bytes) -> tuple[bytes, bool]:
    """A map entry in any order, its value maybe left out; and whether it has its key."""
    parts = [field(1, key), field(2, value)]
    if draw(st.integers(0, 5)) == 0:
        parts = parts[1:] if draw(st.booleans()) else parts[:1]
    return b"".join(draw(st.permutations(parts))), parts[0][:1] == field(1, key)[:1]


@st.composite
def node_bytes(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A ``Node``'s bytes in any field order, fields given twice or left out, map entries in
    any form, maybe an unknown field; and whether the reader must read them."""
    plain = True
    chunks = [field(1, draw(strings)) for _ in range(draw(st.integers(0, 2)))]
    chunks += [field(5, draw(strings)) for _ in range(draw(st.integers(0, 2)))]
    chunks += [
        field(4, draw(st.sampled_from([0, 1, 2, 2**40]))) for _ in range(draw(st.integers(0, 2)))
    ]
    keys = draw(st.lists(names, max_size=4))
    plain &= len(set(keys)) == len(keys)
    for key in keys:
        e, keyed = entry(draw, key.encode(), draw(amounts))
        plain &= keyed
        chunks.append(field(2, e))
    keys = draw(st.lists(names, max_size=3))
    plain &= len(set(keys)) == len(keys)
    for key in keys:
        e, keyed = entry(draw, key.encode(), draw(strings))
        plain &= keyed
        chunks.append(field(3, e))
    if draw(st.integers(0, 9)) == 0:
        chunks.append(draw(st.sampled_from([field(6, 1), field(4, b"x"), field(1, 3)])))
        plain = False
    return b"".join(draw(st.permutations(chunks))), plain


@st.composite
def snapshot_bytes(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A ``Snapshot``'s bytes: nodes among scopes and running workloads (stepped over)."""
    plain = True
    chunks = [field(2, pb.Scope(id="org").SerializeToString())]
    chunks.append(field(3, field(1, field(1, b"w"))))
    for _ in range(draw(st.integers(0, 4))):
        node, ok = draw(node_bytes())
        chunks.append(field(1, node))
        plain &= ok
    return b"".join(draw(st.permutations(chunks))), plain


def check(buf: bytes, plain: bool) -> Sequence[Node] | None:
    """``nodes_from_bytes(buf)`` against protobuf: equal nodes, or declined (always when
    protobuf refuses the bytes, never when ``plain`` and protobuf reads them)."""
    got = nodes_from_bytes(buf, None)
    try:
        m = pb.Snapshot.FromString(buf)
    except DecodeError:
        assert got is None
        return None
    if got is None:
        assert not plain
        return None
    assert list(got) == [convert.node_from_proto(n) for n in m.nodes]
    for made in got:
        assert all(type(v) is int for v in made.capacity.values())
        assert type(made.unschedulable) is bool
    assert nodes_plainly_valid(got) == nodes_plainly_valid(tuple(got))  # columns vs objects
    same_matrix(got)
    return got


def same_matrix(nodes: Sequence[Node]) -> None:
    """The matrix built from the nodes' own columns is the one built by reading the nodes."""
    assert isinstance(nodes, NodeColumns)
    plain = tuple(nodes)
    assert nodes.listed == {r for nd in plain for r in nd.capacity}
    assert nodes.widest == max((nd.gpu_devices for nd in plain), default=0)
    if not all(0 <= nd.capacity.get("gpu", 0) <= 64_000 for nd in plain):
        return  # a matrix is built of validated nodes only (its device columns are sized so)
    got, want = matrix_from_nodes(nodes), matrix_from_nodes(plain)
    assert (got.index, got.resources, got.models) == (want.index, want.resources, want.models)
    for name in ("capacity", "free", "gpu_free", "schedulable", "model_code", "inv_capacity"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
        assert getattr(got, name).dtype == getattr(want, name).dtype, name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot_bytes())
def test_nodes_equal_protobufs_reading(case: tuple[bytes, bool]) -> None:
    """Nodes read from any encoding equal protobuf's parse, converted; declined only when
    they hold what the reader says it declines, or bytes protobuf refuses."""
    check(*case)


NODE: dict[str, st.SearchStrategy[object]] = {
    "id": texts,
    "capacity": st.dictionaries(st.sampled_from(["cpu", "gpu", "memory", "é"]), int64s, min_size=1),
    "labels": st.dictionaries(texts, texts, min_size=1, max_size=3),
    "unschedulable": st.just(True),
    "gpu_model": texts,
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message_of(pb.Node, NODE), max_size=5), st.booleans())
def test_every_node_field_as_protobuf(nodes: list[pb.Node], full: bool) -> None:
    """Every field of ``Node`` (a field added to the message fails here until it has a
    strategy), each set or left at its default, reads as protobuf reads it."""
    buf = pb.Snapshot(nodes=nodes).SerializeToString()
    assert check(buf, plain=True) is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot_bytes())
def test_cut_nodes_are_declined_or_read_as_protobuf(case: tuple[bytes, bool]) -> None:
    """Bytes cut anywhere: declined where protobuf refuses them, equal where it reads them."""
    buf, plain = case
    for cut in range(0, len(buf), max(1, len(buf) // 30)):
        check(buf[:cut], plain)


def test_many_label_keys_are_built_entry_by_entry() -> None:
    """Past the dense limit of distinct keys, maps are still the nodes' own, shared by equal."""
    nodes = [pb.Node(id=f"n{i}", labels={f"k{i % 80}": "v", "zone": "a"}) for i in range(200)]
    got = check(pb.Snapshot(nodes=nodes).SerializeToString(), plain=True)
    assert got is not None
    assert got[0].labels is got[80].labels
    assert got[0].labels is not got[1].labels


@pytest.mark.parametrize("distinct", [1, 2047, 2048, 2049, 3000])
def test_distinct_strings_past_the_small_table(distinct: int) -> None:
    """Label values numbered in a small table first, then a whole one when they fill half of
    it (4096 slots): read as protobuf reads them on either side of the edge."""
    nodes = [pb.Node(id=f"n{i}", labels={"v": f"{i % distinct}"}) for i in range(3000)]
    got = check(pb.Snapshot(nodes=nodes).SerializeToString(), plain=True)
    assert got is not None
    assert len({id(x.labels) for x in got}) == distinct


def test_equal_capacities_share_one_dict() -> None:
    """Nodes with the same capacity share its dict (a hundred thousand nodes, a few dicts)."""
    nodes = [pb.Node(id=f"n{i}", capacity={"cpu": 4 + i % 2, "gpu": 0}) for i in range(10)]
    got = check(pb.Snapshot(nodes=nodes).SerializeToString(), plain=True)
    assert got is not None
    assert got[0].capacity is got[2].capacity
    assert got[0].capacity == {"cpu": 4, "gpu": 0}


@pytest.mark.parametrize(
    "node",
    [
        pytest.param(field(2, field(2, 5)), id="capacity entry without its name"),
        pytest.param(field(2, field(1, b"cpu") + field(2, 1)) * 2, id="capacity name twice"),
        pytest.param(field(3, field(1, b"z") + field(2, b"a")) * 2, id="label name twice"),
        pytest.param(field(3, field(1, b"z") + field(3, b"a")), id="label entry: unknown field"),
        pytest.param(field(1, b"\xff"), id="id not UTF-8"),
        pytest.param(varint(4 << 3 | 1) + bytes(8), id="unschedulable as fixed64"),
    ],
)
def test_what_the_reader_declines(node: bytes) -> None:
    """Each thing the reader leaves to protobuf is declined, never misread."""
    assert nodes_from_bytes(field(1, node), None) is None
    check(field(1, node), plain=False)
