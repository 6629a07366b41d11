"""Reading PushSnapshot's protobuf wire format in kernels: the request split, and the readers
the walks share.

PushSnapshot's bytes are read without protobuf's message objects (``service.snapshot_decoder``
drives it) by one kernel module per concern:

- here, ``split_push``: a ``PushSnapshotRequest``'s snapshot found and its scopes copied out
  (protobuf parses those, and the request's other fields), the nodes and running workloads
  counted; and the inlined readers every walk uses (a varint, a length-delimited span, an
  ``int32``, UTF-8, a map entry, a skipped value) with the statuses they answer;
- ``kernels.snapshot_nodes``: ``walk_nodes``, a snapshot's ``Node`` records as columns;
- ``kernels.snapshot_running``: ``walk_running``, its ``RunningWorkload`` records as columns;
- ``kernels.byte_strings``: strings held as bounds in those bytes, numbered, found and joined
  through a hash table (the pushed ids' index, ``probe``, is one).

Every reader reads only what it can read exactly as protobuf does, and otherwise answers a
non-zero status and the caller takes the plain path (protobuf's parse): a field number the
messages do not have (an unknown field), a known field on another wire type, a singular
message given twice (protobuf would merge the two), a map that names a key twice or has an
entry without a key, a string not UTF-8 (protobuf refuses a message holding one), bytes cut
short. Scalars given twice take the last value, and an ``int32`` keeps the low 32 bits of its
varint, as protobuf does.
"""

from __future__ import annotations

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel

# Fields of a walk's map entries (``entries[KEY_LO, i]``, ``caps[i, KEY_LO]``): name bounds, amount.
KEY_LO, KEY_HI, VALUE = range(3)
ENTRY_FIELDS = 3

OK = 0
MALFORMED = 1  # bytes cut short, a varint too long, a length past the end
UNKNOWN_FIELD = 2  # a field number or wire type the message does not have
MERGED = 3  # a singular message field given twice: protobuf merges, the columns do not
NO_WORKLOAD = 4
REPEATED_KEY = 5  # a request map naming a resource twice (protobuf keeps the last)
NO_KEY = 6  # a request map entry without its name
REPEATED_DEVICE = 7
NEGATIVE_DEVICE = 8  # a device below 0 (the columns pad with -1; the plain path refuses it)
NOT_UTF8 = 9  # a string that is not UTF-8: protobuf refuses the whole message


