"""A Place request's workloads read straight from its bytes, for the Place RPC's server handler.

A 1,000-workload Place spends more in turning its workloads from protobuf messages into
``Workload`` values (a message object per workload, a field read per attribute, a map view per
request) than the RPC layer may cost in all. Here the request's bytes are read directly:

- The top level is split into the workloads (field 2) and everything else. Everything else —
  cluster id, ids to place, options, unknown fields — is parsed by protobuf as one message, so
  it reads exactly as before.
- A batch's workloads mostly differ only in their id. An encoder writes fields in number order,
  so a workload's bytes are its id (field 1) followed by a *tail* that batches repeat. Each
  distinct tail's first workload is parsed by protobuf and converted by
  ``convert.workload_from_proto`` (the general conversion); its fields after the id are cached
  under the tail's bytes, and a later workload becomes its id plus the cached fields, the values
  built column by column through their slots. After the first workload found so, the ones that
  follow with the same tail are read at once, by a kernel that walks their records
  (``_run``).
- Clients that stamp each workload with its own ``queued_at_ms`` (field 10, the last one) make
  every tail distinct; such a tail is read as a *head* (cached the same way) and the stamp's
  varint, the head trusted only once it parses alone (so that it ends where a field ends).
- Anything else — a workload not starting with a one-byte-length id, a tail that sets the id
  again, a length or key this reader does not take, malformed bytes — goes to protobuf: the
  workload alone when only its layout is unusual, the whole request when the bytes may be
  malformed, so that what protobuf refuses is refused by protobuf, with its own error.

The workloads equal those ``convert.workloads_from_proto`` builds from the parsed message
(``tests/test_place_request_decoder.py`` proves it for arbitrary requests, bytes and errors
alike, and ``tests/test_field_coverage.py`` for requests with every field set). They come with
a tag each (``DecodedPlace.tags``): the cached fields they were built from (the head's for a
stamped tail, a row of its own for a workload protobuf read), so the engine groups the batch by
tag instead of by each workload's fields (``quota.batch``).

What this reader takes for granted is checked at import against the descriptors and
``model.Workload`` (``layout_problems``): the keys it reads are the ones the descriptors give,
``queued_at_ms`` is the last field of both, and ``convert.WORKLOAD_FIELDS`` (the conversion
every cached row comes from) handles every field of ``pb.Workload`` and of ``Workload``. A
field added to either fails there, loudly, instead of being dropped from the cached rows.
"""

from __future__ import annotations

import dataclasses
import operator
import sys
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.kernels.proto_records import ID_KEY, RECORD_KEY, SEPARATOR, scan_kernel
from strata_policy.model import Workload, new_workload
from strata_policy.model.objects import WORKLOAD_SETTERS
from strata_policy.service import convert
from strata_policy.service.field_coverage import FieldMap, UnhandledFieldError, descriptor, wire_key

_NAMES = tuple(f.name for f in dataclasses.fields(Workload))  # id first, queued_at_ms last
_WORKLOADS_KEY = wire_key(svc.PlaceRequest, "workloads")  # RECORD_KEY, checked below
_ID_KEY = wire_key(pb.Workload, "id")  # ID_KEY, checked below
_STAMP_KEY = wire_key(pb.Workload, "queued_at_ms")
_MAX_TAILS = 4096  # cached tails (and heads); a table is emptied when full
_MAX_TAIL_BYTES = 1024  # longer tails are not cached (a typical one is under 100 bytes)
_BY_COLUMN = 8  # rows from which values are built by column
_new = object.__new__
_LAST = operator.itemgetter(-1)  # a row's queued_at_ms
_SEPARATOR = chr(SEPARATOR)
_U8 = np.dtype(np.uint8)
_drain: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend  # runs an iterator in C
Fields = tuple[Any, ...]  # a Workload's fields after the id, in order
_tails: dict[bytes, Fields] = {}  # () for a tail that sets the id again
_heads: dict[bytes, Fields] = {}  # the same for the heads of stamped tails, less queued_at_ms


@dataclass(frozen=True, slots=True)
class DecodedPlace:
    """A Place request as its handler gets it: the message without its workloads (``message``)
    and the workloads as values, with ``tags[i]`` workload ``i``'s tag (workloads whose tags are
    the same object are equal in every field but ``id`` and ``queued_at_ms``: the grouping hint
    ``Engine.place`` takes). ``cluster_id``, ``request_id`` and ``dry_run`` are the
    message's, for the call gate, which reads them from any request (logging, auth). ``raw``
    is the request as sent, kept for the digest that checks a reused ``request_id``;
    ``workload_count`` the number of workloads it holds (all of them converted, unless there
    are more than the reader was allowed to convert: then none are)."""

    message: svc.PlaceRequest
    workloads: list[Workload]
    tags: list[object] = field(repr=False, compare=False)
    raw: bytes = field(default=b"", repr=False, compare=False)
    workload_count: int = field(default=-1, compare=False)

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


