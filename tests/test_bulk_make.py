"""A pushed snapshot's running workloads made in bulk (``service.running_rows``) equal the same
rows made one by one and the plain conversion of protobuf's parse, in every field."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strata.policy.v1 import types_pb2 as pb
from wire_strategies import int64s, workload_messages

from strata_policy.engine import Engine
from strata_policy.model import RunningWorkload, Snapshot
from strata_policy.service import convert, running_rest, running_rows
from strata_policy.service.field_coverage import UnhandledFieldError
from strata_policy.service.running_rows import RowMaker
from strata_policy.service.snapshot_decoder import columns_from_bytes
from strata_policy.state import codec
from strata_policy.state.running_columns import RunningColumns
from strata_policy.testing import node, scope

NODES = (node("n1", cpu=8, gpus=4), node("n2", cpu=8))
SCOPES = (scope("org"), scope("team", "org"))


def varint(value: int) -> bytes:
    """A varint of ``value`` (two's complement for a negative one, as protobuf writes it)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def framed(number: int, body: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(body)) + body


def snapshot_bytes(rows: list[pb.RunningWorkload | bytes]) -> bytes:
    """A serialized ``Snapshot`` of these running workloads (messages, or a row's own bytes)."""
    parts = [r if isinstance(r, bytes) else r.SerializeToString() for r in rows]
    return b"".join(framed(3, p) for p in parts)


def columns(buf: bytes) -> RunningColumns:
    """The columns of a serialized snapshot over ``NODES`` and ``SCOPES``."""
    cols = columns_from_bytes(buf, NODES, SCOPES, convert.running_from_proto)
    assert cols is not None
    return cols


def fields(rw: RunningWorkload) -> list[tuple[str, type, Any]]:
    """Every field of a running workload and its workload, with each value's type."""
    w = rw.workload
    out = [(f.name, type(getattr(w, f.name)), getattr(w, f.name)) for f in dataclasses.fields(w)]
    out += [("admitted_at_ms", type(rw.admitted_at_ms), rw.admitted_at_ms)]
    out += [("placements", type(p), (p.node_id, p.gpu_devices)) for p in rw.placements]
    return out


def check(buf: bytes) -> None:
    """Bulk make == one-by-one make == the plain conversion, field by field and by type."""
    cols = columns(buf)
    maker = cols.make
    assert isinstance(maker, RowMaker)
    bulk = maker.many(cols, list(range(len(cols))))
    one = [maker(i) for i in range(len(cols))]
    plain = [convert.running_from_proto(m) for m in pb.Snapshot.FromString(buf).workloads]
    assert bulk == one == plain
    assert [fields(rw) for rw in bulk] == [fields(rw) for rw in plain]


def w(**kwargs: Any) -> pb.Workload:
    """A workload message: id ``a`` in ``team`` asking for one CPU, unless told otherwise."""
    return pb.Workload(**{"id": "a", "scope_id": "team", "request": {"cpu": 1000}, **kwargs})


SELECTOR_ENTRY = framed(1, b"zone") + framed(2, b"a")
CPU_5 = framed(1, b"cpu") + b"\x10\x05"  # (the kernel declines a repeated entry)
CPU_0 = framed(1, b"cpu") + b"\x10\x00"
ID_A = framed(1, b"a") + framed(2, b"team")

CASES = [
    pytest.param(pb.RunningWorkload(workload=w()), True, id="admitted only"),
    pytest.param(
        pb.RunningWorkload(
            workload=w(replicas=2, gpu_model="A100", request={"cpu": 1, "gpu": 1000}),
            placements=[pb.Placement(node_id="n1", gpu_devices=[2]), pb.Placement(node_id="n1")],
            admitted_at_ms=7,
        ),
        True,
        id="gang with devices",
    ),
    pytest.param(pb.RunningWorkload(workload=w(request={})), True, id="no request"),
    pytest.param(pb.RunningWorkload(workload=w(request={"cpu": 0})), True, id="zero amount"),
    pytest.param(framed(1, ID_A + framed(3, CPU_0)), True, id="zero amount, value written"),
    pytest.param(framed(1, ID_A + framed(3, CPU_5) + b"\x20\x01"), True, id="replicas 1 written"),
    pytest.param(pb.RunningWorkload(workload=w(scope_id="nope")), True, id="unknown scope"),
    pytest.param(
        pb.RunningWorkload(workload=w(), placements=[pb.Placement(node_id="n9")]),
        True,
        id="unknown node",
    ),
    pytest.param(
        pb.RunningWorkload(
            workload=w(), placements=[pb.Placement(node_id="n1", gpu_devices=[3, 0])]
        ),
        True,
        id="devices out of order",
    ),
    pytest.param(pb.RunningWorkload(workload=w(replicas=-3)), True, id="negative replicas"),
    pytest.param(pb.RunningWorkload(workload=w(priority=4)), False, id="priority"),
    pytest.param(pb.RunningWorkload(workload=w(preemptible=False)), False, id="not preemptible"),
    pytest.param(pb.RunningWorkload(workload=w(preemptible=True)), False, id="preemptible set"),
    pytest.param(framed(1, ID_A + b"\x28\x00"), False, id="priority 0 written"),
    pytest.param(framed(1, ID_A + framed(7, SELECTOR_ENTRY)), False, id="node selector"),
    pytest.param(pb.RunningWorkload(workload=w(spread=pb.Spread())), False, id="empty spread"),
    pytest.param(
        pb.RunningWorkload(workload=w(spread=pb.Spread(topology_key="zone"))), False, id="spread"
    ),
    pytest.param(pb.RunningWorkload(workload=w(queued_at_ms=-1)), False, id="queued at"),
]


@pytest.mark.parametrize(("row", "bare"), CASES)
def test_each_row_equals_the_plain_conversion(row: pb.RunningWorkload | bytes, bare: bool) -> None:
    """Each case, alone and among bare rows, is made as the plain path makes it; ``bare``
    says whether the row sets nothing the columns do not hold."""
    plain_row = pb.RunningWorkload(workload=w(id="z"), placements=[pb.Placement(node_id="n2")])
    for rows in ([row], [plain_row, row, plain_row]):
        buf = snapshot_bytes(rows)
        check(buf)
        found = running_rest.bare(buf, len(rows)).tolist()
        assert found == [bare] if len(rows) == 1 else found == [True, bare, True]


devices = st.lists(st.sampled_from([0, 1, 3]), max_size=3, unique=True)  # (-1: declined)


@st.composite
def running_messages(draw: st.DrawFn) -> pb.RunningWorkload:
    """Running workloads of any fields (every one, when drawn ``full``), placed on the nodes
    or not, in a known scope or not."""
    m = draw(workload_messages(full=draw(st.booleans())))
    m.scope_id = draw(st.sampled_from(["org", "team", "nope"]))
    placements = [
        pb.Placement(node_id=draw(st.sampled_from(["n1", "n2", "n9"])), gpu_devices=draw(devices))
        for _ in range(draw(st.integers(0, 3)))
    ]
    admitted = draw(st.sampled_from([0]) | int64s)
    return pb.RunningWorkload(workload=m, placements=placements, admitted_at_ms=admitted)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(running_messages(), max_size=6), st.booleans())
