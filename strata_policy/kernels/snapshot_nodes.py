"""A ``Snapshot``'s nodes read from its wire bytes as columns (``walk_nodes``).

Per ``Node`` record (a ``Snapshot``'s field 1), ``walk_nodes`` writes the byte bounds of its
``id`` and ``gpu_model``, ``unschedulable``, and its ``capacity`` (name bounds, amount) and
``labels`` (name and value bounds) entries, as ``kernels.snapshot_running`` reads running
workloads: called to count, then to ``fill`` arrays of those counts (or of a guess, walked
again only when a count passes it). It declines what the readers of ``kernels.snapshot_wire``
decline, and a map naming a key twice (protobuf keeps the last).
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
    NOT_UTF8,
    OK,
    REPEATED_KEY,
    UNKNOWN_FIELD,
    VALUE,
    is_utf8,
    read_entry,
    read_span,
    read_varint,
)

# Columns of ``walk_nodes``'s ``rows`` (one row per node), ``caps`` and ``labels``.
N_ID_LO, N_ID_HI, N_MODEL_LO, N_MODEL_HI, N_UNSCHEDULABLE = range(5)
N_CAP_START, N_CAP_COUNT, N_LABEL_START, N_LABEL_COUNT = range(5, 9)
NODE_FIELDS = 9
VALUE_LO, VALUE_HI = 2, 3  # a label's value bounds (KEY_LO, KEY_HI as for entries)
LABEL_FIELDS = 4


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
        tag, pos = read_varint(buf, pos, end)
        if pos < 0:
            return MALFORMED, 0, 0, 0
        if tag & 7 != 2 or tag >> 3 < 1 or tag >> 3 > 3:
            return UNKNOWN_FIELD, 0, 0, 0
        lo, hi = read_span(buf, pos, end)
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
            tag, at = read_varint(buf, at, hi)
            if at < 0:
                return MALFORMED, 0, 0, 0
            if tag == 0x20:  # unschedulable
                value, at = read_varint(buf, at, hi)
                if at < 0:
                    return MALFORMED, 0, 0, 0
                unschedulable = 1 if value != 0 else 0
                continue
            if tag & 7 != 2 or tag >> 3 < 1 or tag >> 3 == 4 or tag >> 3 > 5:
                return UNKNOWN_FIELD, 0, 0, 0
            s_lo, s_hi = read_span(buf, at, hi)
            if s_lo < 0:
                return MALFORMED, 0, 0, 0
            at = s_hi
            field = tag >> 3
            if field == 1 or field == 5:  # noqa: PLR1714  # numba: no set literals
                if not is_utf8(buf, s_lo, s_hi):
                    return NOT_UTF8, 0, 0, 0
                if field == 1:
                    id_lo, id_hi = s_lo, s_hi
                else:
                    model_lo, model_hi = s_lo, s_hi
                continue
            status, key_lo, key_hi, a, b = read_entry(buf, s_lo, s_hi, field == 3)
            if status != OK:
                return status, 0, 0, 0
            if field == 2:
                if writing and n_caps >= caps.shape[0]:
                    writing = False
                if writing:
                    for k in range(cap_start, n_caps):
                        if same_bytes(buf, key_lo, key_hi, caps[k, KEY_LO], caps[k, KEY_HI]):
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
                        if same_bytes(buf, key_lo, key_hi, labels[k, KEY_LO], labels[k, KEY_HI]):
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


def warmup() -> None:
    """Compile (or load from the cache) ``walk_nodes`` on a one-node snapshot, counting and
    filling."""
    node = np.frombuffer(bytes([0x0A, 7, 0x0A, 1, 0x6E, 0x12, 2, 0x0A, 0]), dtype=np.uint8)
    counts = walk_nodes(node, False, *node_arrays(0, 0, 0))
    walk_nodes(node, True, *node_arrays(*counts[1:]))