def decode_place(raw: bytes, max_workloads: int = sys.maxsize) -> DecodedPlace:
    """A serialized ``PlaceRequest``, as protobuf and ``convert.workloads_from_proto`` read it.

    Raises protobuf's ``DecodeError`` where ``PlaceRequest.FromString`` would (gRPC then answers
    as it does for any request it cannot deserialize). A request of more than
    ``max_workloads`` workloads (the server's batch limit, which will refuse it) is only parsed
    by protobuf and counted, none of its workloads converted: converting a million of them
    would take seconds to minutes before the refusal.
    """
    try:
        read = _read(raw, max_workloads)
        if read is not None:
            ids, rows, tags, rest = read
            message = svc.PlaceRequest.FromString(rest)
            return DecodedPlace(message, _workloads(ids, rows, tags), tags, raw, len(ids))
    except (DecodeError, UnicodeDecodeError, IndexError):
        pass  # possibly malformed: protobuf decides, below (and counts a batch too big)
    message = svc.PlaceRequest.FromString(raw)
    count = len(message.workloads)
    workloads = convert.workloads_from_proto(message.workloads) if count <= max_workloads else []
    message.ClearField("workloads")
    return DecodedPlace(message, workloads, list(map(_fields, workloads)), raw, count)


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` (at most five bytes: keys and lengths) and the position after it."""
    value = shift = 0
    while shift < 35:
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise DecodeError("varint too long for this reader")


def _skip(raw: bytes, pos: int, wire_type: int) -> int:
    """The position after a field's value, or -1 for a wire type this reader does not take."""
    if wire_type == 0:
        while raw[pos] >= 0x80:
            pos += 1
        return pos + 1
    if wire_type == 2:
        size, pos = _varint(raw, pos)
        return pos + size
    if wire_type == 1:
        return pos + 8
    if wire_type == 5:
        return pos + 4
    return -1  # groups


def _read(
    raw: bytes, max_workloads: int = sys.maxsize
) -> tuple[list[str], list[Fields], list[object], bytes] | None:
    """The workloads' ids, fields after the id and tags (``DecodedPlace.tags``), and the bytes of
    every other field in order; None for bytes this reader leaves to protobuf, and once more
    than ``max_workloads`` workloads are read (protobuf then counts them, converting none).

    One pass: a workload (its key, its length, then the id's key and one-byte length, the
    id, the tail) is read where it stands, its tail looked up in the cache, then its head when
    the tail ends in a stamp (parsed on a miss);
    a workload of another layout is parsed by protobuf alone; any other field is copied.
    """
    ids: list[str] = []
    rows: list[Fields] = []
    tags: list[object] = []  # a cached tail's or head's fields; a parsed workload's own row
    rest: list[bytes] = []
    tails, heads = _tails, _heads
    record_key, id_key = _WORKLOADS_KEY, _ID_KEY  # locals: read once per workload
    pos, end = 0, len(raw)
    runs = True
    while pos < end:
        if raw[pos] == record_key:
            if len(ids) > max_workloads:
                return None
            size = raw[pos + 1]
            if size < 0x80:
                pos += 2
            else:
                size, pos = _varint(raw, pos + 1)
            stop = pos + size
            n = raw[pos + 1]
            if raw[pos] == id_key and n < 0x80 and pos + 2 + n <= stop:
                tail = raw[pos + 2 + n : stop]
                known = tails.get(tail)
                if known:
                    ids.append(raw[pos + 2 : pos + 2 + n].decode())
                    rows.append(known)
                    tags.append(known)
                    pos = stop
                    if runs:  # once per request: a failed try must not be paid again
                        runs = False
                        pos = _run(raw, pos, tail, known, ids, rows, tags)
                    continue
                stamp = _stamp(raw, pos + 2 + n, stop)
                found: Fields | None = None
                if stamp is not None:
                    head = raw[pos + 2 + n : stamp[0]]
                    found = heads.get(head)
                    if found:
                        ids.append(raw[pos + 2 : pos + 2 + n].decode())
                        rows.append((*found, stamp[1]))
                        tags.append(found)
                        pos = stop
                        continue
                w = convert.workload_from_proto(pb.Workload.FromString(raw[pos:stop]))
                if known is None:
                    _remember(_tails, tail, w, w.queued_at_ms)
                if stamp is not None and found is None:
                    _remember(_heads, head, w)
            else:
                w = convert.workload_from_proto(pb.Workload.FromString(raw[pos:stop]))
            ids.append(w.id)
            row = _fields(w)
            rows.append(row)
            tags.append(row)
            pos = stop
            continue
        start = pos
        key, pos = _varint(raw, pos)
        if key == _WORKLOADS_KEY or key >> 3 == 0:
            return None  # a key spelled in more bytes than needed, or field 0
        pos = _skip(raw, pos, key & 7)
        if pos < 0:
            return None
        rest.append(raw[start:pos])
    if pos != end or len(ids) > max_workloads:
        return None  # the last field runs past the end, or too many workloads to convert
    return ids, rows, tags, b"".join(rest)


def _run(
    raw: bytes,
    pos: int,
    tail: bytes,
    known: Fields,
    ids: list[str],
    rows: list[Fields],
    tags: list[object],
) -> int:
    """Read the workloads from ``pos`` on that repeat the cached ``tail`` (``known``), all at
    once; returns the position after the last one read (``pos`` if none).

    A batch's workloads mostly share one tail, so the records that follow — key, one-byte
    length, the id's key and one-byte length, the id, the tail — are found by a kernel
    (``scan_records``: the checks the record-by-record loop makes, on each record in turn),
    which also joins their ids with a NUL between two, so that they are decoded and split
    apart by one call each (a UTF-8 text is valid exactly when its pieces between NULs
    are); they are sliced and decoded one by one when an id holds a NUL itself. Reading stops
    at the first bytes that are not such a record (another tail, a longer id, the request's
    other fields), and the record-by-record loop goes on from there.
    """
    if pos >= len(raw):
        return pos  # nothing follows (or the last record ran past the end: protobuf decides)
    starts, stops, joined, after = scan_records(
        np.frombuffer(raw, dtype=_U8), pos, len(raw), np.frombuffer(tail, dtype=_U8)
    )
    count = len(starts)
    if count:
        read = joined.tobytes().decode().split(_SEPARATOR)
        if len(read) != count:  # an id holds the separator: each sliced and decoded
            spans = map(slice, starts.tolist(), stops.tolist())
            read = list(map(bytes.decode, map(raw.__getitem__, spans)))
        ids.extend(read)
        rows.extend(repeat(known, count))
        tags.extend(repeat(known, count))
    return after


def scan_records(
    raw: np.ndarray, pos: int, end: int, tail: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The records that repeat ``tail`` in ``raw[pos:end]`` from ``pos`` on, read by
    ``kernels.proto_records.scan_kernel`` (its docstring says which bytes it takes): the ids'
    starts and stops in the bytes (int64), the ids joined with a ``SEPARATOR`` between two
    (uint8), and the position after the last record read (``pos`` when there is none).
    ``raw`` and ``tail`` are C-contiguous uint8 arrays; ``0 <= pos <= end <= len(raw)``."""
    for name, a in (("raw", raw), ("tail", tail)):
        if a.dtype != _U8 or a.ndim != 1 or not a.flags.c_contiguous:
            raise ValueError(f"{name}: {a.dtype}{a.shape}, expected a C-contiguous uint8 row")
    if not 0 <= pos <= end <= raw.shape[0]:
        raise ValueError(f"positions {pos}..{end} outside {raw.shape[0]} bytes")
    room = (end - pos) // (4 + tail.shape[0]) + 1  # a record takes at least 4 + len(tail)
    starts = np.empty(room, dtype=np.int64)
    stops = np.empty(room, dtype=np.int64)
    joined = np.empty(end - pos, dtype=np.uint8)
    count, after, used = scan_kernel(raw, pos, end, tail, starts, stops, joined)
    return starts[:count], stops[:count], joined[:used], int(after)


def _workloads(ids: list[str], rows: list[Fields], tags: list[object]) -> list[Workload]:
    """``Workload(id, *fields)`` for each row, built column by column through the slots (one
    by one for a few rows, where ten passes would cost more than they save).

    Rows of equal tags (one tag: the commonest batch) hold equal values in every field but
    ``queued_at_ms`` (a tag is a row's fields, or all of them but the stamp: ``_read``), so
    those columns are the first row's values repeated: no transposing of the rows (a
    Python-level step per row and field). The tags and rows are compared by ``count``, which
    takes identical objects (the common case) for equal without comparing them."""
    n = len(ids)
    if n < _BY_COLUMN:
        return [new_workload(i, *f) for i, f in zip(ids, rows, strict=True)]
    out: list[Workload] = list(map(_new, repeat(Workload, n)))
    _drain(map(WORKLOAD_SETTERS[0], out, ids))
    first = rows[0]
    if tags.count(tags[0]) == n:
        for setter, value in zip(WORKLOAD_SETTERS[1:-1], first[:-1], strict=True):
            _drain(map(setter, out, repeat(value, n)))
        one_row = rows.count(first) == n
        _drain(
            map(WORKLOAD_SETTERS[-1], out, repeat(first[-1], n) if one_row else map(_LAST, rows))
        )
        return out
    for setter, column in zip(WORKLOAD_SETTERS[1:], zip(*rows, strict=True), strict=True):
        _drain(map(setter, out, column))
    return out


_fields: Callable[[Workload], Fields] = operator.attrgetter(*_NAMES[1:])
"""A workload's fields after the id, in order (``Workload``'s own, read in C)."""


def _remember(table: dict[bytes, Fields], tail: bytes, w: Workload, *stamp: int) -> None:
    """Cache the fields of ``w`` (read by protobuf) after its id under the bytes that follow the
    id (``tail``: all of them, or the head of a stamped tail, less ``queued_at_ms``, which
    ``stamp`` then does not give), or ``()`` when those bytes may set the id themselves or do
    not parse alone: then each workload with them is read by protobuf.

    ``w`` has an id of its own before the tail, so a tail that sets no id leaves every other
    field to the tail alone. A tail that does set one is caught either way: its last id is not
    empty, and parsing the tail alone gives it, or it is empty, and so is ``w.id`` (an empty id
    of its own is left to protobuf too). A head that parses alone is whole fields, so the
    workload is its fields and then the stamp's (protobuf reads left to right).
    """
    if len(tail) > _MAX_TAIL_BYTES:
        return  # not kept: the cache stays small whatever clients send
    try:
        own = bool(w.id) and pb.Workload.FromString(tail).id == ""
    except DecodeError:  # a head cut at the wrong place: not a stamp after all
        own = False
    if len(table) >= _MAX_TAILS:
        table.clear()
    table[tail] = (*_fields(w)[:-1], *stamp) if own else ()


def _stamp(raw: bytes, start: int, stop: int) -> tuple[int, int] | None:
    """Where a tail ``raw[start:stop]`` that ends in ``queued_at_ms`` (field 10, written last
    by encoders; a varint of at most nine bytes, so 0 to 2**63 - 1) has its key, and the value;
    None when it does not end so. The stamp's varint is continuation bytes (``>= 0x80``) and a
    last byte below, so its key (0x50) is the last one before them. A key found here is only a
    candidate: the head before it is trusted once it parses alone (``_remember``)."""
    last = stop - 1
    key = raw.rfind(_STAMP_KEY, start, last)
    if key < 0 or raw[last] >= 0x80 or last - key > 9:
        return None
    if key + 1 < last and min(raw[key + 1 : last]) < 0x80:
        return None  # not all continuation bytes: the key found is not the stamp's
    value = 0
    for byte in raw[last:key:-1]:
        value = value << 7 | (byte & 0x7F)
    return key, value


def layout_problems(
    workload: type[Message] = pb.Workload,
    request: type[Message] = svc.PlaceRequest,
    names: Sequence[str] = _NAMES,
    fields: FieldMap = convert.WORKLOAD_FIELDS,
) -> list[str]:
    """What this reader assumes of the request's and workload's messages (``workload``,
    ``request``), of ``Workload``'s field ``names`` and of the conversion it caches rows from
    (``fields``), one line per assumption that does not hold: a workload record's and its
    id's keys are the kernel's (``RECORD_KEY``, ``ID_KEY``); ``queued_at_ms`` is a varint of
    a one-byte key, numbered last (encoders write it last: the stamp), and ``Workload``'s last
    field, ``id`` its first; ``fields`` reads every field, ``id`` and ``queued_at_ms`` into
    their namesakes."""
    out = [f"{fields.codec}: {p}" for p in dataclasses.replace(fields, message=workload).problems()]
    if wire_key(request, "workloads") != RECORD_KEY or wire_key(workload, "id") != ID_KEY:
        out.append("workload records and ids are not keyed as scan_records reads them")
    stamp = descriptor(workload).fields_by_name["queued_at_ms"]
    last = max(descriptor(workload).fields, key=lambda f: f.number)
    if stamp.type != FieldDescriptor.TYPE_INT64 or wire_key(workload, "queued_at_ms") >= 0x80:
        out.append("reads queued_at_ms as an int64 varint of a one-byte key")
    if last.name != stamp.name:
        out.append(f"reads queued_at_ms as the field written last, but {last.name} follows it")
    if (names[0], names[-1]) != ("id", "queued_at_ms"):
        out.append(f"reads Workload's fields as id, ..., queued_at_ms, not {tuple(names)}")
    if fields.fields.get("id") != "id" or fields.fields.get("queued_at_ms") != "queued_at_ms":
        out.append("caches rows of fields that read id and queued_at_ms into their namesakes")
    return out


if _problems := layout_problems():
    raise UnhandledFieldError("place_request_decoder", _problems)
