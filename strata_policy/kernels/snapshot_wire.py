"""The running workloads of a serialized ``Snapshot``, read from its wire bytes as columns.

This is the one module that reads PushSnapshot's bytes without protobuf's message objects
(``service.snapshot_decoder`` drives it). ``split_push`` finds a ``PushSnapshotRequest``'s
snapshot and copies out its scopes (protobuf parses those, and the request's other fields).
``walk_nodes`` reads its nodes' fields, and ``walk_running`` reads a ``Snapshot``'s field 3
(``RunningWorkload``) records and writes, per record, the byte bounds of the record and of its
workload's ``id``, ``scope_id`` and ``gpu_model``, its ``replicas`` and ``admitted_at_ms``, its
``request`` entries (name bounds and amount) and its placements (node id bounds and GPU
devices). Fields the columns do not need (priority, preemptible, selector, spread, queue time)
are stepped over: a workload is made from its record's bytes by protobuf itself when a caller
needs one. Every string of a record is checked to be UTF-8 (protobuf refuses a message holding
one that is not), so that records the walk accepts are records protobuf parses.

It reads only what it can read exactly as protobuf does, and otherwise answers a non-zero
status and the caller takes the plain path: a field number the messages do not have (an
unknown field), a known field on another wire type, a ``workload`` given twice (protobuf would
merge the two), a request map that names a resource twice or has an entry without a name, a
placement naming a device twice or a negative one (the columns pad with -1), a record without
a workload, a string not UTF-8, bytes cut short. Scalars given twice take the last value, and
``gpu_devices`` may be packed or not, in pieces, as protobuf reads them; an ``int32`` keeps the
low 32 bits of its varint, as protobuf does.

With ``fill`` false the kernel only counts (records, request entries, placements, devices).
With ``fill`` true it writes while every array has room, and past that only counts: the caller
sizes the arrays from a bound it knows (``split_push`` counts the records exactly) and walks the
bytes once; only when a count passes its array's length does it size them exactly and walk
again. The walks of nodes (``walk_nodes``) do the same.
"""

from __future__ import annotations

import secrets

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel

# Fields of ``rows`` (``rows[ID_LO, i]``: running workload i's id start; see ``arrays``).
RW_LO, RW_HI, ID_LO, ID_HI, SCOPE_LO, SCOPE_HI, MODEL_LO, MODEL_HI = range(8)
REPLICAS, ADMITTED, REQ_START, REQ_COUNT, PL_START, PL_COUNT = range(8, 14)
ROW_FIELDS = 14
# Fields of ``entries`` (request map entries) and ``placements``, field by record as ``rows``.
KEY_LO, KEY_HI, VALUE = range(3)
ENTRY_FIELDS = 3
NODE_LO, NODE_HI, DEV_START, DEV_COUNT = range(4)
PLACEMENT_FIELDS = 4

