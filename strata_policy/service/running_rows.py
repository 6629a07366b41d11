"""A pushed snapshot's running workloads made from their own wire bytes: one row at a time
(``RowMaker.__call__``, a single read) or every pending row at once (``RowMaker.many``, for the
readers of every workload: an engine snapshot, a checkpoint, Reclaim's candidates).

One row is its bytes parsed as a ``RunningWorkload`` message and converted by the plain
function (``convert.running_from_proto``). The first call that read every workload of a pushed
snapshot paid that for each row: 13-25 µs, nearly all of it protobuf's per-message and
per-field Python objects (the message, its request map, a ``Placement`` message per replica),
then the model's (a frozen dataclass ``__init__`` per placement) and the cyclic collector
scanning them every 700 allocations. ``many`` makes the same values from the columns
(``state.running_columns``), which hold a row's id, scope, request, replicas, GPU model,
placements and admission time already:

- the rows that set nothing else (``service.running_rest.bare``: no priority, preemptible,
  node selector, spread or queue time; found by one parse of a chunk of rows) and that the
  columns say exactly (a known scope; as many request entries as non-zero amounts, so no zero
  or repeated entry; each placement's own device count and node id as written) are built
  from the columns: one shared request dict per distinct request (as
  ``convert.shared_request`` shares them), one shared ``Placement`` per distinct placement
  and one shared tuple per distinct list of placements (immutable values), each
  ``RunningWorkload`` through its slots;
- every other row is parsed (one ``FromString`` per chunk) and converted by the plain
  function;
- all with the cyclic collector paused (what is made holds no cycles).

A bulk-made row equals the one-by-one make and the plain conversion in every field
(``tests/test_bulk_make.py``, over messages that set every field).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType

import numpy as np
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import Placement, RunningWorkload, new_workload
from strata_policy.model.slots import setters
from strata_policy.service import running_rest
from strata_policy.state.running_columns import RunningColumns

_CHUNK = 65_536  # rows parsed at once: bounds the messages held (about 0.5 KiB a row)
_WORKLOADS_TAG = b"\x1a"  # Snapshot.workloads: field 3, length-delimited
_new = object.__new__
_SET_WORKLOAD, _SET_PLACEMENTS, _SET_ADMITTED = setters(
    RunningWorkload, ("workload", "placements", "admitted_at_ms")
)
_SET_NODE, _SET_DEVICES = setters(Placement, ("node_id", "gpu_devices"))
_intern = sys.intern
_NO_LABELS: Mapping[str, str] = MappingProxyType({})  # as ``convert`` shares it


def varint(n: int) -> bytes:
    """``n`` (non-negative) as a protobuf varint: the push's writer of lengths (its rows'
    chunks here, the snapshot's re-framed field in ``snapshot_decoder``)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class RowMaker:
    """Makes row ``i`` of a serialized ``Snapshot``'s running workloads: the message in
    ``buf[lo[i]:hi[i]]`` converted by ``convert`` (``__call__``), or many rows at once
    (``bulk(columns)``); see the module docstring.

    Besides the bytes it keeps what the columns do not say exactly: each row's count of request
    entries as the wire lists them (``entries``: a zero or repeated entry shows as a count
    above the row's non-zero amounts), each placement's count of devices (``device_count``:
    the columns pad devices with -1) and its node id as written (``node_ids[node_code[p]]``).
    """

    __slots__ = ("buf", "convert", "device_count", "entries", "hi", "lo", "node_code", "node_ids")

    def __init__(
        self,
        buf: bytes,
        lo: np.ndarray,
        hi: np.ndarray,
        convert: Callable[[pb.RunningWorkload], RunningWorkload],
        *,
        entries: np.ndarray,
        device_count: np.ndarray,
        node_ids: list[str],
        node_code: np.ndarray,
    ) -> None:
        self.buf, self.lo, self.hi, self.convert = buf, lo, hi, convert
        self.entries, self.device_count = entries, device_count
        self.node_ids, self.node_code = node_ids, node_code

    def __call__(self, i: int) -> RunningWorkload:
        """Row ``i`` alone, made by the plain conversion of its parsed bytes."""
        lo, hi = int(self.lo[i]), int(self.hi[i])
        return self.convert(pb.RunningWorkload.FromString(self.buf[lo:hi]))

    def bulk(self, columns: RunningColumns) -> Callable[[list[int]], list[RunningWorkload]]:
        """``many`` over these rows' ``columns`` (what ``RunningTable`` calls for every row)."""
        return lambda rows: self.many(columns, rows)

    def many(self, columns: RunningColumns, rows: Sequence[int]) -> list[RunningWorkload]:
        """Rows ``rows`` in their order, each equal to ``self(row)``; see the module docstring."""
        out: list[RunningWorkload] = []
        made = _FromColumns(self, columns)
        with collector_paused():
            for start in range(0, len(rows), _CHUNK):
                chunk = list(rows[start : start + _CHUNK])
                framed = self._framed(chunk)
                bare = running_rest.bare(framed, len(chunk)) & made.exact(chunk)
                if bare.all():
                    out += made.rows(chunk)
                    continue
                messages = pb.Snapshot.FromString(framed).workloads[:]
                flags = bare.tolist()
                from_columns = iter(made.rows([r for r, b in zip(chunk, flags, strict=True) if b]))
                convert = self.convert
                for m, b in zip(messages, flags, strict=True):
                    out.append(next(from_columns) if b else convert(m))
        return out

    def _framed(self, rows: list[int]) -> bytes:
        """The rows' bytes framed as a ``Snapshot``'s ``workloads``, in their order.

        Consecutive rows are one slice of the pushed bytes where nothing but each row's header
        lies between them: a gap of exactly one tag byte and the length's shortest varint can
        hold nothing else (the walk found the row's header ending where the row starts, and
        no shorter header exists), so the bytes there are that header. A run of such rows is
        one slice behind a header written here for its first row."""
        buf = self.buf
        lo, hi = self.lo[rows], self.hi[rows]
        size = hi - lo
        width = 1 + sum((size >= 1 << (7 * k)).astype(np.int64) for k in range(1, 5))
        joined = np.zeros(len(rows), dtype=bool)
        joined[1:] = (lo[1:] - 1 - width[1:]) == hi[:-1]
        starts = np.flatnonzero(~joined)
        ends = np.append(starts[1:], len(rows)) - 1
        los, his, sizes = lo[starts].tolist(), hi[ends].tolist(), size[starts].tolist()
        parts: list[bytes] = []
        for first, last, length in zip(los, his, sizes, strict=True):
            parts.append(_WORKLOADS_TAG + varint(length))
            parts.append(buf[first:last])
        return b"".join(parts)