def test_bulk_equals_one_by_one_and_plain(rows: list[pb.RunningWorkload], bare: bool) -> None:
    """Any running workloads (their every field drawn), as many bare ones among them or not,
    made in bulk equal the one-by-one make and the plain conversion, field by field."""
    if bare:
        rows = [pb.RunningWorkload(workload=w(id=f"b{i}")) for i in range(3)] + rows
    check(snapshot_bytes(list(rows)))


def test_chunks_of_mixed_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows made over several chunks, some bare and some not, keep their order and values."""
    monkeypatch.setattr(running_rows, "_CHUNK", 4)
    rows = [
        pb.RunningWorkload(
            workload=w(id=f"w{i}", priority=i % 3, request={"cpu": i % 2}),
            placements=[pb.Placement(node_id="n1", gpu_devices=[i % 4])],
        )
        for i in range(11)
    ]
    check(snapshot_bytes(list(rows)))


def test_equal_values_are_shared() -> None:
    """Equal requests, placements and placement lists are one shared object each."""
    rows = [
        pb.RunningWorkload(workload=w(id=name), placements=[pb.Placement(node_id="n1")])
        for name in ("a", "b")
    ]
    cols = columns(snapshot_bytes(list(rows)))
    assert isinstance(cols.make, RowMaker)
    a, b = cols.make.many(cols, [0, 1])
    assert a.workload.request is b.workload.request
    assert a.placements is b.placements


def test_a_pushed_table_is_made_in_bulk_once() -> None:
    """A columnar push's held workloads: one read makes one row; reading all makes every
    other row in one bulk call, equal to the snapshot's; the engine snapshot is the same."""
    rows = [pb.RunningWorkload(workload=w(id=f"w{i}")) for i in range(5)]
    buf = snapshot_bytes(list(rows))
    cols = columns(buf)
    engine = Engine()
    engine.push_snapshot("c", Snapshot(NODES, SCOPES, cols))
    want = [convert.running_from_proto(m) for m in pb.Snapshot.FromString(buf).workloads]
    with engine.store.slot("c") as slot:
        assert slot.state is not None
        table = slot.state.workloads
        calls: list[list[int]] = []
        many = table._many
        assert many is not None
        table._many = lambda rows: calls.append(rows) or many(rows)
        assert table["w2"] == want[2]
        assert calls == []
        assert list(table.values()) == want
        assert calls == [[0, 1, 3, 4]]
        table.make_all()
        assert len(calls) == 1
    assert engine.snapshot("c")[1].workloads == tuple(want)


