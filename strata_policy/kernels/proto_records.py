"""Protobuf records of a Place request's workloads and of its response's results, read and
written by kernels, without a Python step per record (``service.place_request_decoder``,
``service.result_encoder``).

``scan_records``: where the ids are in a run of records that repeat one tail. A record there
is the bytes ``0x12 L 0x0A n id tail``: field 2 (a workload), length-delimited with a one-byte
length ``L = 2 + n + len(tail)`` below 0x80, holding field 1 (its id) of a one-byte length
``n`` below 0x80 and then the given tail. The kernel reads such records one after the other
from a position, exactly as a record-by-record reader that checks those bytes would, and stops
at the first bytes that are not one; the caller reads on from there.

``write_records``: a run of results, each its id, a middle the caller wrote (the decision,
placements and borrowed amounts, cached per distinct value) and its score, with the keys and
lengths protobuf writes around them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel

_U8 = np.dtype(np.uint8)
_I64 = np.dtype(np.int64)
_F64 = np.dtype(np.float64)


def _u8(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


SEPARATOR = 0  # the byte between ids in ``scan_records``' joined ids
RECORD_KEY = 0x12  # a record's key in ``scan_records``: field 2, length-delimited
ID_KEY = 0x0A  # its id's key: field 1, length-delimited (the decoder checks both at import)


@kernel
def _scan(
    raw: np.ndarray,
    pos: int,
    end: int,
    tail: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    joined: np.ndarray,
) -> tuple[int, int, int]:
    """Fill ``starts``/``stops`` with each record's id bounds and ``joined`` with the ids, a
    ``SEPARATOR`` between two; (records read, position after the last, bytes of ``joined``
    used). ``starts`` and ``stops`` hold at least ``(end - pos) // (4 + len(tail)) + 1``
    entries, ``joined`` at least ``end - pos``."""
    t = tail.shape[0]
    count = 0
    used = 0
    while pos + 4 <= end:
        size = int(raw[pos + 1])  # int: uint8 sums would wrap without the JIT
        n = int(raw[pos + 3])
        if raw[pos] != RECORD_KEY or raw[pos + 2] != ID_KEY or size >= 0x80 or size != 2 + n + t:
            break
        stop = pos + 2 + size
        if stop > end:
            break
        at = stop - t
        k = 0
        while k < t and raw[at + k] == tail[k]:
            k += 1
        if k < t:
            break
        if count:
            joined[used] = SEPARATOR
            used += 1
        for j in range(pos + 4, at):
            joined[used] = raw[j]
            used += 1
        starts[count] = pos + 4
        stops[count] = at
        count += 1
        pos = stop
    return count, pos, used


@dataclass(frozen=True, slots=True)
class Records:
    """``scan_records``' answer: the ids' ``starts`` and ``stops`` in the bytes (int64), the
    ids ``joined`` with a ``SEPARATOR`` between two (uint8), and the position ``after`` the
    last record read."""

    starts: np.ndarray
    stops: np.ndarray
    joined: np.ndarray
    after: int


def scan_records(raw: np.ndarray, pos: int, end: int, tail: np.ndarray) -> Records:
    """The records (see the module docstring) of ``raw[pos:end]`` from ``pos`` on (``after``
    is ``pos`` when there is none). ``raw`` and ``tail`` are C-contiguous uint8 arrays;
    ``0 <= pos <= end <= len(raw)``."""
    for name, a in (("raw", raw), ("tail", tail)):
        if a.dtype != _U8 or a.ndim != 1 or not a.flags.c_contiguous:
            raise ValueError(f"{name}: {a.dtype}{a.shape}, expected a C-contiguous uint8 row")
    if not 0 <= pos <= end <= raw.shape[0]:
        raise ValueError(f"positions {pos}..{end} outside {raw.shape[0]} bytes")
    room = (end - pos) // (4 + tail.shape[0]) + 1  # a record takes at least 4 + len(tail)
    starts = np.empty(room, dtype=np.int64)
    stops = np.empty(room, dtype=np.int64)
    joined = np.empty(end - pos, dtype=np.uint8)
    count, after, used = _scan(raw, pos, end, tail, starts, stops, joined)
    return Records(starts[:count], stops[:count], joined[:used], int(after))


@inline_kernel
def _put_varint(out: np.ndarray, at: int, value: int) -> int:
    """Write ``value`` (not negative) as a varint at ``at``; the position after it."""
    while value >= 0x80:
        out[at] = (value & 0x7F) | 0x80
        value >>= 7
        at += 1
    out[at] = value
    return at + 1


@inline_kernel
def _varint_size(value: int) -> int:
    """How many bytes ``value`` (not negative) takes as a varint."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


