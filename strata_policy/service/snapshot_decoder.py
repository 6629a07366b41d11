"""A pushed ``Snapshot``'s running workloads and nodes as columns (``state.running_columns``,
``state.node_columns``), read from the message's wire bytes by the kernels of
``kernels.snapshot_wire`` (the request's split), ``kernels.snapshot_running`` and
``kernels.snapshot_nodes`` (the walks) rather than one message object at a time.

The PushSnapshot handler gets its request as bytes (``decode_push``, its gRPC deserializer):
protobuf parses the request less its running workloads (nodes, scopes, ids, flags, unknown
fields), and the running workloads are read from the request's own bytes, so that protobuf's
million message objects are never built. Only bytes the kernel walks whole (every record
well-formed, every string UTF-8: what protobuf would parse) are kept as bytes; any other
request is parsed whole by protobuf, which refuses it with its own error where it is malformed.

Converting a million ``RunningWorkload`` messages one by one (a ``Workload``, a
``RunningWorkload``, placements and dicts each) was four fifths of PushSnapshot. Here the
snapshot is serialized once (protobuf, in C), its running workloads are walked by a kernel into
arrays of byte bounds and numbers, the strings the state keys on (ids, scope and node ids,
resource names, GPU models) are decoded in a handful of bulk steps, and each row keeps its own
bytes: ``make`` parses them and converts them with the plain function when a workload is read,
so a made workload is the plain path's value by construction. Whatever the kernel cannot read
exactly as protobuf does gets ``None`` and the caller converts the plain way
(``tests/test_snapshot_columns.py`` proves the columns equal to protobuf's reading).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from google.protobuf.message import DecodeError
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.kernels import byte_strings
from strata_policy.kernels import snapshot_nodes as node_walk
from strata_policy.kernels import snapshot_running as running_walk
from strata_policy.kernels import snapshot_wire as wire
from strata_policy.model import Node, RunningWorkload, Scope
from strata_policy.service import wire_strings
from strata_policy.service.running_rows import RowMaker, varint
from strata_policy.state.matrix_build import columns_of
from strata_policy.state.node_columns import NodeColumns
from strata_policy.state.running_columns import RunningColumns
from strata_policy.state.running_table import IdIndex

_SNAPSHOT_KEY = b"\x12"  # PushSnapshotRequest.snapshot: field 2, length-delimited
Counts = tuple[int, int, int, int, int]  # walk_running's first answer
NodeCounts = tuple[int, int, int, int]  # walk_nodes's
Running = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # walk_running's arrays, filled
NodeArrays = tuple[np.ndarray, np.ndarray, np.ndarray]  # walk_nodes's
# What decode_push's one walk sizes the arrays for, per record (a count past one of them walks
# the records again with arrays of the counts): request entries, placements and devices per
# workload, capacity and label entries per node. Arrays are allocated, not touched, past what
# the walk writes, so a generous guess costs address space, not resident memory.
_ENTRIES, _PLACEMENTS, _DEVICES, _CAPS, _LABELS = 8, 8, 16, 16, 32
_FILL_ONLY = frozenset((wire.REPEATED_KEY, wire.REPEATED_DEVICE, wire.NEGATIVE_DEVICE))


@dataclass(frozen=True, slots=True)
class DecodedPush:
    """A PushSnapshot request as its handler gets it. ``message`` is the request, less its
    nodes and running workloads when ``body`` holds them: then ``body`` is the bytes of the
    ``Snapshot`` whose node and running workload records the kernels walked whole
    (``nodes_counted``, ``running_counted``: their answers; ``nodes_walked``,
    ``running_walked``: the arrays that walk filled, or ``None`` when it only counted, and
    the columns walk the bytes again). ``body`` is ``None`` when
    ``message`` is the whole request. ``node_count`` and ``workload_count`` are the request's
    either way. ``raw`` is the request as sent, for the digest that checks a reused
    ``request_id``. ``cluster_id``, ``request_id`` and ``dry_run`` are the message's, for the
    call gate, which reads them from any request (logging, auth)."""

    message: svc.PushSnapshotRequest
    node_count: int
    workload_count: int
    body: bytes | None = field(default=None, repr=False)
    nodes_counted: NodeCounts | None = field(default=None, repr=False)
    running_counted: Counts | None = field(default=None, repr=False)
    nodes_walked: NodeArrays | None = field(default=None, repr=False, compare=False)
    running_walked: Running | None = field(default=None, repr=False, compare=False)
    raw: bytes = field(default=b"", repr=False, compare=False)

    @property
    def cluster_id(self) -> str:
        """The request's cluster."""
        return self.message.cluster_id

    @property
    def request_id(self) -> str:
        """The request's idempotency id."""
        return self.message.request_id

    @property
    def dry_run(self) -> bool:
        """Whether the request asks for a dry run."""
        return self.message.dry_run


