"""A pushed ``Snapshot``'s running workloads as columns (``state.running_columns``), read from
the message's wire bytes by ``kernels.snapshot_wire`` rather than one message object at a time.

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

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np
from google.protobuf.message import DecodeError
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.kernels import snapshot_wire as wire
from strata_policy.model import Node, RunningWorkload, Scope
from strata_policy.state.running_columns import RunningColumns

_SEPARATOR = 0
_SNAPSHOT_KEY = b"\x12"  # PushSnapshotRequest.snapshot: field 2, length-delimited
Counts = tuple[int, int, int, int, int]  # walk_running's first answer


@dataclass(frozen=True, slots=True)
class DecodedPush:
    """A PushSnapshot request as its handler gets it. ``message`` is the request, less its
    running workloads when ``running`` holds them: then ``running`` is the bytes of a
    ``Snapshot`` whose records the kernel walked whole (``counted``: its first answer) and
    ``workload_count`` the number of them. ``running`` is ``None`` when ``message`` is the
    whole request. ``raw`` is the request as sent, for the digest that checks a reused
    ``request_id``. ``cluster_id``, ``request_id`` and ``dry_run`` are the message's, for the
    call gate, which reads them from any request (logging, auth)."""

    message: svc.PushSnapshotRequest
    workload_count: int
    running: bytes | None = field(default=None, repr=False)
    counted: Counts | None = field(default=None, repr=False)
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


def decode_push(raw: bytes) -> DecodedPush:
    """A serialized ``PushSnapshotRequest``, split as ``DecodedPush`` says.

    Raises protobuf's ``DecodeError`` exactly where ``PushSnapshotRequest.FromString`` would
    (gRPC's call gate then answers as for any request it cannot deserialize). Nothing here is
    sized by the request's counts: the kernel only walks and counts, and the handler checks the
    counts against the limits before the columns are allocated."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    kept = np.empty_like(buf)  # pages are touched only as far as the copy writes
    split = wire.split_push(buf, kept)
    if split[0] == wire.OK:
        _, tag_lo, snap_lo, snap_hi, used, count = split
        running = raw[snap_lo:snap_hi] if count else b""
        counted = wire.walk_running(
            np.frombuffer(running, dtype=np.uint8), False, *wire.arrays(0, 0, 0, 0)
        )
        if counted[0] == wire.OK:
            light = raw
            if count:  # the snapshot field again, holding its nodes and scopes only
                head = (raw[:tag_lo], _SNAPSHOT_KEY, _varint(used), kept[:used].tobytes())
                light = b"".join((*head, raw[snap_hi:]))
            try:
                message = svc.PushSnapshotRequest.FromString(light)
            except DecodeError:
                pass  # protobuf decides on the whole request, below
            else:
                return DecodedPush(message, count, running, counted, raw)
    message = svc.PushSnapshotRequest.FromString(raw)
    return DecodedPush(message, len(message.snapshot.workloads), raw=raw)


def _varint(value: int) -> bytes:
    """``value`` (non-negative) as a varint."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def running_columns(
    m: pb.Snapshot,
    nodes: tuple[Node, ...],
    scopes: tuple[Scope, ...],
    convert: Callable[[pb.RunningWorkload], RunningWorkload],
) -> RunningColumns | None:
    """``m``'s running workloads as columns over ``nodes`` and ``scopes`` (the same message's,
    converted), each made by ``convert`` of its own bytes; ``None`` when the kernel cannot
    read them exactly (``kernels.snapshot_wire``) or a string is not UTF-8."""
    return columns_from_bytes(m.SerializeToString(), nodes, scopes, convert)


def columns_from_bytes(
    buf: bytes,
    nodes: tuple[Node, ...],
    scopes: tuple[Scope, ...],
    convert: Callable[[pb.RunningWorkload], RunningWorkload],
    counted: Counts | None = None,
) -> RunningColumns | None:
    """``running_columns`` of a serialized ``Snapshot`` (``counted``: the kernel's first
    answer for these bytes, when the caller has it).

    The arrays made here are sized by what the request names (its resources, the devices of its
    widest placement), so what no node could hold goes to the plain path, which refuses it with
    the field that is wrong, before any array is sized by it: a resource no node has, or a
    placement naming more devices than the widest node has."""
    raw = np.frombuffer(buf, dtype=np.uint8)
    if counted is None:
        counted = wire.walk_running(raw, False, *wire.arrays(0, 0, 0, 0))
    if counted[0] != wire.OK:
        return None
    rows, entries, placements, devices = wire.arrays(*counted[1:])
    if wire.walk_running(raw, True, rows, entries, placements, devices)[0] != wire.OK:
        return None
    try:
        ids = _strings(raw, buf, rows[:, wire.ID_LO], rows[:, wire.ID_HI])
        scope_code, scope_ids = _distinct(raw, buf, rows[:, wire.SCOPE_LO], rows[:, wire.SCOPE_HI])
        model_code, models = _distinct(raw, buf, rows[:, wire.MODEL_LO], rows[:, wire.MODEL_HI])
        key_code, keys = _distinct(raw, buf, entries[:, wire.KEY_LO], entries[:, wire.KEY_HI])
        node_code, node_ids = _distinct(
            raw, buf, placements[:, wire.NODE_LO], placements[:, wire.NODE_HI]
        )
    except UnicodeDecodeError:
        return None
    known = {name for x in nodes for name in x.capacity}
    widest = max((x.gpu_devices for x in nodes), default=0)
    if not known.issuperset(keys) or int(placements[:, wire.DEV_COUNT].max(initial=0)) > widest:
        return None
    n = len(ids)
    resources = tuple(sorted(keys))
    column = np.array([resources.index(k) for k in keys], dtype=np.int64)
    request = np.zeros((n, len(resources)), dtype=np.int64)
    entry_row = np.repeat(np.arange(n, dtype=np.int64), rows[:, wire.REQ_COUNT])
    request[entry_row, column[key_code]] = entries[:, wire.VALUE]
    lo, hi = rows[:, wire.RW_LO].copy(), rows[:, wire.RW_HI].copy()

    def make(i: int) -> RunningWorkload:
        return convert(pb.RunningWorkload.FromString(buf[int(lo[i]) : int(hi[i])]))

    return RunningColumns(
        nodes=nodes,
        scopes=scopes,
        ids=ids,
        id_bytes=rows[:, wire.ID_HI] - rows[:, wire.ID_LO],
        scope=_index(scope_ids, {s.id: i for i, s in enumerate(scopes)})[scope_code],
        replicas=np.where(rows[:, wire.REPLICAS] == 0, 1, rows[:, wire.REPLICAS]),  # 0: unset
        admitted_at_ms=rows[:, wire.ADMITTED].copy(),
        resources=resources,
        request=request,
        gpu_models=tuple(models),
        gpu_model=model_code,
        placement_start=rows[:, wire.PL_START].copy(),
        placement_count=rows[:, wire.PL_COUNT].copy(),
        placement_node=_index(node_ids, {x.id: i for i, x in enumerate(nodes)})[node_code],
        devices=_padded(placements, devices),
        make=make,
    )


def _strings(raw: np.ndarray, buf: bytes, lo: np.ndarray, hi: np.ndarray) -> list[str]:
    """``buf[lo[i]:hi[i]]`` decoded, for each ``i``: joined by the kernel and split once, or
    one by one when a string holds the separator."""
    if not lo.shape[0]:
        return []
    lo, hi = np.ascontiguousarray(lo), np.ascontiguousarray(hi)
    out = np.empty(int((hi - lo).sum()) + lo.shape[0], dtype=np.uint8)
    used = wire.join(raw, lo, hi, out, _SEPARATOR)
    if used >= 0:
        return out[:used].tobytes().decode().split(chr(_SEPARATOR))
    return [buf[a:b].decode() for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]


def _distinct(
    raw: np.ndarray, buf: bytes, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Each string's number among the distinct ones (``kernels.snapshot_wire.distinct``) and
    the distinct strings in that order, decoded: a few hundred strings, not a million."""
    n = lo.shape[0]
    codes = np.empty(n, dtype=np.int64)
    if not n:
        return codes, []
    lo, hi = np.ascontiguousarray(lo), np.ascontiguousarray(hi)
    table = np.full(1 << (2 * n).bit_length(), -1, dtype=np.int64)
    wire.distinct(raw, lo, hi, codes, table, wire.SEED)
    firsts = table[table >= 0]
    firsts = firsts[np.argsort(codes[firsts])]
    return codes, [
        buf[a:b].decode() for a, b in zip(lo[firsts].tolist(), hi[firsts].tolist(), strict=True)
    ]


def _index(names: list[str], index: dict[str, int]) -> np.ndarray:
    """Each name's index (-1: not in ``index``)."""
    return np.fromiter(map(index.get, names, repeat(-1)), np.int64, len(names))


def _padded(placements: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Each placement's devices in a row, -1 padded to the widest (at least one column)."""
    start = placements[:, wire.DEV_START]
    count = placements[:, wire.DEV_COUNT]
    width = max(int(count.max()) if count.size else 1, 1)
    out = np.full((placements.shape[0], width), -1, dtype=np.int64)
    for j in range(width):
        has = count > j
        out[has, j] = devices[start[has] + j]
    return out
