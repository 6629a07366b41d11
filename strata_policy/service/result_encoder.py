"""Admit and Place results onto the response, most of them written as wire bytes.

A 1,000-workload Place answers 1,000 results; filling them field by field through protobuf
(a message per result, one per placement, a map entry per borrowed resource) costs about as
much as placing them. Here a result whose parts are the common ones — id, decision,
placements, borrowed amounts, score, explanation — is written straight into protobuf's
encoding (the placement and borrowed fragments cached, since a batch repeats them), and a run
of such results is parsed into the response by one ``MergeFromString``. A result with reasons
or victims (a denial; rare, and the most varied) is added field by field in its place.

Clients see the same bytes either way: gRPC serializes the parsed response, and parsing these
bytes yields the message the field-by-field path builds, map entries inserted in the same
order (``tests/test_convert_results.py`` proves both for arbitrary results).

The Place RPC's server handler goes one step further (``response_bytes``): it writes the whole
response's bytes, the ones gRPC would serialize from the message ``add_results`` fills, so
nothing is parsed into a message only to be serialized again. A result with reasons or victims
is the one message it builds and serializes; borrowed amounts are written as protobuf writes
the map it parsed (its own entry order), found once per distinct amounts and cached. And it
writes the engine's answer as the engine made it (``columnar_bytes`` of a
``model.ColumnarBatch``): a run of PLACED results held in columns is written from the columns
by a kernel (``kernels.write_records``), no ``WorkloadResult`` built
(``tests/test_columnar.py``: the same bytes for any batch of parts).
"""

from __future__ import annotations

import operator
import struct
import threading
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import is_
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy import model
from strata_policy.kernels import write_records
from strata_policy.kernels.proto_records import SEPARATOR
from strata_policy.model.resources import Resources
from strata_policy.service.convert import DECISION_CODES as _CODES
from strata_policy.service.convert import fill_result

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

_VARINT, _FIXED64, _LENGTH = 0, 1, 2
_WIRE_TYPES = {
    FieldDescriptor.TYPE_DOUBLE: _FIXED64,
    FieldDescriptor.TYPE_STRING: _LENGTH,
    FieldDescriptor.TYPE_MESSAGE: _LENGTH,
}
_K = TypeVar("_K", bound=Hashable)
_MAX_CACHED = 1 << 16  # fragments per table; a table is emptied when full
_pack_double = struct.Struct("<d").pack
_SMALL = [bytes((i,)) for i in range(128)]


def _varint(n: int) -> bytes:
    """``n`` as a protobuf varint; a negative int64 takes ten bytes (two's complement)."""
    if 0 <= n < 128:
        return _SMALL[n]
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(message: type[pb.WorkloadResult | svc.PlaceResponse], name: str) -> bytes:
    """A field's key: its number and wire type (maps and messages are length-delimited)."""
    field = message.DESCRIPTOR.fields_by_name[name]
    return _varint(field.number << 3 | _WIRE_TYPES.get(field.type, _VARINT))


