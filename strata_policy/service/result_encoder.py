"""Admit and Place results onto the wire: two byte writers beside the plain ``fill_result``.

A 1,000-workload Place answers 1,000 results; filling them field by field through protobuf
(a message per result, one per placement, a map entry per borrowed resource) costs about as
much as placing them. So results are written straight into protobuf's encoding:

- The value writer (``_write_results``) writes a result whose parts are the common ones —
  id, decision, placements, borrowed amounts, score, explanation — from its fields, the
  placement and borrowed fragments memoized (batches repeat them); a result with reasons or
  victims (a denial; rare, and the most varied) is built by ``convert.fill_result`` and
  serialized. ``response_bytes`` is a whole response as gRPC would serialize the message
  (borrowed entries in the order protobuf writes the map it parsed); the tests' message
  oracle (``tests/message_servicer.py``, ``add_results``) parses runs of the writer's bytes
  into a message (``_borrowed_entries``: entries in the mapping's own order, as assigning
  inserts them) and adds the other results field by field, in their place.
- The column writer (``_write_columns``, for ``columnar_bytes``) writes a run of PLACED
  results held in columns (``outputs.PlacedColumns``, the engine's answer as it made it) by a
  kernel (``write_records``), no ``WorkloadResult`` built.

Clients see the same bytes and messages either way (``tests/test_convert_results.py``,
``tests/test_columnar.py``; ``tests/test_field_coverage.py`` with every field set). What each
writer handles is declared in ``service.result_encoder_fields`` (imported here, off the Place
path's modules) and checked at import against the message descriptor and the dataclasses
(``service.field_coverage``): a field added to either fails loudly when this module loads.

The memo tables are keyed by values, never by ``id``: a placement by the fields it writes
(``_placement_key``, a C-level ``attrgetter``: no ``Placement.__hash__`` runs in Python), a
tuple of placements by theirs (``_tuple_key``), borrowed amounts by their items. A table is
right whoever shares it and however long its keys' first owners live; each is bounded (emptied
when full). Identity serves only within one call, over values the caller holds for the call.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_
from typing import TypeVar, cast

import numpy as np
from google.protobuf.descriptor import Descriptor
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy import model
from strata_policy.kernels.proto_records import SEPARATOR, write_kernel
from strata_policy.model.resources import Resources
from strata_policy.placement.outputs import ColumnarBatch, PlacedColumns
from strata_policy.service.convert import DECISION_CODES as _CODES
from strata_policy.service.convert import fill_result
from strata_policy.service.field_coverage import descriptor, wire_key
from strata_policy.service.result_encoder_fields import PLACEMENT_COPIED

_placement_key: Callable[[model.Placement], tuple[object, ...]] = attrgetter(
    *(source for _, source in PLACEMENT_COPIED)
)  # the values a placement's fragment is written from (more than one: a tuple)

_K = TypeVar("_K", bound=Hashable)
Amounts = tuple[tuple[str, int], ...]  # a borrowed mapping's items, in its order
Key = tuple[object, ...]  # ``_placement_key`` of a placement, ``_tuple_key`` of a tuple
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
    return _varint(wire_key(message, name))


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
_ENTRY = cast(Descriptor, descriptor(pb.WorkloadResult).fields_by_name["borrowed"].message_type)
_ENTRY_KEY, _ENTRY_VALUE = _varint(wire_key(_ENTRY, "key")), _varint(wire_key(_ENTRY, "value"))
_PLACED = _DECISIONS[model.Decision.PLACED._value_]
_NUL = chr(SEPARATOR)
_NO_SCORES = np.zeros(0, dtype=np.float64)
_I64 = np.dtype(np.int64)
_F64 = np.dtype(np.float64)
_add = operator.add
_placement_fragments: dict[Key, bytes] = {}
_tuple_fragments: dict[Key, bytes] = {}
_borrowed_in_order: dict[Amounts, bytes] = {}
_borrowed_as_written: dict[Amounts, bytes] = {}
_middles_by_lent: dict[bytes, dict[Key, bytes]] = {}
_first = operator.itemgetter(0)


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response already serialized (``data``), with its ``generation`` for the call gate,
    which reads it from any response (the log line)."""

    generation: int
    data: bytes


def encoded_data(response: EncodedResponse) -> bytes:
    """The response serializer for handlers that answer ``EncodedResponse``."""
    return response.data


def response_bytes(generation: int, decisions: Sequence[model.WorkloadResult]) -> bytes:
    """The bytes of ``PlaceResponse(generation=generation)`` (or the same AdmitResponse) with
    ``add_results(response, decisions)``, as ``SerializeToString`` writes them."""
    parts = [_GENERATION, _varint(generation)] if generation else []
    _write_results(parts, decisions, _borrowed_fragment)
    return b"".join(parts)


