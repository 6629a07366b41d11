"""A ``Snapshot``'s running workloads read from its wire bytes as columns (``walk_running``).

``walk_running`` reads a ``Snapshot``'s field 3 (``RunningWorkload``) records and writes, per
record, the byte bounds of the record and of its workload's ``id``, ``scope_id`` and
``gpu_model``, its ``replicas`` and ``admitted_at_ms``, its ``request`` entries (name bounds
and amount) and its placements (node id bounds and GPU devices). Fields the columns do not
need (priority, preemptible, selector, spread, queue time) are stepped over: a workload is made
from its record's bytes by protobuf itself when a caller needs one. Every string of a record
is checked to be UTF-8 (protobuf refuses a message holding one that is not), so that records
the walk accepts are records protobuf parses.

Besides what every reader of ``kernels.snapshot_wire`` declines, it declines a ``workload``
given twice (protobuf would merge the two), a request map that names a resource twice or has
an entry without a name, a placement naming a device twice or a negative one (the columns pad
with -1), a record without a workload. ``gpu_devices`` may be packed or not, in pieces, as
protobuf reads them.

With ``fill`` false the kernel only counts (records, request entries, placements, devices).
With ``fill`` true it writes while every array has room, and past that only counts: the caller
sizes the arrays from a bound it knows (``split_push`` counts the records exactly) and walks the
bytes once; only when a count passes its array's length does it size them exactly and walk
again. The walk of nodes (``kernels.snapshot_nodes``) does the same.
"""

from __future__ import annotations

import numpy as np

from strata_policy.kernels.byte_strings import same_bytes
from strata_policy.kernels.config import kernel
from strata_policy.kernels.snapshot_wire import (
    ENTRY_FIELDS,
    KEY_HI,
    KEY_LO,
    MALFORMED,
    MERGED,
    NEGATIVE_DEVICE,
    NO_WORKLOAD,
    NOT_UTF8,
    OK,
    REPEATED_DEVICE,
    REPEATED_KEY,
    UNKNOWN_FIELD,
    VALUE,
    as_int32,
    is_utf8,
    read_entry,
    read_span,
    read_varint,
    strings_utf8,
)

