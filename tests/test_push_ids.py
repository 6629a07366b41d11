"""The pushed ids' checks on their bytes, and the one walk that fills arrays sized by a guess:
``kernels.byte_strings.distinct`` and ``find`` against a dict (their naive twin) for any
strings, including strings whose hashes are all equal, and ``snapshot_decoder``'s one walk
against the walk that counts first, whatever the guess."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import types_pb2 as pb

from strata_policy.kernels import byte_strings, snapshot_nodes, snapshot_running, snapshot_wire
from strata_policy.service import snapshot_decoder, wire_strings

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

# empty, one byte apart, long, multi-byte: what an id may be
ids = st.one_of(
    st.sampled_from(["", "a", "b", "w1", "w2", "w\u00e9", "w\u00e8", "x" * 253, "x" * 254]),
    st.text(max_size=6),
)


def _bounds(strings: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``strings`` encoded back to back: the bytes, and each one's start and end."""
    data = [x.encode() for x in strings]
    sizes = np.array([len(x) for x in data], dtype=np.int64)
    hi = np.cumsum(sizes, dtype=np.int64)
    return np.frombuffer(b"".join(data) or b"\0", dtype=np.uint8), hi - sizes, hi


def _naive(strings: list[str]) -> tuple[list[int], list[int]]:
    """Each string's number in first-coming order, and each number's first index."""
    first: dict[str, int] = {}
    codes = [first.setdefault(x, len(first)) for x in strings]
    return codes, [codes.index(c) for c in range(len(first))]


@settings(max_examples=80, deadline=None)
@given(st.lists(ids, max_size=30))
def test_distinct_is_its_naive_twin(strings: list[str]) -> None:
    """``distinct`` numbers strings as a dict does, with each number's first index, and
    ``_all_distinct`` is ``len(set(strings)) == len(strings)``."""
    buf, lo, hi = _bounds(strings)
    codes, firsts = np.empty(len(strings), np.int64), np.empty(len(strings), np.int64)
    table = np.full((1 << (2 * max(len(strings), 1)).bit_length(), 2), -1, dtype=np.int64)
    count = byte_strings.distinct(buf, lo, hi, codes, table, byte_strings.SEED, firsts)
    want_codes, want_firsts = _naive(strings)
    assert (codes.tolist(), firsts[:count].tolist()) == (want_codes, want_firsts)
    assert wire_strings.all_distinct(buf, lo, hi) == (len(set(strings)) == len(strings))


def _find(keys: list[str], strings: list[str]) -> tuple[list[int], int]:
    """``find`` of ``strings`` among ``keys`` (both in one buffer, keys first)."""
    buf, lo, hi = _bounds([*keys, *strings])
    n = len(keys)
    table = np.full((1 << (2 * max(n, 1)).bit_length(), 2), -1, dtype=np.int64)
    found = np.empty(len(strings), dtype=np.int64)
    key_lo, key_hi = lo[:n].copy(), hi[:n].copy()
    missing = byte_strings.find(buf, lo[n:].copy(), hi[n:].copy(), key_lo, key_hi, table, 7, found)
    return found.tolist(), missing


def _find_naive(keys: list[str], strings: list[str]) -> tuple[list[int], int]:
    """What a dict of ``keys`` (the last index of each) answers for ``strings``."""
    at = {k: i for i, k in enumerate(keys)}
    found = [at.get(x, -1) for x in strings]
    return found, found.count(-1)


@settings(max_examples=80, deadline=None)
@given(keys=st.lists(ids, max_size=12), strings=st.lists(ids, max_size=20))
def test_find_is_its_naive_twin(keys: list[str], strings: list[str]) -> None:
    """``find`` answers each string's last equal key, as a dict built in key order does."""
    assert _find(keys, strings) == _find_naive(keys, strings)


CASES = [
    pytest.param(["a", "b", "a"], id="repeated"),
    pytest.param(["w1", "w2", "w3"], id="one byte apart"),
    pytest.param(["", "", "a"], id="empty twice"),
    pytest.param(["", "a", "b"], id="empty once"),
    pytest.param(["x" * 300, "x" * 299 + "y", "x" * 300], id="huge, one byte apart, repeated"),
    pytest.param(["w\u00e9", "w\u00e8"], id="multi-byte, one byte apart"),
]