@inline_kernel
def read_varint(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """(value as int64, position after); position -1 when malformed."""
    result = np.int64(0)
    shift = 0
    while pos < end and shift < 64:
        b = int(buf[pos])
        pos += 1
        result |= np.int64(b & 0x7F) << np.int64(shift)  # bits past 64 dropped, as protobuf
        if b < 0x80:
            return int(result), pos
        shift += 7
    return 0, -1


@inline_kernel
def read_span(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """The bytes of a length-delimited field whose length starts at ``pos``: (start, end);
    (-1, -1) when malformed (a bad varint, a negative length, bytes past ``end``)."""
    size, pos = read_varint(buf, pos, end)
    if pos < 0 or size < 0 or pos + size > end:
        return -1, -1
    return pos, pos + size


@inline_kernel
def as_int32(value: int) -> int:
    """The low 32 bits of a varint as a signed int32 (protobuf's reading of an ``int32``)."""
    low = value & 0xFFFFFFFF
    return low - (1 << 32) if low >= (1 << 31) else low


@inline_kernel
def is_utf8(buf: np.ndarray, lo: int, hi: int) -> bool:
    """Whether ``buf[lo:hi]`` is UTF-8 as protobuf (and Python) take it: no overlong form, no
    surrogate, nothing past U+10FFFF, no sequence cut short."""
    k = lo
    while k < hi:
        b = int(buf[k])
        if b < 0x80:
            k += 1
            continue
        if b < 0xC2 or b > 0xF4:  # a continuation byte, an overlong lead, past U+10FFFF
            return False
        n, low, high = 1, 0x80, 0xBF
        if b >= 0xF0:
            n = 3
            low = 0x90 if b == 0xF0 else 0x80
            high = 0x8F if b == 0xF4 else 0xBF
        elif b >= 0xE0:
            n = 2
            low = 0xA0 if b == 0xE0 else 0x80
            high = 0x9F if b == 0xED else 0xBF
        if k + n >= hi:
            return False
        c = int(buf[k + 1])
        if c < low or c > high:
            return False
        for j in range(2, n + 1):
            c = int(buf[k + j])
            if c < 0x80 or c > 0xBF:
                return False
        k += n + 1
    return True


@inline_kernel
def strings_utf8(buf: np.ndarray, lo: int, hi: int, number: int) -> int:
    """Of a message in ``buf[lo:hi]`` whose fields are all strings numbered 1 to ``number``
    (a map<string, string> entry, a ``Spread``): OK, or the status that declines it."""
    at = lo
    while at < hi:
        tag, at = read_varint(buf, at, hi)
        if at < 0:
            return MALFORMED
        if tag & 7 != 2 or tag >> 3 < 1 or tag >> 3 > number:
            return UNKNOWN_FIELD
        s_lo, s_hi = read_span(buf, at, hi)
        if s_lo < 0:
            return MALFORMED
        if not is_utf8(buf, s_lo, s_hi):
            return NOT_UTF8
        at = s_hi
    return OK


@inline_kernel
def read_entry(
    buf: np.ndarray, lo: int, hi: int, string_value: bool
) -> tuple[int, int, int, int, int]:
    """A map entry in ``buf[lo:hi]``: (status, key bounds, then the value: a varint and 0, or
    a string's bounds). A key or value given twice takes the last, as protobuf; a value left
    out is 0 or empty; an entry without its key is declined (``NO_KEY``)."""
    key_lo = key_hi = -1
    a = b = 0
    e = lo
    while e < hi:
        tag, e = read_varint(buf, e, hi)
        if e < 0:
            return MALFORMED, 0, 0, 0, 0
        if tag == 0x0A:
            key_lo, key_hi = read_span(buf, e, hi)
            if key_lo < 0:
                return MALFORMED, 0, 0, 0, 0
            if not is_utf8(buf, key_lo, key_hi):
                return NOT_UTF8, 0, 0, 0, 0
            e = key_hi
        elif tag == 0x12 and string_value:
            a, b = read_span(buf, e, hi)
            if a < 0:
                return MALFORMED, 0, 0, 0, 0
            if not is_utf8(buf, a, b):
                return NOT_UTF8, 0, 0, 0, 0
            e = b
        elif tag == 0x10 and not string_value:
            a, e = read_varint(buf, e, hi)
            if e < 0:
                return MALFORMED, 0, 0, 0, 0
        else:
            return UNKNOWN_FIELD, 0, 0, 0, 0
    if key_lo < 0:
        return NO_KEY, 0, 0, 0, 0
    return OK, key_lo, key_hi, a, b


@inline_kernel
def skip_value(buf: np.ndarray, pos: int, end: int, wire: int) -> int:
    """The position after a value of wire type ``wire`` starting at ``pos``; -1 when malformed
    or a group (protobuf's deprecated groups are left to protobuf)."""
    if wire == 0:
        return read_varint(buf, pos, end)[1]
    if wire == 1 or wire == 5:  # noqa: PLR1714  # numba: no set literals
        pos += 8 if wire == 1 else 4
        return pos if pos <= end else -1
    if wire == 2:
        return read_span(buf, pos, end)[1]
    return -1


@kernel
def split_push(buf: np.ndarray, out: np.ndarray) -> tuple[int, int, int, int, int, int, int]:
    """A ``PushSnapshotRequest`` in ``buf`` split for the walks: (status, where the
    ``snapshot`` field's key starts (-1: no snapshot), its bytes' start and end, the bytes
    written to ``out``, the nodes and the running workloads counted). ``out`` (as long as
    ``buf``) receives the snapshot's scope records, in order: the snapshot less its nodes and
    running workloads, which ``walk_nodes`` and ``walk_running`` read.

    Declines (status not OK) what protobuf would not read as one snapshot field of nodes,
    scopes and running workloads: a snapshot given twice (protobuf merges them), a snapshot
    field of another wire type, a field of the snapshot it does not know, a group, bytes cut
    short. The request's other fields, known or not, are stepped over: protobuf reads them."""
    end = buf.shape[0]
    pos = 0
    tag_lo = snap_lo = snap_hi = -1
    while pos < end:
        start = pos
        tag, pos = read_varint(buf, pos, end)
        if pos < 0 or tag >> 3 == 0:
            return MALFORMED, 0, 0, 0, 0, 0, 0
        if tag >> 3 == 2:  # the snapshot
            if tag & 7 != 2:
                return UNKNOWN_FIELD, 0, 0, 0, 0, 0, 0
            if tag_lo >= 0:
                return MERGED, 0, 0, 0, 0, 0, 0
            snap_lo, snap_hi = read_span(buf, pos, end)
            if snap_lo < 0:
                return MALFORMED, 0, 0, 0, 0, 0, 0
            tag_lo, pos = start, snap_hi
        else:
            pos = skip_value(buf, pos, end, tag & 7)
            if pos < 0:
                return MALFORMED, 0, 0, 0, 0, 0, 0
    used = 0
    nodes = 0
    running = 0
    pos = snap_lo
    while pos < snap_hi:
        start = pos
        tag, pos = read_varint(buf, pos, snap_hi)
        if pos < 0:
            return MALFORMED, 0, 0, 0, 0, 0, 0
        if tag & 7 != 2 or tag >> 3 < 1 or tag >> 3 > 3:
            return UNKNOWN_FIELD, 0, 0, 0, 0, 0, 0
        lo, hi = read_span(buf, pos, snap_hi)
        if lo < 0:
            return MALFORMED, 0, 0, 0, 0, 0, 0
        pos = hi
        if tag >> 3 == 1:
            nodes += 1
        elif tag >> 3 == 3:
            running += 1
        else:
            for k in range(start, hi):
                out[used] = buf[k]
                used += 1
    return OK, tag_lo, snap_lo, snap_hi, used, nodes, running


def warmup() -> None:
    """Compile (or load from the cache) ``split_push`` on a request of one running workload."""
    record = bytes([0x1A, 7, 0x0A, 3, 0x0A, 1, 0x77, 0x12, 0])
    request = np.frombuffer(bytes([0x12, len(record)]) + record, dtype=np.uint8)
    split_push(request, np.empty_like(request))