# Fields of ``rows`` (``rows[ID_LO, i]``: running workload i's id start; see ``arrays``).
RW_LO, RW_HI, ID_LO, ID_HI, SCOPE_LO, SCOPE_HI, MODEL_LO, MODEL_HI = range(8)
REPLICAS, ADMITTED, REQ_START, REQ_COUNT, PL_START, PL_COUNT = range(8, 14)
ROW_FIELDS = 14
# Fields of ``placements``, field by record as ``rows`` (``entries``: ``snapshot_wire.KEY_LO``...).
NODE_LO, NODE_HI, DEV_START, DEV_COUNT = range(4)
PLACEMENT_FIELDS = 4


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
        tag, pos = read_varint(buf, pos, end)
        if pos < 0:
            return MALFORMED, 0, 0, 0, 0
        field, wire = tag >> 3, tag & 7
        if wire != 2 or field < 1 or field > 3:
            return UNKNOWN_FIELD, 0, 0, 0, 0
        lo, hi = read_span(buf, pos, end)
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
            tag, at = read_varint(buf, at, hi)
            if at < 0:
                return MALFORMED, 0, 0, 0, 0
            field, wire = tag >> 3, tag & 7
            if field == 3 and wire == 0:
                admitted, at = read_varint(buf, at, hi)
                if at < 0:
                    return MALFORMED, 0, 0, 0, 0
                continue
            if wire != 2 or field < 1 or field > 2:
                return UNKNOWN_FIELD, 0, 0, 0, 0
            m_lo, m_hi = read_span(buf, at, hi)
            if m_lo < 0:
                return MALFORMED, 0, 0, 0, 0
            at = m_hi
            if field == 1:  # the Workload
                if seen_workload:
                    return MERGED, 0, 0, 0, 0
                seen_workload = True
                w = m_lo
                while w < m_hi:
                    tag, w = read_varint(buf, w, m_hi)
                    if w < 0:
                        return MALFORMED, 0, 0, 0, 0
                    field, wire = tag >> 3, tag & 7
                    scalar = field == 4 or field == 5 or field == 6 or field == 10  # noqa: PLR1714  # numba: no set literals
                    if scalar and wire == 0:
                        value, w = read_varint(buf, w, m_hi)
                        if field == 4:
                            replicas = as_int32(value)
                    elif scalar or wire != 2 or field < 1 or field > 9:
                        return UNKNOWN_FIELD, 0, 0, 0, 0
                    else:
                        s_lo, s_hi = read_span(buf, w, m_hi)
                        if s_lo < 0:
                            return MALFORMED, 0, 0, 0, 0
                        w = s_hi
                        if field == 7 or field == 9:  # noqa: PLR1714  # numba: no set literals
                            # node_selector entries, spread: read by protobuf, their strings
                            # checked here (protobuf refuses a message with one not UTF-8)
                            status = strings_utf8(buf, s_lo, s_hi, 2 if field == 7 else 1)
                            if status != OK:
                                return status, 0, 0, 0, 0
                        elif field != 3 and not is_utf8(buf, s_lo, s_hi):
                            return NOT_UTF8, 0, 0, 0, 0
                        if field == 1:
                            id_lo, id_hi = s_lo, s_hi
                        elif field == 2:
                            scope_lo, scope_hi = s_lo, s_hi
                        elif field == 8:
                            model_lo, model_hi = s_lo, s_hi
                        elif field == 3:  # a request map entry
                            status, key_lo, key_hi, amount, _ = read_entry(buf, s_lo, s_hi, False)
                            if status != OK:
                                return status, 0, 0, 0, 0
                            if writing and n_entries >= entries.shape[1]:
                                writing = False
                            if writing:
                                for k in range(req_start, n_entries):
                                    other_lo, other_hi = entries[KEY_LO, k], entries[KEY_HI, k]
                                    if same_bytes(buf, key_lo, key_hi, other_lo, other_hi):
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
                    tag, p = read_varint(buf, p, m_hi)
                    if p < 0:
                        return MALFORMED, 0, 0, 0, 0
                    if tag == 0x0A:
                        node_lo, node_hi = read_span(buf, p, m_hi)
                        if node_lo < 0:
                            return MALFORMED, 0, 0, 0, 0
                        if not is_utf8(buf, node_lo, node_hi):
                            return NOT_UTF8, 0, 0, 0, 0
                        p = node_hi
                    elif tag == 0x10:
                        value, p = read_varint(buf, p, m_hi)
                        if p < 0:
                            return MALFORMED, 0, 0, 0, 0
                        if writing and n_devices >= devices.shape[0]:
                            writing = False
                        if writing:
                            devices[n_devices] = as_int32(value)
                        n_devices += 1
                    elif tag == 0x12:  # packed
                        p, packed_end = read_span(buf, p, m_hi)
                        if p < 0:
                            return MALFORMED, 0, 0, 0, 0
                        while p < packed_end:
                            value, p = read_varint(buf, p, packed_end)
                            if p < 0:
                                return MALFORMED, 0, 0, 0, 0
                            if writing and n_devices >= devices.shape[0]:
                                writing = False
                            if writing:
                                devices[n_devices] = as_int32(value)
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


def warmup() -> None:
    """Compile (or load from the cache) ``walk_running`` on a one-workload snapshot, counting
    and filling."""
    record = np.frombuffer(bytes([0x1A, 7, 0x0A, 3, 0x0A, 1, 0x77, 0x12, 0]), dtype=np.uint8)
    counted = walk_running(record, False, *arrays(0, 0, 0, 0))
    walk_running(record, True, *arrays(*counted[1:]))
