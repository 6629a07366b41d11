"""The proto record kernels (``kernels.proto_records``), through the codecs' wrappers:
``place_request_decoder.scan_records`` reads the records a record-by-record reader reads and
``result_encoder.write_records`` writes what a field-by-field writer writes (their naive
twins), and the wrappers refuse arrays and positions they do not take."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.kernels.proto_records import SEPARATOR
from strata_policy.service.place_request_decoder import scan_records
from strata_policy.service.result_encoder import write_records

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)


def naive_scan(raw: bytes, pos: int, end: int, tail: bytes) -> tuple[list[bytes], int]:
    """The ids of the records ``0x12 L 0x0A n id tail`` (one-byte ``L = 2 + n + len(tail)``)
    read one by one from ``pos``, and where reading stopped."""
    ids = []
    while pos + 4 <= end:
        key, size, id_key, n = raw[pos : pos + 4]
        stop = pos + 2 + size
        if (key, id_key) != (0x12, 0x0A) or size >= 0x80 or size != 2 + n + len(tail):
            break
        if stop > end or raw[stop - len(tail) : stop] != tail:
            break
        ids.append(raw[pos + 4 : stop - len(tail)])
        pos = stop
    return ids, pos


def _u8(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _record(wid: bytes, tail: bytes) -> bytes:
    return bytes((0x12, 2 + len(wid) + len(tail), 0x0A, len(wid))) + wid + tail


def _check(raw: bytes, pos: int, end: int, tail: bytes) -> None:
    starts, stops, joined, found_after = scan_records(_u8(raw), pos, end, _u8(tail))
    ids, after = naive_scan(raw, pos, end, tail)
    assert found_after == after
    assert [raw[a:b] for a, b in zip(starts, stops, strict=True)] == ids
    assert joined.tobytes() == bytes((SEPARATOR,)).join(ids)


@pytest.mark.parametrize(
    ("raw", "tail"),
    [
        pytest.param(b"", b"t", id="nothing"),
        pytest.param(_record(b"w1", b"t") * 3, b"t", id="three records"),
        pytest.param(_record(b"", b"tt") + _record(b"w", b"tt"), b"tt", id="an empty id"),
        pytest.param(_record(b"w1", b"") * 2, b"", id="no tail"),
        pytest.param(_record(b"w1", b"t") + _record(b"w2", b"u"), b"t", id="another tail"),
        pytest.param(_record(b"w1", b"t")[:-1], b"t", id="cut short"),
        pytest.param(_record(b"x" * 120, b"tail1234"), b"tail1234", id="length of 0x80"),
        pytest.param(_record(b"w\x00t", b"t") * 2, b"t", id="an id holding NUL and the tail"),
    ],
)
def test_scan_cases(raw: bytes, tail: bytes) -> None:
    """Records read until the first bytes that are not one."""
    _check(raw, 0, len(raw), tail)


@settings(max_examples=300)
@given(
    ids=st.lists(st.binary(max_size=12), max_size=12),
    tail=st.binary(max_size=10),
    junk=st.binary(max_size=6),
    data=st.data(),
)
def test_scan_equals_the_naive_reader(
    ids: list[bytes], tail: bytes, junk: bytes, data: st.DataObject
) -> None:
    """Any run of records, bytes inserted anywhere, any window: the twin's ids and stop."""
    raw = bytearray(b"".join(_record(i, tail) for i in ids))
    where = data.draw(st.integers(0, len(raw)))
    raw[where:where] = junk
    end = data.draw(st.integers(0, len(raw)))
    pos = data.draw(st.integers(0, end))
    _check(bytes(raw), pos, end, tail)


@pytest.mark.parametrize(
    ("raw", "pos", "end", "tail"),
    [
        pytest.param(np.zeros(4, dtype=np.int64), 0, 4, _u8(b"t"), id="raw not bytes"),
        pytest.param(_u8(b"abcd"), 0, 4, np.zeros(1, dtype=np.int8), id="tail not bytes"),
        pytest.param(_u8(b"abcd"), 3, 2, _u8(b"t"), id="start after the end"),
        pytest.param(_u8(b"abcd"), 0, 5, _u8(b"t"), id="end past the bytes"),
    ],
)
def test_scan_refuses(raw: np.ndarray, pos: int, end: int, tail: np.ndarray) -> None:
    """Arrays of another type and positions outside the bytes are refused."""
    with pytest.raises(ValueError, match=r"expected a C-contiguous uint8 row|outside"):
        scan_records(raw, pos, end, tail)


def naive_write(
    record_key: bytes, id_key: bytes, ids: list[bytes], middles: list[bytes], score_key: bytes,
    scores: list[float],
) -> bytes:  # fmt: skip
    """Each row's record written field by field: the twin of ``write_records``."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        return bytes(out) + bytes((n,))

    out = []
    for i, (wid, middle) in enumerate(zip(ids, middles, strict=True)):
        body = (id_key + varint(len(wid)) + wid if wid else b"") + middle
        if scores:
            body += score_key + struct.pack("<d", scores[i])
        out.append(record_key + varint(len(body)) + body)
    return b"".join(out)


no_nul = st.binary(max_size=140).filter(lambda b: SEPARATOR not in b)


@settings(max_examples=300)
@given(
    rows=st.lists(st.tuples(no_nul, st.binary(max_size=200), st.floats()), max_size=8),
    keys=st.lists(st.binary(min_size=1, max_size=3), min_size=3, max_size=3),
    scored=st.booleans(),
)
def test_write_equals_the_naive_writer(
    rows: list[tuple[bytes, bytes, float]], keys: list[bytes], scored: bool
) -> None:
    """Ids empty or long, middles of any length (bodies past 127 bytes), scores or none."""
    ids = [r[0] for r in rows]
    middles = [r[1] for r in rows]
    scores = [r[2] for r in rows] if scored else []
    ends = np.cumsum([len(m) for m in middles], dtype=np.int64)
    got = write_records(
        keys[0], keys[1], bytes((SEPARATOR,)).join(ids), b"".join(middles), ends, keys[2],
        np.array(scores, dtype=np.float64),
    )  # fmt: skip
    assert got == naive_write(keys[0], keys[1], ids, middles, keys[2], scores)


@pytest.mark.parametrize(
    ("ids", "ends", "scores"),
    [
        pytest.param(b"a\x00b", np.array([1, 2], dtype=np.int32), np.ones(2), id="ends not int64"),
        pytest.param(b"a\x00b", np.array([1, 3], dtype=np.int64), np.ones(2), id="ends too far"),
        pytest.param(b"a\x00b", np.array([2, 1], dtype=np.int64), np.ones(2), id="ends descend"),
        pytest.param(b"a\x00b", np.array([1, 2], dtype=np.int64), np.ones(3), id="scores"),
        pytest.param(b"ab", np.array([1, 2], dtype=np.int64), np.ones(2), id="one id for two"),
    ],
)
def test_write_refuses(ids: bytes, ends: np.ndarray, scores: np.ndarray) -> None:
    """Columns that do not describe the same rows are refused."""
    with pytest.raises(ValueError, match=r"expected"):
        write_records(b"\x0a", b"\x0a", ids, b"xy", ends, b"\x39", scores)