def decode_push(
    raw: bytes, max_nodes: int = sys.maxsize, max_workloads: int = sys.maxsize
) -> DecodedPush:
    """A serialized ``PushSnapshotRequest``, split as ``DecodedPush`` says.

    Raises protobuf's ``DecodeError`` exactly where ``PushSnapshotRequest.FromString`` would
    (gRPC's call gate then answers as for any request it cannot deserialize). The nodes and
    running workloads are walked once, into arrays sized by their exact record counts
    (``split_push``'s), only when those are within ``max_nodes`` and ``max_workloads`` (the
    server's limits): past them the kernels only count, and the handler refuses the request
    on those counts before anything is sized by them."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    kept = np.empty_like(buf)  # pages are touched only as far as the copy writes
    split = wire.split_push(buf, kept)
    if split[0] == wire.OK:
        _, tag_lo, snap_lo, snap_hi, used, nodes, running = split
        body = raw[snap_lo:snap_hi] if nodes or running else b""
        walked = np.frombuffer(body, dtype=np.uint8)
        nodes_counted, nodes_walked = _walk_nodes(walked, nodes if nodes <= max_nodes else -1)
        running_counted: Counts | None = None
        running_walked: Running | None = None
        if nodes_counted[0] == wire.OK:
            running_counted, running_walked = _walk_running(
                walked, running if running <= max_workloads else -1
            )
        if nodes_counted[0] == wire.OK and running_counted and running_counted[0] == wire.OK:
            light = raw
            if body:  # the snapshot field again, holding its scopes only
                head = (raw[:tag_lo], _SNAPSHOT_KEY, varint(used), kept[:used].tobytes())
                light = b"".join((*head, raw[snap_hi:]))
            try:
                message = svc.PushSnapshotRequest.FromString(light)
            except DecodeError:
                pass  # protobuf decides on the whole request, below
            else:
                return DecodedPush(
                    message,
                    nodes,
                    running,
                    body,
                    nodes_counted,
                    running_counted,
                    nodes_walked=nodes_walked,
                    running_walked=running_walked,
                    raw=raw,
                )
    message = svc.PushSnapshotRequest.FromString(raw)
    snap = message.snapshot
    return DecodedPush(message, len(snap.nodes), len(snap.workloads), raw=raw)


def _walk_running(buf: np.ndarray, records: int) -> tuple[Counts, Running | None]:
    """``walk_running``'s answer for ``buf`` and, when ``records`` (the exact record count; -1:
    count only) is given and every count fits the arrays sized from it, the arrays it filled,
    cut to the counts. A status only writing finds (a repeated key or device) stopped the walk
    where it found it: the whole is then counted, as a walk that only counts answers."""
    if records < 0:
        return running_walk.walk_running(buf, False, *running_walk.arrays(0, 0, 0, 0)), None
    out = running_walk.arrays(
        records, _ENTRIES * records, _PLACEMENTS * records, _DEVICES * records
    )
    counted = running_walk.walk_running(buf, True, *out)
    if counted[0] in _FILL_ONLY:
        return running_walk.walk_running(buf, False, *running_walk.arrays(0, 0, 0, 0)), None
    _, n, entries, placements, devices = counted
    sizes = (out[0].shape[1], out[1].shape[1], out[2].shape[1], out[3].shape[0])
    if counted[0] != wire.OK or any(c > s for c, s in zip(counted[1:], sizes, strict=True)):
        return counted, None
    rows = out[0] if n == records else out[0][:, :n]
    return counted, (rows, out[1][:, :entries], out[2][:, :placements], out[3][:devices])


def _walk_nodes(buf: np.ndarray, records: int) -> tuple[NodeCounts, NodeArrays | None]:
    """``walk_nodes``'s answer and arrays as ``_walk_running``'s."""
    if records < 0:
        return node_walk.walk_nodes(buf, False, *node_walk.node_arrays(0, 0, 0)), None
    out = node_walk.node_arrays(records, _CAPS * records, _LABELS * records)
    counted = node_walk.walk_nodes(buf, True, *out)
    if counted[0] in _FILL_ONLY:
        return node_walk.walk_nodes(buf, False, *node_walk.node_arrays(0, 0, 0)), None
    status, n, caps, labels = counted
    sizes = (out[0].shape[0], out[1].shape[0], out[2].shape[0])
    if status != wire.OK or any(c > s for c, s in zip(counted[1:], sizes, strict=True)):
        return counted, None
    return counted, (out[0][:n], out[1][:caps], out[2][:labels])


def running_columns(
    m: pb.Snapshot,
    nodes: Sequence[Node],
    scopes: tuple[Scope, ...],
    convert: Callable[[pb.RunningWorkload], RunningWorkload],
) -> RunningColumns | None:
    """``m``'s running workloads as columns over ``nodes`` and ``scopes`` (the same message's,
    converted), each made by ``convert`` of its own bytes; ``None`` when the kernel cannot
    read them exactly (``kernels.snapshot_running``) or a string is not UTF-8."""
    return columns_from_bytes(m.SerializeToString(), nodes, scopes, convert)


def columns_from_bytes(
    buf: bytes,
    nodes: Sequence[Node],
    scopes: tuple[Scope, ...],
    convert: Callable[[pb.RunningWorkload], RunningWorkload],
    counted: Counts | None = None,
    walked: Running | None = None,
) -> RunningColumns | None:
    """``running_columns`` of a serialized ``Snapshot`` (``counted``: the kernel's first
    answer for these bytes, when the caller has it; ``walked``: the arrays a walk of them
    filled, as ``decode_push`` answers them).

    The arrays made here are sized by what the request names (its resources, the devices of its
    widest placement), so what no node could hold goes to the plain path, which refuses it with
    the field that is wrong, before any array is sized by it: a resource no node has, or a
    placement naming more devices than the widest node has."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    if walked is None:
        if counted is None:
            counted = running_walk.walk_running(raw, False, *running_walk.arrays(0, 0, 0, 0))
        if counted[0] != wire.OK:
            return None
        walked = running_walk.arrays(*counted[1:])
        if running_walk.walk_running(raw, True, *walked)[0] != wire.OK:
            return None
    rows, entries, placements, devices = walked
    try:
        scope_code, scope_ids = wire_strings.distinct(
            raw, buf, rows[running_walk.SCOPE_LO], rows[running_walk.SCOPE_HI]
        )
        model_code, models = wire_strings.distinct(
            raw, buf, rows[running_walk.MODEL_LO], rows[running_walk.MODEL_HI]
        )
        key_code, keys = wire_strings.distinct(raw, buf, entries[wire.KEY_LO], entries[wire.KEY_HI])
    except UnicodeDecodeError:
        return None
    placed = _placed_nodes(raw, buf, placements, nodes)
    if type(nodes) is NodeColumns:  # what the nodes' columns already know
        known: frozenset[str] | set[str] = nodes.listed
        widest = nodes.widest
    else:
        known = {name for x in nodes for name in x.capacity}
        widest = max((x.gpu_devices for x in nodes), default=0)
    if (
        not known.issuperset(keys)
        or int(placements[running_walk.DEV_COUNT].max(initial=0)) > widest
    ):
        return None
    n = rows.shape[1]
    resources = tuple(sorted(keys))
    column = np.array([resources.index(k) for k in keys], dtype=np.int64)
    request = np.zeros((n, len(resources)), dtype=np.int64)
    entry_row = np.repeat(np.arange(n, dtype=np.int64), rows[running_walk.REQ_COUNT])
    request[entry_row, column[key_code]] = entries[wire.VALUE]
    # one row made from its bytes, or every pending row in bulk (``service.running_rows``);
    # ``rows`` is sized by the records, so its fields are kept as they are, without a copy
    make = RowMaker(
        buf,
        rows[running_walk.RW_LO],
        rows[running_walk.RW_HI],
        convert,
        entries=rows[running_walk.REQ_COUNT].astype(np.int32),
        device_count=placements[running_walk.DEV_COUNT].astype(np.int32),
        node_ids=placed[1],
        node_code=placed[0].astype(np.int32),
    )

    id_lo, id_hi = rows[running_walk.ID_LO], rows[running_walk.ID_HI]
    id_table = wire_strings.distinct_table(raw, id_lo, id_hi)  # kept: it finds ids later
    return RunningColumns(
        nodes=nodes,
        scopes=scopes,
        ids=partial(
            wire_strings.strings, raw, buf, rows[running_walk.ID_LO], rows[running_walk.ID_HI]
        ),
        id_bytes=rows[running_walk.ID_HI] - rows[running_walk.ID_LO],
        scope=wire_strings.index(scope_ids, {s.id: i for i, s in enumerate(scopes)})[scope_code],
        replicas=np.where(
            rows[running_walk.REPLICAS] == 0, 1, rows[running_walk.REPLICAS]
        ),  # 0: unset
        admitted_at_ms=rows[running_walk.ADMITTED],
        resources=resources,
        request=request,
        gpu_models=tuple(models),
        gpu_model=model_code,
        placement_start=rows[running_walk.PL_START],
        placement_count=rows[running_walk.PL_COUNT],
        placement_node=placed[2],
        devices=_padded(placements, devices),
        make=make,
        distinct_ids=id_table is not None,
        id_index=None if id_table is None else IdIndex(raw, id_lo, id_hi, id_table),
    )