_GENERATION = _tag(svc.PlaceResponse, "generation")  # AdmitResponse's too
_RESULTS = _tag(svc.PlaceResponse, "results")  # AdmitResponse's is the same (a test says so)
_ID = _tag(pb.WorkloadResult, "workload_id")
_PLACEMENT = _tag(pb.WorkloadResult, "placements")
_BORROWED = _tag(pb.WorkloadResult, "borrowed")
_SCORE = _tag(pb.WorkloadResult, "score")
_EXPLANATION = _tag(pb.WorkloadResult, "explanation")
_DECISIONS = {
    value: _tag(pb.WorkloadResult, "decision") + _varint(code) for value, code in _CODES.items()
}  # keyed by the enum's value, as DECISION_CODES is
_ENTRY_KEY, _ENTRY_VALUE = _varint(1 << 3 | _LENGTH), _varint(2 << 3 | _VARINT)
_PLACED = _DECISIONS[model.Decision.PLACED._value_]
_NUL = chr(SEPARATOR)
_NO_SCORES = np.zeros(0, dtype=np.float64)
_add = operator.add
_placements: dict[tuple[str, tuple[int, ...]], bytes] = {}
_placement_tuples: dict[int, tuple[tuple[model.Placement, ...], bytes]] = {}  # by id: the tuple
_borrowed: dict[tuple[tuple[str, int], ...], bytes] = {}
_borrowed_out: dict[tuple[tuple[str, int], ...], bytes] = {}
_held: dict[int, object] = {}  # by id: the placement tuples _middles_by_lent has fragments of
_middles_by_lent: dict[bytes, dict[int, bytes]] = {}  # by borrowed fragment, by tuple id
_middles_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response already serialized (``data``), with its ``generation`` for the call gate,
    which reads it from any response (the log line)."""

    generation: int
    data: bytes


def encoded_data(response: EncodedResponse) -> bytes:
    """The response serializer for handlers that answer ``EncodedResponse``."""
    return response.data


def response_bytes(generation: int, decisions: Iterable[model.WorkloadResult]) -> bytes:
    """The bytes of ``PlaceResponse(generation=generation)`` (or the same AdmitResponse) with
    ``add_results(response, decisions)``, as ``SerializeToString`` writes them."""
    parts = [_GENERATION, _varint(generation)] if generation else []
    _write_results(parts, decisions)
    return b"".join(parts)


def columnar_bytes(batch: model.ColumnarBatch) -> bytes:
    """``response_bytes(batch.generation, batch.batch_result().results)``, read from the
    batch's parts: a ``PlacedColumns`` run is written from its columns (``_write_columns``),
    no ``WorkloadResult`` built."""
    generation = batch.generation
    parts = [_GENERATION, _varint(generation)] if generation else []
    for part in batch.parts:
        if isinstance(part, model.PlacedColumns):
            if not _write_columns(parts, part):
                _write_results(parts, part.results())
        else:
            _write_results(parts, part)
    return b"".join(parts)


def _write_results(parts: list[bytes], decisions: Iterable[model.WorkloadResult]) -> None:
    """Append each result's key, length and bytes to ``parts``.

    Results come in runs with equal borrowed amounts (a batch's workloads ask alike), so the
    previous result's fragment is tried before the cache: first by the mapping's identity
    (values are immutable, so a mapping shared by results reads the same), then by its items.
    A result's placements are found by the identity of their tuple (``_placements_fragment``).
    """
    small = _SMALL
    by_tuple = _placement_tuples
    last_mapping: object = None
    last_amounts: tuple[tuple[str, int], ...] = ()
    last_borrowed = b""
    for r in decisions:
        if r.reasons or r.victims:
            body = _general(r)
        else:
            wid = r.workload_id.encode()
            n = len(wid)
            pieces = [_ID, small[n] if n < 128 else _varint(n), wid] if n else []
            pieces.append(_DECISIONS[r.decision._value_])
            held = r.placements
            known = by_tuple.get(id(held))
            if known is not None and known[0] is held:
                pieces.append(known[1])
            else:
                pieces.append(_placements_fragment(held))
            borrowed = r.borrowed
            if borrowed:
                if borrowed is not last_mapping:
                    last_mapping = borrowed
                    amounts = tuple(borrowed.items())
                    if amounts != last_amounts:
                        last_amounts = amounts
                        last_borrowed = _borrowed_fragment(amounts)
                pieces.append(last_borrowed)
            if r.score:
                pieces += (_SCORE, _pack_double(r.score))
            if r.explanation:
                text = r.explanation.encode()
                pieces += (_EXPLANATION, _varint(len(text)), text)
            body = b"".join(pieces)
        n = len(body)
        parts += (_RESULTS, small[n] if n < 128 else _varint(n), body)


def _write_columns(parts: list[bytes], run: model.PlacedColumns) -> bool:
    """Append the bytes ``_write_results`` writes for ``run.results()``, read from the columns;
    False (nothing appended) for a run this writer leaves to that one: scores some zero and
    some not, or an id holding a NUL.

    Every result of a run is its id, its middle (the decision and placements, then the
    borrowed amounts) and its score, with keys and lengths around them: the middles are found
    by the identity of the run's shared placement tuples and borrowed mappings in C-level
    passes, and ``kernels.write_records`` writes the rest, no Python step per result.
    """
    scores = run.scores
    scored = all(scores)
    if not scored and any(scores):
        return False
    count = len(run.ids)
    if not count:
        return True
    ids = _NUL.join(run.ids)
    if ids.count(_NUL) != count - 1:
        return False
    lent = _borrowed_fragments(run.borrowed)
    if isinstance(lent, bytes):  # one mapping for the whole run: a suffix of every middle
        middles = _middles(run.placements, lent)
    else:
        middles = list(map(_add, _middles(run.placements, b""), lent))
    ends = np.fromiter(map(len, middles), dtype=np.int64, count=count).cumsum()
    values = np.array(scores, dtype=np.float64) if scored else _NO_SCORES
    parts.append(
        write_records(_RESULTS, _ID, ids.encode(), b"".join(middles), ends, _SCORE, values)
    )
    return True


def _middles(placements: Sequence[tuple[model.Placement, ...]], lent: bytes) -> list[bytes]:
    """Each tuple's PLACED decision and placements (``_placements_fragment``) followed by
    ``lent``, found by the tuple's ``id`` in C-level passes; tuples not cached yet are added.

    An ``id`` found in a table is the tuple's own: the tuple cached under it is kept alive by
    ``_held`` (written before, and emptied after, the tables), so no other object has that
    ``id`` meanwhile, and the caller holds its own tuple. Writes take ``_middles_lock``."""
    table = _middles_by_lent.get(lent)
    found = list(map(table.get, map(id, placements))) if table is not None else []
    if found and all(found):  # a fragment is never empty: it starts with the decision
        return cast(list[bytes], found)  # all() found no None
    with _middles_lock:
        if len(_held) + len(placements) > _MAX_CACHED or len(_middles_by_lent) >= 64:
            _middles_by_lent.clear()
            _held.clear()
        table = _middles_by_lent.setdefault(lent, {})
        out = []
        for held in placements:
            key = id(held)
            middle = table.get(key)
            if middle is None:
                _held[key] = held
                middle = table[key] = _PLACED + _placements_fragment(held) + lent
            out.append(middle)
    return out


def _borrowed_fragments(mappings: Sequence[Resources]) -> list[bytes] | bytes:
    """Each mapping's fragment (``_borrowed_fragment``), worked out once per distinct mapping
    of the run (a group's workloads share one; all are alive, so ids are distinct); the one
    fragment when every row holds the same mapping (the commonest run)."""
    first = mappings[0]
    if all(map(is_, mappings, repeat(first))):
        return _borrowed_fragment(tuple(first.items())) if first else b""
    ids = list(map(id, mappings))
    table = {
        key: _borrowed_fragment(tuple(m.items())) if m else b""
        for key, m in dict(zip(ids, mappings, strict=True)).items()
    }
    return list(map(table.__getitem__, ids))


def _borrowed_fragment(amounts: tuple[tuple[str, int], ...]) -> bytes:
    """The borrowed map's entries as protobuf writes them, cached by their items."""
    found = _borrowed_out.get(amounts)
    if found is None:
        found = _cached(_borrowed_out, amounts, _borrowed_as_written(amounts))
    return found


def add_results(
    response: svc.AdmitResponse | svc.PlaceResponse, decisions: Iterable[model.WorkloadResult]
) -> None:
    """Append each decision to ``response.results``, in order (see the module docstring)."""
    chunk: list[bytes] = []
    for r in decisions:
        if r.reasons or r.victims:
            if chunk:
                response.MergeFromString(b"".join(chunk))
                chunk.clear()
            add_result(response.results, r)
            continue
        wid = r.workload_id.encode()
        parts = [_ID, _varint(len(wid)), wid, _DECISIONS[r.decision._value_]]
        for p in r.placements:
            key = (p.node_id, p.gpu_devices)
            fragment = _placements.get(key)
            if fragment is None:
                fragment = _cached(_placements, key, _placement(p))
            parts.append(fragment)
        if r.borrowed:
            amounts = tuple(r.borrowed.items())
            fragment = _borrowed.get(amounts)
            if fragment is None:
                fragment = _cached(_borrowed, amounts, _borrowed_entries(amounts))
            parts.append(fragment)
        if r.score:
            parts += (_SCORE, _pack_double(r.score))
        if r.explanation:
            text = r.explanation.encode()
            parts += (_EXPLANATION, _varint(len(text)), text)
        body = b"".join(parts)
        chunk += (_RESULTS, _varint(len(body)), body)
    if chunk:
        response.MergeFromString(b"".join(chunk))


def add_result(
    results: RepeatedCompositeFieldContainer[pb.WorkloadResult], r: model.WorkloadResult
) -> None:
    """Append one decision field by field (the general path)."""
    fill_result(results.add(workload_id=r.workload_id, decision=_CODES[r.decision._value_]), r)


def _cached(table: dict[_K, bytes], key: _K, fragment: bytes) -> bytes:
    if len(table) >= _MAX_CACHED:
        table.clear()
    table[key] = fragment
    return fragment


def _placements_fragment(held: tuple[model.Placement, ...]) -> bytes:
    """The fragments of a result's placements, joined, cached under the tuple's ``id``.

    The engine shares placement tuples between results and batches (``placement.shared_placements``
    caches a replica's one-placement tuple on the matrix), so most results' tuples are ones
    seen before: found by identity, they cost one lookup instead of a key and a lookup per
    placement. The entry holds the tuple itself, so its ``id`` cannot be reused while cached,
    and a lookup checks it is that tuple."""
    parts = []
    for p in held:
        key = (p.node_id, p.gpu_devices)
        fragment = _placements.get(key)
        if fragment is None:
            fragment = _cached(_placements, key, _placement(p))
        parts.append(fragment)
    joined = b"".join(parts)
    if len(_placement_tuples) >= _MAX_CACHED:
        _placement_tuples.clear()
    _placement_tuples[id(held)] = (held, joined)
    return joined


def _placement(p: model.Placement) -> bytes:
    body = pb.Placement(node_id=p.node_id, gpu_devices=p.gpu_devices).SerializeToString()
    return _PLACEMENT + _varint(len(body)) + body


def _general(r: model.WorkloadResult) -> bytes:
    """One result built field by field and serialized (as ``add_result`` builds it)."""
    out = pb.WorkloadResult(workload_id=r.workload_id, decision=_CODES[r.decision._value_])
    fill_result(out, r)
    return out.SerializeToString()


def _borrowed_as_written(amounts: tuple[tuple[str, int], ...]) -> bytes:
    """The borrowed map's bytes as protobuf writes the map parsed from ``_borrowed_entries``
    (its order of entries is the map's own, not necessarily the mapping's)."""
    return pb.WorkloadResult.FromString(_borrowed_entries(amounts)).SerializeToString()


def _borrowed_entries(amounts: tuple[tuple[str, int], ...]) -> bytes:
    """Map entries in the mapping's own order: parsing inserts them as assigning would."""
    out = []
    for name, amount in amounts:
        key = name.encode()
        entry = _ENTRY_KEY + _varint(len(key)) + key + _ENTRY_VALUE + _varint(amount)
        out.append(_BORROWED + _varint(len(entry)) + entry)
    return b"".join(out)