def test_rows_apart_in_the_bytes() -> None:
    """Rows with another field between them, or a row whose length is written long, are made
    as the plain path makes them."""
    rows = [pb.RunningWorkload(workload=w(id=f"w{i}")).SerializeToString() for i in range(4)]
    node_field = framed(1, pb.Node(id="n9").SerializeToString())
    long_length = b"\x1a" + bytes([0x80 | len(rows[2]), 0x00]) + rows[2]
    buf = framed(3, rows[0]) + node_field + framed(3, rows[1]) + long_length + framed(3, rows[3])
    check(buf)


def test_journal_record_of_a_push_is_made_in_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pushed snapshot's journal form (``codec.snapshot_to_dict``) reads its columns in one
    bulk make, and equals the plain snapshot's."""
    rows = [
        pb.RunningWorkload(workload=w(id=f"w{i}", priority=i % 2), admitted_at_ms=i)
        for i in range(5)
    ]
    buf = snapshot_bytes(list(rows))
    cols = columns(buf)
    plain = tuple(convert.running_from_proto(m) for m in pb.Snapshot.FromString(buf).workloads)
    calls: list[int] = []
    many = RowMaker.many
    monkeypatch.setattr(RowMaker, "many", lambda s, c, r: calls.append(len(r)) or many(s, c, r))
    got = codec.snapshot_to_dict(Snapshot(NODES, SCOPES, cols))
    assert calls == [5]
    assert got == codec.snapshot_to_dict(Snapshot(NODES, SCOPES, plain))


def test_every_workload_field_is_held_or_seen() -> None:
    """Each field of the messages a row is made of is held by the columns or seen by ``Rest``:
    the import-time check passes on the real descriptors."""
    running_rest.check_fields(running_rest.MESSAGES, running_rest.COLUMNS, running_rest.REST)


@pytest.mark.parametrize(
    ("columns", "rest", "named"),
    [
        pytest.param(
            {**running_rest.COLUMNS, "Workload": frozenset({"id", "scope_id", "request"})},
            running_rest.REST,
            ["Workload.replicas (field 4)", "Workload.gpu_model (field 8)"],
            id="a field neither the columns hold nor Rest sees",
        ),
        pytest.param(
            running_rest.COLUMNS,
            running_rest.REST - {"priority"},
            ["Workload.priority (field 5)"],
            id="a field Rest stopped seeing",
        ),
        pytest.param(
            {**running_rest.COLUMNS, "Placement": frozenset({"node_id"})},
            running_rest.REST,
            ["Placement.gpu_devices (field 2)"],
            id="a placement field the columns do not hold",
        ),
    ],
)
def test_an_unaccounted_field_fails_naming_it(
    columns: dict[str, frozenset[str]], rest: frozenset[str], named: list[str]
) -> None:
    """A field of ``Workload``, ``RunningWorkload`` or ``Placement`` that a bare row would drop
    fails the check, naming the field and its number."""
    with pytest.raises(UnhandledFieldError) as failed:
        running_rest.check_fields(running_rest.MESSAGES, columns, rest)
    assert [p.removeprefix("does not handle ") for p in failed.value.problems] == named