def _placed_nodes(
    raw: np.ndarray, buf: bytes, placements: np.ndarray, nodes: Sequence[Node]
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Each placement's node id as a code into a list of ids, the list, and the node's index
    in ``nodes`` (-1: none of them; the last of a repeated id, as a dict of them keeps it).
    Nodes read from the same bytes are found by their ids' bytes (``kernels.byte_strings
    .find``: a table of the nodes' ids, not of the million placements' ones), every id then
    coded by its node's index; otherwise, or when a placement names no node, the distinct ids
    are decoded and looked up."""
    lo = np.ascontiguousarray(placements[running_walk.NODE_LO])
    hi = np.ascontiguousarray(placements[running_walk.NODE_HI])
    if type(nodes) is NodeColumns and nodes.id_bytes is not None and nodes.id_bytes[0] is buf:
        _, key_lo, key_hi = nodes.id_bytes
        found = np.empty(lo.shape[0], dtype=np.int64)
        table = wire_strings.table(1 << (2 * max(key_lo.shape[0], 1)).bit_length())
        if byte_strings.find(raw, lo, hi, key_lo, key_hi, table, byte_strings.SEED, found) == 0:
            return found, nodes.ids, found
    node_code, node_ids = wire_strings.distinct(raw, buf, lo, hi)
    if type(nodes) is NodeColumns:
        node_at = nodes.node_index
    else:
        node_at = {x.id: i for i, x in enumerate(nodes)}
    return node_code, node_ids, wire_strings.index(node_ids, node_at)[node_code]


def nodes_from_bytes(
    buf: bytes, counted: NodeCounts | None, walked: NodeArrays | None = None
) -> NodeColumns | None:
    """The nodes of a serialized ``Snapshot`` as columns (``state.node_columns``), equal to
    ``convert.node_from_proto`` of each of its parsed nodes; ``None`` when the kernel declines
    them (``kernels.snapshot_nodes``).

    Read in bulk from the kernel's columns: the strings decoded in a few steps, one capacity
    dict per distinct capacity and one labels dict per distinct set of labels (shared, as
    ``convert.shared_request`` shares them: the model's dicts are never mutated); each
    ``Node`` is made from them when it is read."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    if walked is None:
        if counted is None:
            counted = node_walk.walk_nodes(raw, False, *node_walk.node_arrays(0, 0, 0))
        if counted[0] != wire.OK:
            return None
        walked = node_walk.node_arrays(*counted[1:])
        if node_walk.walk_nodes(raw, True, *walked)[0] != wire.OK:
            return None
    rows, caps, labels = walked
    n = rows.shape[0]
    ids = wire_strings.strings(raw, buf, rows[:, node_walk.N_ID_LO], rows[:, node_walk.N_ID_HI])
    model_code, models = wire_strings.distinct(
        raw, buf, rows[:, node_walk.N_MODEL_LO], rows[:, node_walk.N_MODEL_HI]
    )
    cap_key, cap_names = wire_strings.distinct(raw, buf, caps[:, wire.KEY_LO], caps[:, wire.KEY_HI])
    amounts, amount_code = np.unique(caps[:, wire.VALUE], return_inverse=True)
    cap_row = np.repeat(np.arange(n), rows[:, node_walk.N_CAP_COUNT])
    capacity = wire_strings.maps(
        cap_row,
        n,
        cap_key,
        cap_names,
        amount_code.reshape(-1),
        amounts.tolist(),
        sort=True,
    )
    label_key, label_names = wire_strings.distinct(
        raw, buf, labels[:, wire.KEY_LO], labels[:, wire.KEY_HI]
    )
    value_code, values = wire_strings.distinct(
        raw, buf, labels[:, node_walk.VALUE_LO], labels[:, node_walk.VALUE_HI]
    )
    node_labels = wire_strings.maps(
        np.repeat(np.arange(n), rows[:, node_walk.N_LABEL_COUNT]),
        n,
        label_key,
        label_names,
        value_code,
        values,
        sort=False,
    )
    names = columns_of(set(cap_names))
    column = np.array([names.index(r) for r in cap_names], dtype=np.int64)
    matrix = np.zeros((n, len(names)), dtype=np.int64)
    matrix[np.repeat(np.arange(n), rows[:, node_walk.N_CAP_COUNT]), column[cap_key]] = caps[
        :, wire.VALUE
    ]
    ordered = tuple(sorted({*models, ""}))
    recode = np.array([ordered.index(m) for m in models], dtype=np.int64)
    return NodeColumns(
        ids=ids,
        capacities=capacity,
        labels=node_labels,
        unschedulable=(rows[:, node_walk.N_UNSCHEDULABLE] != 0).tolist(),
        wire_models=models,
        wire_model=model_code.tolist(),
        listed=frozenset(cap_names),
        capacity=matrix,
        models=ordered,
        model_code=recode[model_code],
        id_bytes=(buf, rows[:, node_walk.N_ID_LO].copy(), rows[:, node_walk.N_ID_HI].copy()),
    )


def _padded(placements: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Each placement's devices in a row, -1 padded to the widest (at least one column)."""
    start = placements[running_walk.DEV_START]
    count = placements[running_walk.DEV_COUNT]
    width = max(int(count.max()) if count.size else 1, 1)
    out = np.full((placements.shape[1], width), -1, dtype=np.int64)
    for j in range(width):
        has = count > j
        out[has, j] = devices[start[has] + j]
    return out