@kernel
def _write(
    out: np.ndarray,
    record_key: np.ndarray,
    id_key: np.ndarray,
    ids: np.ndarray,
    middles: np.ndarray,
    middle_ends: np.ndarray,
    score_key: np.ndarray,
    scores: np.ndarray,
) -> int:
    """Write the records (see ``write_records``) into ``out``; the bytes written."""
    n = middle_ends.shape[0]
    scored = scores.shape[0] > 0
    at = 0
    id_start = 0
    middle_start = 0
    for i in range(n):
        id_stop = id_start
        while id_stop < ids.shape[0] and ids[id_stop] != SEPARATOR:
            id_stop += 1
        id_size = id_stop - id_start
        middle_stop = middle_ends[i]
        body = middle_stop - middle_start
        if id_size:
            body += id_key.shape[0] + _varint_size(id_size) + id_size
        if scored:
            body += score_key.shape[0] + 8
        for k in range(record_key.shape[0]):
            out[at + k] = record_key[k]
        at = _put_varint(out, at + record_key.shape[0], body)
        if id_size:
            for k in range(id_key.shape[0]):
                out[at + k] = id_key[k]
            at = _put_varint(out, at + id_key.shape[0], id_size)
            for k in range(id_start, id_stop):
                out[at] = ids[k]
                at += 1
        for k in range(middle_start, middle_stop):
            out[at] = middles[k]
            at += 1
        if scored:
            for k in range(score_key.shape[0]):
                out[at + k] = score_key[k]
            at += score_key.shape[0]
            for k in range(8 * i, 8 * i + 8):
                out[at] = scores[k]
                at += 1
        id_start = id_stop + 1
        middle_start = middle_stop
    return at


def write_records(
    record_key: bytes,
    id_key: bytes,
    ids: bytes,
    middles: bytes,
    middle_ends: np.ndarray,
    score_key: bytes,
    scores: np.ndarray,
) -> bytes:
    """Length-delimited records, one per row: ``record_key``, the varint of the body's length,
    then the body — ``id_key``, the varint of the id's length and the id (left out for an empty
    id), the row's middle, and ``score_key`` with the row's score (when ``scores`` is not
    empty) — as protobuf writes a repeated message field whose messages hold those fields.

    ``ids`` are the rows' ids joined with a ``SEPARATOR`` between two (none may hold one);
    ``middles`` the rows' middles joined, row ``i``'s ending at ``middle_ends[i]`` (int64,
    ascending); ``scores`` float64, one per row, or empty (C-contiguous arrays)."""
    n = middle_ends.shape[0]
    last = int(middle_ends[-1]) if n else 0
    if middle_ends.dtype != _I64 or middle_ends.ndim != 1 or last != len(middles):
        raise ValueError("middle_ends: expected int64 ends of the middles, the last their length")
    if n and (middle_ends[0] < 0 or (n > 1 and bool((np.diff(middle_ends) < 0).any()))):
        raise ValueError("middle_ends: expected ascending ends")
    if scores.shape not in ((n,), (0,)) or scores.dtype != _F64:
        raise ValueError(f"scores: {scores.dtype}{scores.shape}, expected float64 ({n},) or (0,)")
    if not (middle_ends.flags.c_contiguous and scores.flags.c_contiguous):
        raise ValueError("middle_ends, scores: expected C-contiguous arrays")
    if ids.count(SEPARATOR) != max(n - 1, 0):
        raise ValueError("ids: expected one separator between two ids")
    bound = len(ids) + len(middles) + n * (len(record_key) + len(id_key) + len(score_key) + 28)
    out = np.empty(bound, dtype=np.uint8)
    used = _write(
        out, _u8(record_key), _u8(id_key), _u8(ids), _u8(middles), middle_ends,
        _u8(score_key), scores.astype("<f8", copy=False).view(np.uint8),
    )  # fmt: skip
    return out[:used].tobytes()