@pytest.mark.skipif(not numba.config.DISABLE_JIT, reason="patches a kernel's Python body")
@pytest.mark.parametrize("strings", CASES)
def test_equal_hashes_are_told_apart_by_their_bytes(
    strings: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every string's hash the same (the kernel's Python body, its hash patched), the
    bytes decide: the same numbers and the same answer on repeats as the dict."""
    monkeypatch.setattr(byte_strings, "_hash", lambda buf, lo, hi, seed: 12345)
    buf, lo, hi = _bounds(strings)
    codes, firsts = np.empty(len(strings), np.int64), np.empty(len(strings), np.int64)
    table = np.full((1 << (2 * len(strings)).bit_length(), 2), -1, dtype=np.int64)
    count = byte_strings.distinct(buf, lo, hi, codes, table, byte_strings.SEED, firsts)
    assert (codes.tolist(), firsts[:count].tolist()) == _naive(strings)
    assert wire_strings.all_distinct(buf, lo, hi) == (len(set(strings)) == len(strings))
    probes = [*strings, "absent", strings[0]]
    assert _find(strings, probes) == _find_naive(strings, probes)


@st.composite
def snapshots(draw: st.DrawFn) -> bytes:
    """A serialized ``Snapshot`` of a few nodes and running workloads, with any number of
    request entries, placements and devices (repeats included: what only writing finds)."""
    names = st.sampled_from(["cpu", "gpu", "x"])
    nodes = [
        pb.Node(id=f"n{i}", capacity=draw(st.dictionaries(names, st.integers(0, 9), max_size=3)))
        for i in range(draw(st.integers(0, 3)))
    ]
    running = [
        pb.RunningWorkload(
            workload=pb.Workload(
                id=draw(ids),
                request=draw(st.dictionaries(names, st.integers(0, 9), max_size=3)),
            ),
            placements=[
                pb.Placement(node_id="n0", gpu_devices=draw(st.lists(st.integers(-1, 3))))
                for _ in range(draw(st.integers(0, 3)))
            ],
        )
        for _ in range(draw(st.integers(0, 4)))
    ]
    return pb.Snapshot(nodes=nodes, workloads=running).SerializeToString()


@settings(max_examples=80, deadline=None)
@given(body=snapshots(), guess=st.integers(0, 3))
def test_one_walk_is_the_counted_walk(
    body: bytes, guess: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the guess per record (0: every array too small), ``decode_push``'s walk
    answers the counts of a walk that only counts, and its arrays (when it keeps them) are
    those of a walk into arrays of those counts; a walk stopped by a repeat counts the whole."""
    for name in ("_ENTRIES", "_PLACEMENTS", "_DEVICES", "_CAPS", "_LABELS"):
        monkeypatch.setattr(snapshot_decoder, name, guess)
    buf = np.frombuffer(body, dtype=np.uint8)
    records = buf.shape[0] and len(pb.Snapshot.FromString(body).workloads)
    counted = snapshot_running.walk_running(buf, False, *snapshot_running.arrays(0, 0, 0, 0))
    got, walked = snapshot_decoder._walk_running(buf, records)
    assert got == counted
    exact = snapshot_running.arrays(*counted[1:])
    status = snapshot_running.walk_running(buf, True, *exact)[0]
    if walked is not None:
        assert status == snapshot_wire.OK
        assert [a.tolist() for a in walked] == [a.tolist() for a in exact]
    node_records = buf.shape[0] and len(pb.Snapshot.FromString(body).nodes)
    node_counted = snapshot_nodes.walk_nodes(buf, False, *snapshot_nodes.node_arrays(0, 0, 0))
    got_nodes, nodes_walked = snapshot_decoder._walk_nodes(buf, node_records)
    assert got_nodes == node_counted
    node_exact = snapshot_nodes.node_arrays(*node_counted[1:])
    node_status = snapshot_nodes.walk_nodes(buf, True, *node_exact)[0]
    if nodes_walked is not None:
        assert node_status == snapshot_wire.OK
        assert [a.tolist() for a in nodes_walked] == [a.tolist() for a in node_exact]
