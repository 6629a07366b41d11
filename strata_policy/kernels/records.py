"""Where the ids are in a run of protobuf records that repeat one tail (a Place request's
workloads, ``service.wire``), found without a Python step per record.

A record here is the bytes ``0x12 L 0x0A n id tail``: field 2 (a workload), length-delimited
with a one-byte length ``L = 2 + n + len(tail)`` below 0x80, holding field 1 (its id) of a
one-byte length ``n`` below 0x80 and then the given tail. The kernel reads such records one
after the other from a position, exactly as a record-by-record reader that checks those bytes
would, and stops at the first bytes that are not one; the caller reads on from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from strata_policy.kernels.config import kernel

_U8 = np.dtype(np.uint8)


SEPARATOR = 0  # the byte between ids in ``scan_records``' joined ids


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
    used). ``starts`` and ``stops`` hold at least ``(end - pos) // 4 + 1`` entries, ``joined``
    at least ``end - pos``."""
    t = tail.shape[0]
    count = 0
    used = 0
    while pos + 4 <= end:
        size = raw[pos + 1]
        n = raw[pos + 3]
        if raw[pos] != 0x12 or raw[pos + 2] != 0x0A or size >= 0x80 or size != 2 + n + t:
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
    room = (end - pos) // 4 + 1
    starts = np.empty(room, dtype=np.int64)
    stops = np.empty(room, dtype=np.int64)
    joined = np.empty(end - pos, dtype=np.uint8)
    count, after, used = _scan(raw, pos, end, tail, starts, stops, joined)
    return Records(starts[:count], stops[:count], joined[:used], int(after))
