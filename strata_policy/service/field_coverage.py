"""What each hand-written codec does with every field of its protobuf message and of the domain
value it carries, checked against the message's descriptor and ``dataclasses.fields``.

The Place request decoder and the result byte writers read and write protobuf's encoding
directly, for speed (``service.place_request_decoder``, ``service.result_encoder``), and the
plain conversions (``service.convert``) name each field by hand. A field added to the ``.proto``
or to a ``model`` dataclass would be dropped by them silently. So every codec declares, next to
its code (the result writers in ``service.result_encoder_fields``, which the encoder imports), a
``FieldMap``: for each field of the message, the value field it is read from or into,
or that it is ``Fixed`` (one value whatever the input) or ``Delegated`` (left to another codec,
which then writes the whole value). ``FieldMap.check`` runs at import of the codec's module and
raises ``UnhandledFieldError`` naming the codec and every field it does not account for — on
either side — or names without a field any more.

A declaration is tied to what its code does by Hypothesis properties over values with every
field set (``tests/wire_strategies.py``, ``tests/test_field_coverage.py``): a codec that
declares a field and drops it fails those; a field it does not declare fails at import.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message


@dataclass(frozen=True, slots=True)
class Fixed:
    """A field the codec sets to one value whatever the input (``what``: ``PLACED``), or leaves
    empty because its input never has it (a ``PlacedColumns`` row has no reasons)."""

    what: str


@dataclass(frozen=True, slots=True)
class Delegated:
    """A field the codec does not write itself: a value whose field of the same name is set
    goes, whole, to ``to``."""

    to: str


Source = str | Fixed | Delegated
"""What a codec does with one message field: a ``str`` names the value field it is read from
(a writer) or into (a reader)."""


def same(*names: str) -> dict[str, Source]:
    """Fields each read from, or into, the value's field of the same name."""
    return {name: name for name in names}


class UnhandledFieldError(TypeError):
    """A codec does not account for fields of its message or its value, or declares fields
    that do not exist: a bug, raised at import. ``problems`` lists one line per field."""

    def __init__(self, codec: str, problems: list[str]) -> None:
        self.codec = codec
        self.problems = tuple(problems)
        super().__init__(f"{codec}: " + "; ".join(problems))


@dataclass(frozen=True, slots=True)
class FieldMap:
    """One codec's account of one message type (``message``) and the dataclass it converts
    (``value``; None when the message maps onto part of another value, as ``Spread`` onto
    ``Workload.spread_key``): ``fields`` maps each message field's name to its ``Source``.

    ``nested`` holds the maps of the message-typed fields the codec handles itself (a map
    field is handled whole, its entries being scalars; a ``Fixed`` or ``Delegated`` field
    needs none)."""

    codec: str
    message: type[Message]
    value: type | None
    fields: Mapping[str, Source]
    nested: tuple[FieldMap, ...] = ()

    def check(self) -> FieldMap:
        """``self``, once every field of the message and of the value is accounted for, here
        and in ``nested``; else ``UnhandledFieldError`` listing each one."""
        problems = self.problems()
        if problems:
            raise UnhandledFieldError(self.codec, problems)
        return self

    def copied(self) -> tuple[tuple[str, str], ...]:
        """The (message field, value field) pairs the codec copies, in the message's order."""
        return tuple(
            (f.name, source)
            for f in descriptor(self.message).fields
            if isinstance(source := self.fields.get(f.name), str)
        )

    def problems(self) -> list[str]:
        """One line per unhandled or stale field (empty when the map is complete)."""
        message = descriptor(self.message)
        name = message.name
        wire = {f.name: f for f in message.fields}
        out = [
            f"does not handle {name}.{f.name} (field {f.number})"
            for f in message.fields
            if f.name not in self.fields
        ]
        out += [
            f"declares {name}.{n}, which the message does not have"
            for n in self.fields
            if n not in wire
        ]
        if self.value is not None:
            out += self._value_problems()
        nested = {descriptor(m.message).full_name: m for m in self.nested}
        unused = dict(nested)
        for field_name, source in self.fields.items():
            field = wire.get(field_name)
            kind = _message_type(field) if field is not None else None
            if kind is None or not isinstance(source, str):
                continue
            inner = nested.get(kind.full_name)
            unused.pop(kind.full_name, None)
            if inner is None:
                out.append(
                    f"handles {name}.{field_name} ({kind.name}) with no map of {kind.name}'s fields"
                )
            else:
                out += [f"{inner.codec}: {p}" for p in inner.problems()]
        out += [f"declares a map of {n}, which no field it handles holds" for n in unused]
        return out

    def _value_problems(self) -> list[str]:
        """The value's fields no message field reads or writes, and the declared ones it lacks
        (a ``Delegated`` message field stands for the value field of its name)."""
        if self.value is None:
            return []
        kind = self.value.__name__
        have = [f.name for f in dataclasses.fields(self.value)]
        used = {s for s in self.fields.values() if isinstance(s, str)}
        used |= {n for n, s in self.fields.items() if isinstance(s, Delegated)}
        return [f"does not handle {kind}.{n}" for n in have if n not in used] + [
            f"declares {kind}.{n}, which the value does not have" for n in sorted(used - set(have))
        ]


def descriptor(message: type[Message]) -> Descriptor:
    """A message type's descriptor (typed: the stubs give the C one as a union)."""
    return cast(Descriptor, message.DESCRIPTOR)


def _message_type(field: FieldDescriptor) -> Descriptor | None:
    """The message type of a message-typed field that is not a map (a map's entries are
    scalar pairs, handled whole); None for any other field."""
    kind = field.message_type
    return None if kind is None or kind.GetOptions().map_entry else kind


_FIXED64 = frozenset(
    (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64)
)
_FIXED32 = frozenset(
    (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32)
)
_LENGTH = frozenset(
    (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE)
)


def wire_key(message: type[Message] | Descriptor, name: str) -> int:
    """The key protobuf writes before field ``name`` of ``message``: its number and wire type
    (length-delimited for strings, messages, maps and packed repeated scalars)."""
    fields = (message if isinstance(message, Descriptor) else descriptor(message)).fields_by_name
    field = fields[name]
    if field.type in _LENGTH or field.is_packed:
        wire_type = 2
    elif field.type in _FIXED64:
        wire_type = 1
    elif field.type in _FIXED32:
        wire_type = 5
    else:
        wire_type = 0
    return field.number << 3 | wire_type
