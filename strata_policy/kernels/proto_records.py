"""The kernels that read a Place request's workload records and write its response's results,
without a Python step per record. Their validating wrappers are the codecs' that call them:
``service.place_request_decoder.scan_records`` and ``service.result_encoder.write_records``.

``scan_kernel``: where the ids are in a run of records that repeat one tail. A record there
is the bytes ``0x12 L 0x0A n id tail``: field 2 (a workload), length-delimited with a one-byte
length ``L = 2 + n + len(tail)`` below 0x80, holding field 1 (its id) of a one-byte length
``n`` below 0x80 and then the given tail. The kernel reads such records one after the other
from a position, exactly as a record-by-record reader that checks those bytes would, and stops
at the first bytes that are not one; the caller reads on from there.

``write_kernel``: a run of results, each its id, a middle the caller wrote (the decision,
placements and borrowed amounts, cached per distinct value) and its score, with the keys and
lengths protobuf writes around them.
"""

from __future__ import annotations

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel

SEPARATOR = 0  # the byte between ids in ``scan_kernel``'s joined ids
RECORD_KEY = 0x12  # a record's key in ``scan_kernel``: field 2, length-delimited
ID_KEY = 0x0A  # its id's key: field 1, length-delimited (the decoder checks both at import)


@kernel
def scan_kernel(
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
def write_kernel(
    out: np.ndarray,
    record_key: np.ndarray,
    id_key: np.ndarray,
    ids: np.ndarray,
    middles: np.ndarray,
    middle_ends: np.ndarray,
    score_key: np.ndarray,
    scores: np.ndarray,
) -> int:
    """Write the records (``result_encoder.write_records``) into ``out``; the bytes written."""
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