def columnar_bytes(batch: ColumnarBatch) -> bytes:
    """``response_bytes(batch.generation, batch.batch_result().results)``, read from the
    batch's parts: a ``PlacedColumns`` run is written from its columns (``_write_columns``),
    no ``WorkloadResult`` built."""
    generation = batch.generation
    parts = [_GENERATION, _varint(generation)] if generation else []
    for part in batch.parts:
        if isinstance(part, PlacedColumns):
            if not _write_columns(parts, part):
                _write_results(parts, part.results(), _borrowed_fragment)
        else:
            _write_results(parts, part, _borrowed_fragment)
    return b"".join(parts)


def _write_results(
    parts: list[bytes],
    decisions: Sequence[model.WorkloadResult],
    lent: Callable[[Amounts], bytes],
) -> None:
    """Append each result's key, length and bytes to ``parts`` (the value writer); ``lent``
    writes the borrowed amounts (``_borrowed_fragment`` for a response's bytes,
    ``_borrowed_entries`` for bytes parsed into a message).

    Results come in runs with equal borrowed amounts (a batch's workloads ask alike), so the
    previous result's fragment is tried first: by the mapping's identity (the previous
    mapping is held here, and values are immutable), then by its items. A result's placements
    are found by their keys (``_placements_fragment``).
    """
    small = _SMALL
    by_tuple = _tuple_fragments
    last_mapping: object = None
    last_amounts: Amounts = ()
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
            key = _tuple_key(held)
            known = by_tuple.get(key)
            pieces.append(known if known is not None else _placements_fragment(held, key))
            borrowed = r.borrowed
            if borrowed:
                if borrowed is not last_mapping:
                    last_mapping = borrowed
                    amounts = tuple(borrowed.items())
                    if amounts != last_amounts:
                        last_amounts = amounts
                        last_borrowed = lent(amounts)
                pieces.append(last_borrowed)
            if r.score:
                pieces += (_SCORE, _pack_double(r.score))
            if r.explanation:
                text = r.explanation.encode()
                pieces += (_EXPLANATION, _varint(len(text)), text)
            body = b"".join(pieces)
        n = len(body)
        parts += (_RESULTS, small[n] if n < 128 else _varint(n), body)