SEED = secrets.randbits(62)  # ``distinct``'s hash basis, drawn once per process
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
def _varint(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
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
def _span(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """The bytes of a length-delimited field whose length starts at ``pos``: (start, end);
    (-1, -1) when malformed (a bad varint, a negative length, bytes past ``end``)."""
    size, pos = _varint(buf, pos, end)
    if pos < 0 or size < 0 or pos + size > end:
        return -1, -1
    return pos, pos + size


@inline_kernel
def _int32(value: int) -> int:
    """The low 32 bits of a varint as a signed int32 (protobuf's reading of an ``int32``)."""
    low = value & 0xFFFFFFFF
    return low - (1 << 32) if low >= (1 << 31) else low


@inline_kernel
def _utf8(buf: np.ndarray, lo: int, hi: int) -> bool:
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
def _strings_utf8(buf: np.ndarray, lo: int, hi: int, number: int) -> int:
    """Of a message in ``buf[lo:hi]`` whose fields are all strings numbered 1 to ``number``
    (a map<string, string> entry, a ``Spread``): OK, or the status that declines it."""
    at = lo
    while at < hi:
        tag, at = _varint(buf, at, hi)
        if at < 0:
            return MALFORMED
        if tag & 7 != 2 or tag >> 3 < 1 or tag >> 3 > number:
            return UNKNOWN_FIELD
        s_lo, s_hi = _span(buf, at, hi)
        if s_lo < 0:
            return MALFORMED
        if not _utf8(buf, s_lo, s_hi):
            return NOT_UTF8
        at = s_hi
    return OK


@inline_kernel
def _same(buf: np.ndarray, a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> bool:
    if a_hi - a_lo != b_hi - b_lo:
        return False
    for k in range(a_hi - a_lo):  # noqa: SIM110  # numba compiles loops, not genexps
        if buf[a_lo + k] != buf[b_lo + k]:
            return False
    return True


@kernel
def walk_running(
    buf: np.ndarray,
    fill: bool,
    rows: np.ndarray,
    entries: np.ndarray,
    placements: np.ndarray,
    devices: np.ndarray,
) -> tuple[int, int, int, int, int]:
    """(status, records, entries, placements, devices) of the ``Snapshot`` in ``buf``; see the
    module docstring. With ``fill``, ``rows``/``entries``/``placements``/``devices`` are written
    while each has room; a count above an array's length says the walk stopped writing (and
    checking what only writing finds: a repeated key or device, a negative device) and must be
    made again with arrays of the counts."""
    end = buf.shape[0]
    pos = 0
    writing = fill
    n_rows = 0
    n_entries = 0
    n_placements = 0
    n_devices = 0
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return MALFORMED, 0, 0, 0, 0
        field, wire = tag >> 3, tag & 7
        if wire != 2 or field < 1 or field > 3:
            return UNKNOWN_FIELD, 0, 0, 0, 0
        lo, hi = _span(buf, pos, end)
        if lo < 0:
            return MALFORMED, 0, 0, 0, 0
        pos = hi
        if field != 3:  # nodes and scopes: read by protobuf
            continue
        # --- one RunningWorkload in [lo, hi) ---
        seen_workload = False
        replicas = 0
        admitted = 0
        id_lo = id_hi = scope_lo = scope_hi = model_lo = model_hi = lo
        req_start = n_entries
        pl_start = n_placements
        at = lo
        while at < hi:
            tag, at = _varint(buf, at, hi)
            if at < 0:
                return MALFORMED, 0, 0, 0, 0
            field, wire = tag >> 3, tag & 7
            if field == 3 and wire == 0:
                admitted, at = _varint(buf, at, hi)
                if at < 0:
                    return MALFORMED, 0, 0, 0, 0
                continue
            if wire != 2 or field < 1 or field > 2:
                return UNKNOWN_FIELD, 0, 0, 0, 0
            m_lo, m_hi = _span(buf, at, hi)
            if m_lo < 0:
                return MALFORMED, 0, 0, 0, 0
            at = m_hi
            if field == 1:  # the Workload
                if seen_workload:
                    return MERGED, 0, 0, 0, 0
                seen_workload = True
                w = m_lo
                while w < m_hi:
                    tag, w = _varint(buf, w, m_hi)
                    if w < 0:
                        return MALFORMED, 0, 0, 0, 0
                    field, wire = tag >> 3, tag & 7
                    scalar = field == 4 or field == 5 or field == 6 or field == 10  # noqa: PLR1714  # numba: no set literals
                    if scalar and wire == 0:
                        value, w = _varint(buf, w, m_hi)
                        if field == 4:
                            replicas = _int32(value)
                    elif scalar or wire != 2 or field < 1 or field > 9:
                        return UNKNOWN_FIELD, 0, 0, 0, 0
                    else:
                        s_lo, s_hi = _span(buf, w, m_hi)
                        if s_lo < 0:
                            return MALFORMED, 0, 0, 0, 0
                        w = s_hi
                        if field == 7 or field == 9:  # noqa: PLR1714  # numba: no set literals
                            # node_selector entries, spread: read by protobuf, their strings
                            # checked here (protobuf refuses a message with one not UTF-8)
                            status = _strings_utf8(buf, s_lo, s_hi, 2 if field == 7 else 1)
                            if status != OK:
                                return status, 0, 0, 0, 0
                        elif field != 3 and not _utf8(buf, s_lo, s_hi):
                            return NOT_UTF8, 0, 0, 0, 0
                        if field == 1:
                            id_lo, id_hi = s_lo, s_hi
                        elif field == 2:
                            scope_lo, scope_hi = s_lo, s_hi
                        elif field == 8:
                            model_lo, model_hi = s_lo, s_hi
                        elif field == 3:  # a request map entry
                            status, key_lo, key_hi, amount, _ = _entry(buf, s_lo, s_hi, False)
                            if status != OK:
                                return status, 0, 0, 0, 0
                            if writing and n_entries >= entries.shape[1]:
                                writing = False
                            if writing:
                                for k in range(req_start, n_entries):
                                    other_lo, other_hi = entries[KEY_LO, k], entries[KEY_HI, k]
                                    if _same(buf, key_lo, key_hi, other_lo, other_hi):
                                        return REPEATED_KEY, 0, 0, 0, 0
                                entries[KEY_LO, n_entries] = key_lo
                                entries[KEY_HI, n_entries] = key_hi
                                entries[VALUE, n_entries] = amount
                            n_entries += 1
                    if w < 0:
                        return MALFORMED, 0, 0, 0, 0
            else:  # a Placement in [m_lo, m_hi)
                node_lo = node_hi = m_lo
                dev_start = n_devices
                p = m_lo
                while p < m_hi:
                    tag, p = _varint(buf, p, m_hi)
                    if p < 0:
                        return MALFORMED, 0, 0, 0, 0
                    if tag == 0x0A:
                        node_lo, node_hi = _span(buf, p, m_hi)
                        if node_lo < 0:
                            return MALFORMED, 0, 0, 0, 0
                        if not _utf8(buf, node_lo, node_hi):
                            return NOT_UTF8, 0, 0, 0, 0
                        p = node_hi
                    elif tag == 0x10:
                        value, p = _varint(buf, p, m_hi)
                        if p < 0:
                            return MALFORMED, 0, 0, 0, 0
                        if writing and n_devices >= devices.shape[0]:
                            writing = False
                        if writing:
                            devices[n_devices] = _int32(value)
                        n_devices += 1
                    elif tag == 0x12:  # packed
                        p, packed_end = _span(buf, p, m_hi)
                        if p < 0:
                            return MALFORMED, 0, 0, 0, 0
                        while p < packed_end:
                            value, p = _varint(buf, p, packed_end)
                            if p < 0:
                                return MALFORMED, 0, 0, 0, 0
                            if writing and n_devices >= devices.shape[0]:
                                writing = False
                            if writing:
                                devices[n_devices] = _int32(value)
                            n_devices += 1
                    else:
                        return UNKNOWN_FIELD, 0, 0, 0, 0
                if writing and n_placements >= placements.shape[1]:
                    writing = False
                if writing:
                    for a in range(dev_start, n_devices):
                        if devices[a] < 0:
                            return NEGATIVE_DEVICE, 0, 0, 0, 0
                        for b in range(dev_start, a):
                            if devices[a] == devices[b]:
                                return REPEATED_DEVICE, 0, 0, 0, 0
                    placements[NODE_LO, n_placements] = node_lo
                    placements[NODE_HI, n_placements] = node_hi
                    placements[DEV_START, n_placements] = dev_start
                    placements[DEV_COUNT, n_placements] = n_devices - dev_start
                n_placements += 1
        if not seen_workload:
            return NO_WORKLOAD, 0, 0, 0, 0
        if writing and n_rows >= rows.shape[1]:
            writing = False
        if writing:
            rows[RW_LO, n_rows] = lo
            rows[RW_HI, n_rows] = hi
            rows[ID_LO, n_rows] = id_lo
            rows[ID_HI, n_rows] = id_hi
            rows[SCOPE_LO, n_rows] = scope_lo
            rows[SCOPE_HI, n_rows] = scope_hi
            rows[MODEL_LO, n_rows] = model_lo
            rows[MODEL_HI, n_rows] = model_hi
            rows[REPLICAS, n_rows] = replicas
            rows[ADMITTED, n_rows] = admitted
            rows[REQ_START, n_rows] = req_start
            rows[REQ_COUNT, n_rows] = n_entries - req_start
            rows[PL_START, n_rows] = pl_start
            rows[PL_COUNT, n_rows] = n_placements - pl_start
        n_rows += 1
    return OK, n_rows, n_entries, n_placements, n_devices


# Columns of ``walk_nodes``'s ``rows`` (one row per node), ``caps`` and ``labels``.
N_ID_LO, N_ID_HI, N_MODEL_LO, N_MODEL_HI, N_UNSCHEDULABLE = range(5)
N_CAP_START, N_CAP_COUNT, N_LABEL_START, N_LABEL_COUNT = range(5, 9)
NODE_FIELDS = 9
VALUE_LO, VALUE_HI = 2, 3  # a label's value bounds (KEY_LO, KEY_HI as for entries)
LABEL_FIELDS = 4


@inline_kernel
def _entry(buf: np.ndarray, lo: int, hi: int, string_value: bool) -> tuple[int, int, int, int, int]:
    """A map entry in ``buf[lo:hi]``: (status, key bounds, then the value: a varint and 0, or
    a string's bounds). A key or value given twice takes the last, as protobuf; a value left
    out is 0 or empty; an entry without its key is declined (``NO_KEY``)."""
    key_lo = key_hi = -1
    a = b = 0
    e = lo
    while e < hi:
        tag, e = _varint(buf, e, hi)
        if e < 0:
            return MALFORMED, 0, 0, 0, 0
        if tag == 0x0A:
            key_lo, key_hi = _span(buf, e, hi)
            if key_lo < 0:
                return MALFORMED, 0, 0, 0, 0
            if not _utf8(buf, key_lo, key_hi):
                return NOT_UTF8, 0, 0, 0, 0
            e = key_hi
        elif tag == 0x12 and string_value:
            a, b = _span(buf, e, hi)
            if a < 0:
                return MALFORMED, 0, 0, 0, 0
            if not _utf8(buf, a, b):
                return NOT_UTF8, 0, 0, 0, 0
            e = b
        elif tag == 0x10 and not string_value:
            a, e = _varint(buf, e, hi)
            if e < 0:
                return MALFORMED, 0, 0, 0, 0
        else:
            return UNKNOWN_FIELD, 0, 0, 0, 0
    if key_lo < 0:
        return NO_KEY, 0, 0, 0, 0
    return OK, key_lo, key_hi, a, b


@kernel
def walk_nodes(
    buf: np.ndarray, fill: bool, rows: np.ndarray, caps: np.ndarray, labels: np.ndarray
) -> tuple[int, int, int, int]:
    """(status, nodes, capacity entries, label entries) of the ``Snapshot`` in ``buf``: per
    ``Node`` record (field 1) the bounds of its ``id`` and ``gpu_model``, ``unschedulable``,
    and its ``capacity`` (name bounds, amount) and ``labels`` (name and value bounds) entries,
    as ``walk_running`` reads running workloads (called twice: count, then ``fill``).

    Declines what it cannot read exactly as protobuf: an unknown field or wire type, a map
    entry without its key, a map naming a key twice (protobuf keeps the last), a string not
    UTF-8, bytes cut short. Scalars and strings given twice take the last value. With
    ``fill``, the arrays are written while each has room, as ``walk_running``'s."""
    end = buf.shape[0]
    pos = 0
    writing = fill
    n_rows = n_caps = n_labels = 0
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return MALFORMED, 0, 0, 0
        if tag & 7 != 2 or tag >> 3 < 1 or tag >> 3 > 3:
            return UNKNOWN_FIELD, 0, 0, 0
        lo, hi = _span(buf, pos, end)
        if lo < 0:
            return MALFORMED, 0, 0, 0
        pos = hi
        if tag >> 3 != 1:  # scopes and running workloads: read elsewhere
            continue
        id_lo = id_hi = model_lo = model_hi = lo
        unschedulable = 0
        cap_start, label_start = n_caps, n_labels
        at = lo
        while at < hi:
            tag, at = _varint(buf, at, hi)
            if at < 0:
                return MALFORMED, 0, 0, 0
            if tag == 0x20:  # unschedulable
                value, at = _varint(buf, at, hi)
                if at < 0:
                    return MALFORMED, 0, 0, 0
                unschedulable = 1 if value != 0 else 0
                continue
            if tag & 7 != 2 or tag >> 3 < 1 or tag >> 3 == 4 or tag >> 3 > 5:
                return UNKNOWN_FIELD, 0, 0, 0
            s_lo, s_hi = _span(buf, at, hi)
            if s_lo < 0:
                return MALFORMED, 0, 0, 0
            at = s_hi
            field = tag >> 3
            if field == 1 or field == 5:  # noqa: PLR1714  # numba: no set literals
                if not _utf8(buf, s_lo, s_hi):
                    return NOT_UTF8, 0, 0, 0
                if field == 1:
                    id_lo, id_hi = s_lo, s_hi
                else:
                    model_lo, model_hi = s_lo, s_hi
                continue
            status, key_lo, key_hi, a, b = _entry(buf, s_lo, s_hi, field == 3)
            if status != OK:
                return status, 0, 0, 0
            if field == 2:
                if writing and n_caps >= caps.shape[0]:
                    writing = False
                if writing:
                    for k in range(cap_start, n_caps):
                        if _same(buf, key_lo, key_hi, caps[k, KEY_LO], caps[k, KEY_HI]):
                            return REPEATED_KEY, 0, 0, 0
                    caps[n_caps, KEY_LO] = key_lo
                    caps[n_caps, KEY_HI] = key_hi
                    caps[n_caps, VALUE] = a
                n_caps += 1
            else:
                if writing and n_labels >= labels.shape[0]:
                    writing = False
                if writing:
                    for k in range(label_start, n_labels):
                        if _same(buf, key_lo, key_hi, labels[k, KEY_LO], labels[k, KEY_HI]):
                            return REPEATED_KEY, 0, 0, 0
                    labels[n_labels, KEY_LO] = key_lo
                    labels[n_labels, KEY_HI] = key_hi
                    labels[n_labels, VALUE_LO] = a
                    labels[n_labels, VALUE_HI] = b
                n_labels += 1
        if writing and n_rows >= rows.shape[0]:
            writing = False
        if writing:
            rows[n_rows, N_ID_LO] = id_lo
            rows[n_rows, N_ID_HI] = id_hi
            rows[n_rows, N_MODEL_LO] = model_lo
            rows[n_rows, N_MODEL_HI] = model_hi
            rows[n_rows, N_UNSCHEDULABLE] = unschedulable
            rows[n_rows, N_CAP_START] = cap_start
            rows[n_rows, N_CAP_COUNT] = n_caps - cap_start
            rows[n_rows, N_LABEL_START] = label_start
            rows[n_rows, N_LABEL_COUNT] = n_labels - label_start
        n_rows += 1
    return OK, n_rows, n_caps, n_labels


def node_arrays(nodes: int, caps: int, labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Output arrays for ``walk_nodes`` of the counts a first call answered."""
    return (
        np.empty((nodes, NODE_FIELDS), dtype=np.int64),
        np.empty((caps, ENTRY_FIELDS), dtype=np.int64),
        np.empty((labels, LABEL_FIELDS), dtype=np.int64),
    )


@inline_kernel
def _skip(buf: np.ndarray, pos: int, end: int, wire: int) -> int:
    """The position after a value of wire type ``wire`` starting at ``pos``; -1 when malformed
    or a group (protobuf's deprecated groups are left to protobuf)."""
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 1 or wire == 5:  # noqa: PLR1714  # numba: no set literals
        pos += 8 if wire == 1 else 4
        return pos if pos <= end else -1
    if wire == 2:
        return _span(buf, pos, end)[1]
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
        tag, pos = _varint(buf, pos, end)
        if pos < 0 or tag >> 3 == 0:
            return MALFORMED, 0, 0, 0, 0, 0, 0
        if tag >> 3 == 2:  # the snapshot
            if tag & 7 != 2:
                return UNKNOWN_FIELD, 0, 0, 0, 0, 0, 0
            if tag_lo >= 0:
                return MERGED, 0, 0, 0, 0, 0, 0
            snap_lo, snap_hi = _span(buf, pos, end)
            if snap_lo < 0:
                return MALFORMED, 0, 0, 0, 0, 0, 0
            tag_lo, pos = start, snap_hi
        else:
            pos = _skip(buf, pos, end, tag & 7)
            if pos < 0:
                return MALFORMED, 0, 0, 0, 0, 0, 0
    used = 0
    nodes = 0
    running = 0
    pos = snap_lo
    while pos < snap_hi:
        start = pos
        tag, pos = _varint(buf, pos, snap_hi)
        if pos < 0:
            return MALFORMED, 0, 0, 0, 0, 0, 0
        if tag & 7 != 2 or tag >> 3 < 1 or tag >> 3 > 3:
            return UNKNOWN_FIELD, 0, 0, 0, 0, 0, 0
        lo, hi = _span(buf, pos, snap_hi)
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


@kernel
def join(buf: np.ndarray, lo: np.ndarray, hi: np.ndarray, out: np.ndarray, sep: int) -> int:
    """Copy ``buf[lo[i]:hi[i]]`` for each ``i`` into ``out``, ``sep`` between two; the bytes
    used, or -1 when a string holds ``sep`` (the joined text would split wrongly). ``out``
    holds at least ``sum(hi - lo) + len(lo)`` bytes."""
    used = 0
    for i in range(lo.shape[0]):
        if i:
            out[used] = sep
            used += 1
        for k in range(lo[i], hi[i]):
            b = buf[k]
            if b == sep:
                return -1
            out[used] = b
            used += 1
    return used


@inline_kernel
def _hash(buf: np.ndarray | bytes, lo: int, hi: int, seed: int) -> int:
    """FNV-1a of ``buf[lo:hi]`` from the basis ``seed``, kept to 62 bits (non-negative in an
    int64), then mixed so that every bit of it moves the low bits a table slot takes."""
    h = seed
    for k in range(lo, hi):
        h = ((h ^ int(buf[k])) * 0x100000001B3) & 0x3FFFFFFFFFFFFFFF
    h ^= h >> 29
    h = (h * 0x1CE4E5B9) & 0x3FFFFFFFFFFFFFFF
    return h ^ (h >> 32)


@kernel
def distinct(
    buf: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    codes: np.ndarray,
    table: np.ndarray,
    seed: int,
    firsts: np.ndarray,
) -> int:
    """Number the distinct strings ``buf[lo[i]:hi[i]]`` in the order each first comes: ``codes[i]``
    is string ``i``'s number; answers how many there are, or -1 as soon as they fill half of
    ``table`` (the caller asks again with a bigger one). ``table`` is scratch, ``(size, 2)``
    filled with -1, its size a power of two (open addressing; a slot holds the first index of
    a distinct string and its hash, so that the bytes are compared only where the hashes are
    equal: a probe reads one slot, not the string of each it passes): one above
    ``2 * len(lo)`` never fills, a small one answers a column of a few distinct strings
    without a table the size of the column. The caller finds string ``c``'s
    first index in ``firsts[c]`` (as long as ``lo``; only the first ``count`` are written: the
    first ``i`` with ``codes[i] == c``). ``seed`` (``SEED``: random per
    process) keeps a client from choosing strings that share a slot: the strings come from
    requests, and a table of colliding ones would make this quadratic."""
    mask = table.shape[0] - 1
    count = 0
    for i in range(lo.shape[0]):
        h = _hash(buf, lo[i], hi[i], seed)
        slot = h & mask
        while True:
            j = table[slot, 0]
            if j < 0:
                if 2 * (count + 1) > table.shape[0]:
                    return -1
                table[slot, 0] = i
                table[slot, 1] = h
                codes[i] = count
                firsts[count] = i
                count += 1
                break
            if table[slot, 1] == h and _same(buf, lo[i], hi[i], lo[j], hi[j]):
                codes[i] = codes[j]
                break
            slot = (slot + 1) & mask
    return count


@kernel
def find(
    buf: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    table: np.ndarray,
    seed: int,
    found: np.ndarray,
) -> int:
    """For each string ``buf[lo[i]:hi[i]]``, the last ``k`` whose ``buf[key_lo[k]:key_hi[k]]``
    is the same bytes, in ``found[i]`` (-1: none); answers how many found none. ``table`` is
    scratch as ``distinct``'s, ``(size, 2)`` filled with -1, its size a power of two above
    ``2 * len(key_lo)``: the keys (a few hundred thousand node ids) are hashed into it once,
    then each string (a million placements' node ids) probes it, comparing bytes only where
    hashes are equal. The last of equal keys, as a dict built in key order keeps it."""
    mask = table.shape[0] - 1
    for k in range(key_lo.shape[0]):
        h = _hash(buf, key_lo[k], key_hi[k], seed)
        slot = h & mask
        while True:
            j = table[slot, 0]
            if j < 0 or (
                table[slot, 1] == h and _same(buf, key_lo[k], key_hi[k], key_lo[j], key_hi[j])
            ):
                table[slot, 0] = k
                table[slot, 1] = h
                break
            slot = (slot + 1) & mask
    missing = 0
    for i in range(lo.shape[0]):
        h = _hash(buf, lo[i], hi[i], seed)
        slot = h & mask
        found[i] = -1
        while True:
            j = table[slot, 0]
            if j < 0:
                missing += 1
                break
            if table[slot, 1] == h and _same(buf, lo[i], hi[i], key_lo[j], key_hi[j]):
                found[i] = j
                break
            slot = (slot + 1) & mask
    return missing


@inline_kernel
def _lookup(
    buf: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    table: np.ndarray,
    seed: int,
    key: np.ndarray | bytes,
    a: int,
    b: int,
) -> int:
    """The index ``j`` a ``distinct`` table (filled from ``buf[lo[i]:hi[i]]`` with ``seed``)
    holds for the bytes ``key[a:b]``, or -1 when none of its strings is those bytes: one hash
    and a probe from its slot, the bytes compared only where the hashes are equal."""
    n = b - a
    h = _hash(key, a, b, seed)
    mask = table.shape[0] - 1
    slot = h & mask
    while True:
        j = table[slot, 0]
        if j < 0:
            return -1
        if table[slot, 1] == h and hi[j] - lo[j] == n:
            start = lo[j]
            same = True
            for k in range(n):
                if buf[start + k] != key[a + k]:
                    same = False
                    break
            if same:
                found: int = j
                return found
        slot = (slot + 1) & mask


@kernel
def probe(
    buf: np.ndarray, lo: np.ndarray, hi: np.ndarray, table: np.ndarray, seed: int, key: bytes
) -> int:
    """``_lookup`` of the bytes ``key``: what a one-id lookup of a pushed state costs
    (``state.running_table.IdIndex``) instead of a dict of every id. ``key`` is the id's
    ``bytes`` as they are (a view of them as an array would cost more than the probe)."""
    return _lookup(buf, lo, hi, table, seed, key, 0, len(key))


@kernel
def probe_many(
    buf: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    table: np.ndarray,
    seed: int,
    keys: np.ndarray,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    out: np.ndarray,
) -> None:
    """``_lookup`` of each ``keys[key_lo[i]:key_hi[i]]``, its row (or -1) in ``out[i]``: one
    kernel call for a batch's ids (a Place's, a batch Admit's), not one call per id."""
    for i in range(key_lo.shape[0]):
        out[i] = _lookup(buf, lo, hi, table, seed, keys, key_lo[i], key_hi[i])


def warmup() -> None:
    """Compile (or load from the cache) every kernel here on a one-workload snapshot."""
    record = np.frombuffer(bytes([0x1A, 7, 0x0A, 3, 0x0A, 1, 0x77, 0x12, 0]), dtype=np.uint8)
    counted = walk_running(record, False, *arrays(0, 0, 0, 0))
    walk_running(record, True, *arrays(*counted[1:]))
    node = np.frombuffer(bytes([0x0A, 7, 0x0A, 1, 0x6E, 0x12, 2, 0x0A, 0]), dtype=np.uint8)
    counts = walk_nodes(node, False, *node_arrays(0, 0, 0))
    walk_nodes(node, True, *node_arrays(*counts[1:]))
    request = np.frombuffer(bytes([0x12, len(record)]) + record.tobytes(), dtype=np.uint8)
    split_push(request, np.empty_like(request))
    bounds = np.array([6], dtype=np.int64)
    join(record, bounds, bounds + 1, np.empty(2, dtype=np.uint8), 0)
    one = np.empty(1, dtype=np.int64)
    distinct(record, bounds, bounds + 1, one, np.full((2, 2), -1, np.int64), SEED, one.copy())
    find(record, bounds, bounds + 1, bounds, bounds + 1, np.full((4, 2), -1, np.int64), SEED, one)
    probe(record, bounds, bounds + 1, np.full((2, 2), -1, np.int64), SEED, b"w")
    key = np.frombuffer(b"w", dtype=np.uint8)
    starts = np.zeros(1, dtype=np.int64)
    probe_many(
        record,
        bounds,
        bounds + 1,
        np.full((2, 2), -1, np.int64),
        SEED,
        key,
        starts,
        starts + 1,
        one,
    )


def arrays(
    rows: int, entries: int, placements: int, devices: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Output arrays for ``walk_running`` of the counts a first call answered: field by
    record (``rows[ID_LO]`` is every record's id start), so that each field is a contiguous
    column its readers take as it is, without a copy."""
    return (
        np.empty((ROW_FIELDS, rows), dtype=np.int64),
        np.empty((ENTRY_FIELDS, entries), dtype=np.int64),
        np.empty((PLACEMENT_FIELDS, placements), dtype=np.int64),
        np.empty(devices, dtype=np.int64),
    )