class _FromColumns:
    """Rows made from the columns alone: for rows ``running_rest.bare`` finds setting nothing
    else, and ``exact`` finds the columns exact for."""

    def __init__(self, maker: RowMaker, columns: RunningColumns) -> None:
        self.maker, self.columns = maker, columns
        self.scopes = [_intern(s.id) for s in columns.scopes]
        request = np.ascontiguousarray(columns.request)
        codes, self.requests = _distinct_requests(request, columns.resources)
        self.request_code = codes
        self.nonzero = np.count_nonzero(request, axis=1)
        code, self.placements = _distinct_placements(maker, columns)
        self.placement_code: list[int] = code.tolist()
        self.tuples: dict[tuple[int, ...], tuple[Placement, ...]] = {}

    def exact(self, rows: list[int]) -> np.ndarray:
        """Whether the columns say rows ``rows`` exactly: a known scope, and as many request
        entries on the wire as non-zero amounts (no zero or repeated entry)."""
        c = self.columns
        known = c.scope[rows] >= 0
        return np.asarray(known & (self.maker.entries[rows] == self.nonzero[rows]), dtype=bool)

    def rows(self, rows: list[int]) -> list[RunningWorkload]:
        """Rows ``rows`` made from the columns (the caller knows them exact)."""
        c = self.columns
        ids, scopes, requests, models = c.ids, self.scopes, self.requests, c.gpu_models
        objects, tuples = self.placements, self.tuples
        codes = self.placement_code
        out = []
        for i, scope, code, replicas, model, admitted, first, count in zip(
            rows,
            c.scope[rows].tolist(),
            self.request_code[rows].tolist(),
            c.replicas[rows].tolist(),
            c.gpu_model[rows].tolist(),
            c.admitted_at_ms[rows].tolist(),
            c.placement_start[rows].tolist(),
            c.placement_count[rows].tolist(),
            strict=True,
        ):
            placements: tuple[Placement, ...] = ()
            if count:
                key = tuple(codes[first : first + count])
                placements = tuples.get(key, ())
                if not placements:
                    placements = tuples[key] = tuple(map(objects.__getitem__, key))
            w = new_workload(
                ids[i], scopes[scope], requests[code], replicas, 0, True, _NO_LABELS,
                models[model], "", 0,
            )  # fmt: skip
            rw: RunningWorkload = _new(RunningWorkload)
            _SET_WORKLOAD(rw, w)
            _SET_PLACEMENTS(rw, placements)
            _SET_ADMITTED(rw, admitted)
            out.append(rw)
        return out


def _distinct_placements(
    maker: RowMaker, columns: RunningColumns
) -> tuple[np.ndarray, list[Placement]]:
    """Each placement's number among the distinct ones (a node id as written, its devices) and
    one shared ``Placement`` per distinct one."""
    devices = columns.devices
    n = devices.shape[0]
    if not n:
        return np.zeros(0, dtype=np.int64), []
    whole = np.column_stack((maker.node_code, maker.device_count, devices)).astype(np.int64)
    codes, firsts = _distinct_rows(whole)
    node_ids = [_intern(x) for x in maker.node_ids]
    made = []
    for row in whole[firsts].tolist():
        made.append(_placement(node_ids[row[0]], tuple(row[2 : 2 + row[1]])))
    return codes, made


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number among the distinct rows of an int64 array, and each distinct row's
    first index."""
    n, width = rows.shape
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, 8 * width))).reshape(n)
    _, firsts, codes = np.unique(keys, return_index=True, return_inverse=True)
    return codes.reshape(n), np.asarray(firsts, dtype=np.int64)


def _distinct_requests(
    request: np.ndarray, resources: tuple[str, ...]
) -> tuple[np.ndarray, list[dict[str, int]]]:
    """Each row's number among the distinct request rows, and one dict per distinct row (its
    non-zero amounts in resource-name order, as ``convert.shared_request`` orders them)."""
    n, width = request.shape
    if not n:
        return np.zeros(0, dtype=np.int64), []
    if not width:
        return np.zeros(n, dtype=np.int64), [{}]
    codes, firsts = _distinct_rows(request)
    dicts = []
    for row in request[firsts].tolist():
        dicts.append({name: amount for name, amount in zip(resources, row, strict=True) if amount})
    return codes, dicts


def _placement(node_id: str, devices: tuple[int, ...]) -> Placement:
    p: Placement = _new(Placement)
    _SET_NODE(p, node_id)
    _SET_DEVICES(p, devices)
    return p


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while objects are made by the hundred
    thousand (a push's nodes, its state): each 700 allocations it would scan the young ones,
    and now and then every object, which made building the nodes of a 100,000-node push
    several times slower. What a push makes holds no cycles; reference counting frees it as
    ever, and the collector runs again after (nested pauses keep it off until the outer one
    ends)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