def _write_columns(parts: list[bytes], run: PlacedColumns) -> bool:
    """Append the bytes ``_write_results`` writes for ``run.results()``, read from the columns;
    False (nothing appended) for a run this writer leaves to that one: scores some zero and
    some not, or an id holding a NUL.

    Every result of a run is its id, its middle (the decision and placements, then the
    borrowed amounts) and its score, with keys and lengths around them: the middles are found
    by the run's placement tuples and borrowed mappings in C-level passes, and
    ``write_records`` writes the rest, no Python step per result.
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


def write_records(
    record_key: bytes,
    id_key: bytes,
    ids: bytes,
    middles: bytes,
    middle_ends: np.ndarray,
    score_key: bytes,
    scores: np.ndarray,
) -> bytes:
    """Length-delimited records, one per row (written by ``kernels.proto_records.
    write_kernel``): ``record_key``, the varint of the body's length, then the body —
    ``id_key``, the varint of the id's length and the id (left out for an empty id), the row's
    middle, and ``score_key`` with the row's score (when ``scores`` is not empty) — as
    protobuf writes a repeated message field whose messages hold those fields.

    ``ids`` are the rows' ids joined with a ``SEPARATOR`` between two (none may hold one);
    ``middles`` the rows' middles joined, row ``i``'s ending at ``middle_ends[i]`` (int64,
    ascending); ``scores`` float64, one per row, or empty (C-contiguous arrays)."""
    n = middle_ends.shape[0]
    last = int(middle_ends[-1]) if n else 0
    if middle_ends.dtype != _I64 or middle_ends.ndim != 1 or last != len(middles):
        raise ValueError("middle_ends: expected int64 ends of the middles, the last their length")
    if n and (middle_ends[0] < 0 or (n > 1 and bool((np.diff(middle_ends) < 0).any()))):
        raise ValueError("middle_ends: expected ascending ends")
    if scores.shape not in ((n,), (0,)) or scores.dtype != _F64:
        raise ValueError(f"scores: {scores.dtype}{scores.shape}, expected float64 ({n},) or (0,)")
    if not (middle_ends.flags.c_contiguous and scores.flags.c_contiguous):
        raise ValueError("middle_ends, scores: expected C-contiguous arrays")
    if ids.count(SEPARATOR) != max(n - 1, 0):
        raise ValueError("ids: expected one separator between two ids")
    bound = len(ids) + len(middles) + n * (len(record_key) + len(id_key) + len(score_key) + 28)
    out = np.empty(bound, dtype=np.uint8)
    used = write_kernel(
        out, _u8(record_key), _u8(id_key), _u8(ids), _u8(middles), middle_ends,
        _u8(score_key), scores.astype("<f8", copy=False).view(np.uint8),
    )  # fmt: skip
    return out[:used].tobytes()


def _u8(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _middles(placements: Sequence[tuple[model.Placement, ...]], lent: bytes) -> list[bytes]:
    """Each tuple's PLACED decision and placements (``_placements_fragment``) followed by
    ``lent``, found by the tuple's key (a table per ``lent``, emptied when full; the missing
    added). A run whose tuples all hold one placement (nearly every big batch) is keyed and
    looked up in C-level passes, no Python step per row."""
    table = _middles_by_lent.get(lent)
    if table is None:
        if len(_middles_by_lent) >= 64:
            _middles_by_lent.clear()
        table = _middles_by_lent.setdefault(lent, {})
    if set(map(len, placements)) == {1}:
        keys = list(map(_placement_key, map(_first, placements)))  # ``_tuple_key``, in C
    else:
        keys = list(map(_tuple_key, placements))
    found = list(map(table.get, keys))
    if all(found):  # a middle is never empty: it starts with the decision
        return cast(list[bytes], found)  # all() found no None
    if len(table) + len(keys) > _MAX_CACHED:
        table.clear()
    for i in [i for i, middle in enumerate(found) if middle is None]:
        key = keys[i]
        known = table.get(key)  # an equal tuple met earlier in this pass
        if known is None:
            known = table[key] = _PLACED + _placements_fragment(placements[i], key) + lent
        found[i] = known
    return cast(list[bytes], found)  # every None replaced


def _borrowed_fragments(mappings: Sequence[Resources]) -> list[bytes] | bytes:
    """Each mapping's fragment (``_borrowed_fragment``), worked out once per distinct mapping
    of the run (a group's workloads share one; the run holds every mapping alive, so their
    ids are distinct for the call); the one fragment when every row holds the same mapping
    (the commonest run)."""
    first = mappings[0]
    if all(map(is_, mappings, repeat(first))):
        return _borrowed_fragment(tuple(first.items())) if first else b""
    ids = list(map(id, mappings))
    table = {
        key: _borrowed_fragment(tuple(m.items())) if m else b""
        for key, m in dict(zip(ids, mappings, strict=True)).items()
    }
    return list(map(table.__getitem__, ids))


def _borrowed_fragment(amounts: Amounts) -> bytes:
    """The borrowed map's bytes as protobuf writes the map parsed from ``_borrowed_entries``
    (its order of entries is the map's own, not necessarily the mapping's), memoized."""
    found = _borrowed_as_written.get(amounts)
    if found is None:
        written = pb.WorkloadResult.FromString(_borrowed_entries(amounts)).SerializeToString()
        found = _memo(_borrowed_as_written, amounts, written)
    return found


def _borrowed_entries(amounts: Amounts) -> bytes:
    """Map entries in the mapping's own order (parsing inserts them as assigning would),
    memoized."""
    found = _borrowed_in_order.get(amounts)
    if found is None:
        out = []
        for name, amount in amounts:
            key = name.encode()
            entry = _ENTRY_KEY + _varint(len(key)) + key + _ENTRY_VALUE + _varint(amount)
            out.append(_BORROWED + _varint(len(entry)) + entry)
        found = _memo(_borrowed_in_order, amounts, b"".join(out))
    return found


def _memo(table: dict[_K, bytes], key: _K, fragment: bytes) -> bytes:
    if len(table) >= _MAX_CACHED:
        table.clear()
    table[key] = fragment
    return fragment


def _tuple_key(held: tuple[model.Placement, ...]) -> Key:
    """A tuple's key: its one placement's ``_placement_key``, or the tuple of its placements'
    (a one-placement key starts with a field's value, never with a key: the two never meet)."""
    if len(held) == 1:
        return _placement_key(held[0])
    return tuple(map(_placement_key, held))


def _placements_fragment(held: tuple[model.Placement, ...], key: Key) -> bytes:
    """The fragments of a result's placements (``key``: ``_tuple_key(held)``), joined,
    memoized by the key (and each placement's: tuples of a gang repeat placements)."""
    parts = []
    for p in held:
        one = _placement_key(p)
        fragment = _placement_fragments.get(one)
        if fragment is None:
            fragment = _memo(_placement_fragments, one, _placement(p))
        parts.append(fragment)
    return _memo(_tuple_fragments, key, b"".join(parts))


def _placement(p: model.Placement) -> bytes:
    """One placement's key, length and message, its fields as ``PLACEMENT_COPIED`` says."""
    fields = {name: getattr(p, source) for name, source in PLACEMENT_COPIED}
    body = pb.Placement(**fields).SerializeToString()
    return _PLACEMENT + _varint(len(body)) + body


def _general(r: model.WorkloadResult) -> bytes:
    """One result built field by field and serialized (``convert.fill_result``)."""
    out = pb.WorkloadResult(workload_id=r.workload_id, decision=_CODES[r.decision._value_])
    fill_result(out, r)
    return out.SerializeToString()
