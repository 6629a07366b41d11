"""A pushed ``Snapshot``'s running workloads as columns (``state.running_columns``), read from
the message's wire bytes by ``kernels.snapshot_wire`` rather than one message object at a time.

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
from itertools import repeat

import numpy as np
from strata.policy.v1 import types_pb2 as pb

from strata_policy.kernels import snapshot_wire as wire
from strata_policy.model import Node, RunningWorkload, Scope
from strata_policy.state.running_columns import RunningColumns

_SEPARATOR = 0


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
) -> RunningColumns | None:
    """``running_columns`` of a serialized ``Snapshot``.

    The arrays made here are sized by what the request names (its resources, the devices of its
    widest placement), so what no node could hold goes to the plain path, which refuses it with
    the field that is wrong, before any array is sized by it: a resource no node has, or a
    placement naming more devices than the widest node has."""
    raw = np.frombuffer(buf, dtype=np.uint8)
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
