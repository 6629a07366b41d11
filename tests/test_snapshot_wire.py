"""The snapshot kernel reads running workloads exactly as protobuf does, however they are
encoded (field order, repeats, packed or not, unknown fields), or declines."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import types_pb2 as pb

from strata_policy.kernels import byte_strings
from strata_policy.service import convert
from strata_policy.service.snapshot_decoder import columns_from_bytes
from strata_policy.testing import node, scope

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

NODES = (node("n1", gpus=2), node("n2"))
SCOPES = (scope("org"), scope("team", "org"))


def varint(value: int) -> bytes:
    """A varint of ``value`` (negative: its 64-bit two's complement, as protobuf writes it)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, value: int | bytes) -> bytes:
    """One field: a varint, or length-delimited bytes."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


text = st.sampled_from(["", "a", "w1", "team", "org", "n1", "n2", "nope", "é", "a\x00b"])
int32 = st.sampled_from([0, 1, 2, 3, -1, 2**31 - 1, -(2**31), 2**33 + 2])
int64 = st.sampled_from([0, 5, -1, 2**62, 2**63 - 1])


@st.composite
def workload_bytes(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A ``Workload``'s bytes and whether the kernel must read them (nothing it declines)."""
    plain = True
    chunks = [field(1, draw(text).encode()), field(2, draw(text).encode())]
    names = draw(st.lists(st.sampled_from(["cpu", "gpu", "x", ""]), max_size=3))
    plain &= len(set(names)) == len(names)
    for name in names:
        entry = [field(1, name.encode()), field(2, draw(int64))]
        if draw(st.booleans()):
            entry.reverse()
        if draw(st.integers(0, 9)) == 0:
            entry = entry[1:]  # an entry without its name
            plain = False
        chunks.append(field(3, b"".join(entry)))
    for number, values in ((4, int32), (5, int32), (6, st.sampled_from([0, 1])), (10, int64)):
        chunks += [field(number, draw(values)) for _ in range(draw(st.integers(0, 2)))]
    for _ in range(draw(st.integers(0, 2))):
        chunks.append(field(7, field(1, draw(text).encode()) + field(2, draw(text).encode())))
    chunks += [field(8, draw(st.sampled_from(["", "A100", "T4|A100"])).encode())]
    if draw(st.booleans()):
        chunks.append(field(9, field(1, b"kubernetes.io/hostname")))
    if draw(st.integers(0, 9)) == 0:
        chunks.append(field(draw(st.sampled_from([11, 99])), 1))  # unknown to this version
        plain = False
    return b"".join(draw(st.permutations(chunks))), plain


@st.composite
def placement_bytes(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A ``Placement``'s bytes (devices packed, unpacked or both) and whether it is plain."""
    devices = draw(st.lists(st.integers(-1, 3), max_size=3))
    chunks = [field(1, draw(st.sampled_from(["n1", "n2", "n9", ""])).encode())]
    cut = draw(st.integers(0, len(devices)))
    if draw(st.booleans()):
        chunks.append(field(2, b"".join(varint(d) for d in devices[:cut])))
    else:
        chunks += [field(2, d) for d in devices[:cut]]
    chunks.append(field(2, b"".join(varint(d) for d in devices[cut:])))
    return b"".join(chunks), len(set(devices)) == len(devices) and min(devices, default=0) >= 0


@st.composite
def snapshot_bytes(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A ``Snapshot``'s bytes, running workloads among its nodes and scopes."""
    plain = True
    chunks = [field(1, convert.node_to_proto(n).SerializeToString()) for n in NODES]
    chunks += [field(2, convert.scope_to_proto(s).SerializeToString()) for s in SCOPES]
    for _ in range(draw(st.integers(0, 4))):
        w, ok = draw(workload_bytes())
        parts = [field(1, w)]
        for _ in range(draw(st.integers(0, 2))):
            p, fine = draw(placement_bytes())
            parts.append(field(2, p))
            ok &= fine
        parts += [field(3, draw(int64)) for _ in range(draw(st.integers(0, 2)))]
        if draw(st.integers(0, 9)) == 0:
            parts.append(field(1, field(4, 2)))  # a second workload field: protobuf merges
            ok = False
        chunks.append(field(3, b"".join(draw(st.permutations(parts)))))
        plain &= ok
    return b"".join(chunks), plain


def read_by_protobuf(m: pb.Snapshot) -> list[Any]:
    """Per running workload, the values the columns hold, as protobuf reads them."""
    scope_at = {s.id: i for i, s in enumerate(SCOPES)}
    node_at = {n.id: i for i, n in enumerate(NODES)}
    return [
        (
            rw.workload.id,
            scope_at.get(rw.workload.scope_id, -1),
            rw.workload.replicas or 1,
            rw.admitted_at_ms,
            {k: v for k, v in rw.workload.request.items() if v},
            rw.workload.gpu_model,
            [(node_at.get(p.node_id, -1), list(p.gpu_devices)) for p in rw.placements],
        )
        for rw in m.workloads
    ]


@settings(max_examples=150, deadline=None)
@given(snapshot_bytes())
def test_columns_equal_protobufs_reading(case: tuple[bytes, bool]) -> None:
    """The columns hold what protobuf reads from the same bytes, and made workloads equal the
    plain conversion; the kernel declines only what it says it declines."""
    buf, plain = case
    m = pb.Snapshot.FromString(buf)
    cols = columns_from_bytes(buf, NODES, SCOPES, convert.running_from_proto)
    known = {name for n in NODES for name in n.capacity}
    named = {k for rw in m.workloads for k in rw.workload.request}
    widest = max(n.gpu_devices for n in NODES)
    held = all(len(p.gpu_devices) <= widest for rw in m.workloads for p in rw.placements)
    if cols is None:  # malformed for the kernel, or more than the nodes could hold
        assert not (plain and known >= named and held)
        return
    assert known >= named
    assert held
    names = set(cols.resources)
    assert names == {k for rw in m.workloads for k in rw.workload.request}
    read = []
    for i in range(len(cols)):
        start, count = int(cols.placement_start[i]), int(cols.placement_count[i])
        placements = [
            (int(cols.placement_node[p]), [d for d in cols.devices[p].tolist() if d != -1])
            for p in range(start, start + count)
        ]
        request = {r: int(a) for r, a in zip(cols.resources, cols.request[i], strict=True) if a}
        read.append(
            (
                cols.ids[i],
                int(cols.scope[i]),
                int(cols.replicas[i]),
                int(cols.admitted_at_ms[i]),
                request,
                cols.gpu_models[int(cols.gpu_model[i])],
                placements,
            )
        )
    assert read == read_by_protobuf(m)
    assert list(cols) == [convert.running_from_proto(rw) for rw in m.workloads]
    assert np.all(cols.devices >= -1)


def test_cut_bytes_are_declined() -> None:
    """Bytes cut short anywhere are declined, never read past their end."""
    rw = field(1, field(1, b"w") + field(2, b"team")) + field(2, field(1, b"n1") + field(2, 1))
    buf = field(3, rw)
    for cut in range(1, len(buf)):
        assert columns_from_bytes(buf[:cut], NODES, SCOPES, convert.running_from_proto) is None


@settings(max_examples=60, deadline=None)
@given(
    strings=st.lists(st.binary(max_size=4), max_size=40),
    seeds=st.tuples(st.integers(0, 2**62 - 1), st.integers(0, 2**62 - 1)),
)
def test_distinct_numbers_strings_by_first_coming_whatever_the_seed(
    strings: list[bytes], seeds: tuple[int, int]
) -> None:
    """``distinct`` numbers equal strings alike, in the order each first comes (with each
    one's first index), for any hash seed (the seed only moves slots: a per-process one keeps
    clients from picking collisions)."""
    buf = np.frombuffer(b"".join(strings) or b"\0", dtype=np.uint8)
    ends = np.cumsum([len(x) for x in strings], dtype=np.int64)
    lo, hi = ends - np.array([len(x) for x in strings], dtype=np.int64), ends
    first: dict[bytes, int] = {}
    want = [first.setdefault(x, len(first)) for x in strings]
    for seed in seeds:
        codes = np.empty(len(strings), dtype=np.int64)
        table = np.full((1 << (2 * max(len(strings), 1)).bit_length(), 2), -1, dtype=np.int64)
        firsts = np.empty(len(strings), dtype=np.int64)
        assert byte_strings.distinct(buf, lo, hi, codes, table, seed, firsts) == len(first)
        assert codes.tolist() == want
        assert firsts[: len(first)].tolist() == [want.index(c) for c in range(len(first))]


int32_values = st.sampled_from([0, 1, 3, -1, 2**31 - 1, -(2**31)])


@st.composite
def plain_running(draw: st.DrawFn) -> pb.RunningWorkload:
    """A running workload the columns read (no selector, no spread): every other field drawn,
    ``preemptible`` absent, false or true."""
    w = pb.Workload(
        id=draw(st.sampled_from(["a", "b", "é"])),
        scope_id=draw(st.sampled_from(["org", "team", "nope", ""])),
        request=draw(st.dictionaries(st.sampled_from(["cpu", "gpu"]), int64, max_size=2)),
        replicas=draw(int32_values),
        priority=draw(int32_values),
        gpu_model=draw(st.sampled_from(["", "A100"])),
        queued_at_ms=draw(int64),
    )
    preemptible = draw(st.sampled_from([None, False, True]))
    if preemptible is not None:
        w.preemptible = preemptible
    placements = [
        pb.Placement(node_id=node_id, gpu_devices=draw(st.sampled_from([[], [0], [1, 0]])))
        for node_id in draw(st.lists(st.sampled_from(["n1", "n2", "n9"]), max_size=2))
    ]
    return pb.RunningWorkload(workload=w, placements=placements, admitted_at_ms=draw(int64))


@settings(max_examples=150, deadline=None)
@given(st.lists(plain_running(), max_size=4))
def test_workloads_made_from_columns_equal_protobufs(running: list[pb.RunningWorkload]) -> None:
    """Workloads made from the columns' records equal the plain conversion of protobuf's
    parse, field for field (every field but the selector and spread drawn)."""
    m = pb.Snapshot(workloads=running)
    cols = columns_from_bytes(m.SerializeToString(), NODES, SCOPES, convert.running_from_proto)
    assert cols is not None
    assert list(cols) == [convert.running_from_proto(rw) for rw in m.workloads]
