"""Which rows of a pushed snapshot's running workloads set nothing beyond what the columns hold.

``service.running_rows`` makes such a row from the columns alone (id, scope, request, replicas,
GPU model, placements, admission time) and parses only the others. Deciding it row by row
would cost protobuf's per-message Python objects, which is what the bulk make avoids; instead
the rows are parsed, a chunk at a time, as a message that knows only the fields the columns do
not hold (``Rest``: a workload's ``priority``, ``preemptible``, ``node_selector``, ``spread``
and ``queued_at_ms``, each with presence, so that even an explicit default is seen), every
other field dropped as unknown, and the chunk serialized again: a row that set none of them
serializes to a fixed few bytes, so a chunk of such rows is one comparison of bytes.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from strata.policy.v1 import types_pb2 as pb

from strata_policy.service.field_coverage import UnhandledFieldError

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_PACKAGE = "strata_policy.running_rest"


def _message(name: str, *fields: tuple[str, int, int, int, str]) -> descriptor_pb2.DescriptorProto:
    out = descriptor_pb2.DescriptorProto(name=name)
    for field_name, number, label, kind, type_name in fields:
        field = out.field.add(name=field_name, number=number, label=label, type=kind)
        if type_name:
            field.type_name = type_name
    return out


_REST_FIELDS = (
    ("priority", 5, _OPTIONAL, _F.TYPE_INT32, ""),
    ("preemptible", 6, _OPTIONAL, _F.TYPE_BOOL, ""),
    ("node_selector", 7, _REPEATED, _F.TYPE_BYTES, ""),
    ("spread", 9, _OPTIONAL, _F.TYPE_BYTES, ""),
    ("queued_at_ms", 10, _OPTIONAL, _F.TYPE_INT64, ""),
)


def _classes() -> tuple[type[Message], type[Message]]:
    """``RestSnapshot`` (``workloads = 3``) and ``RestRunning`` (``workload = 1``) over
    ``RestWorkload``: ``strata.policy.v1.Workload``'s field numbers 5, 6, 7, 9 and 10 in proto2,
    where every singular field has presence; maps and ``spread`` as bytes (their any entry or
    presence is what counts, and a length-delimited field reads as bytes)."""
    f = descriptor_pb2.FileDescriptorProto(name="running_rest.proto", package=_PACKAGE)
    f.syntax = "proto2"
    f.message_type.append(_message("RestWorkload", *_REST_FIELDS))
    workload = f".{_PACKAGE}.RestWorkload"
    running = f".{_PACKAGE}.RestRunning"
    f.message_type.append(
        _message("RestRunning", ("workload", 1, _OPTIONAL, _F.TYPE_MESSAGE, workload))
    )
    f.message_type.append(
        _message("RestSnapshot", ("workloads", 3, _REPEATED, _F.TYPE_MESSAGE, running))
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    classes = message_factory.GetMessageClassesForFiles([f.name], pool)
    return classes[f"{_PACKAGE}.RestSnapshot"], classes[f"{_PACKAGE}.RestRunning"]


RestSnapshot, RestRunning = _classes()

# What ``service.running_rows`` builds a bare row from (the columns), and what ``Rest`` sees.
COLUMNS: dict[str, frozenset[str]] = {
    "Workload": frozenset({"id", "scope_id", "request", "replicas", "gpu_model"}),
    "RunningWorkload": frozenset({"workload", "placements", "admitted_at_ms"}),
    "Placement": frozenset({"node_id", "gpu_devices"}),
}
REST = frozenset(name for name, *_ in _REST_FIELDS)


def check_fields(
    messages: tuple[Descriptor, ...], columns: dict[str, frozenset[str]], rest: frozenset[str]
) -> None:
    """Every field of ``messages`` is held by the columns or seen by ``Rest`` (a
    ``Workload``'s), else ``UnhandledFieldError`` at import: a field added to the ``.proto``
    and taught to the wire reader but not here would read as bare and be dropped from a row
    made from the columns."""
    problems = []
    for d in messages:
        seen = columns.get(d.name, frozenset()) | (rest if d.name == "Workload" else frozenset())
        problems += [f"does not handle {d.name}.{f.name} (field {f.number})"
                     for f in d.fields if f.name not in seen]  # fmt: skip
    if problems:
        raise UnhandledFieldError("running_rest", problems)


MESSAGES: tuple[Descriptor, ...] = cast(
    tuple[Descriptor, ...],
    (pb.Workload.DESCRIPTOR, pb.RunningWorkload.DESCRIPTOR, pb.Placement.DESCRIPTOR),
)
check_fields(MESSAGES, COLUMNS, REST)
_WITH_WORKLOAD = b"\x1a\x02\x0a\x00"  # a row whose workload is present and sets none of them
_WITHOUT = b"\x1a\x00"  # a row without a workload at all


def bare(framed: bytes, n: int) -> np.ndarray:
    """For each of the ``n`` rows of ``framed`` (a serialized ``Snapshot`` holding only
    workloads), whether it sets none of the fields the columns do not hold."""
    rest = RestSnapshot.FromString(framed)
    rest.DiscardUnknownFields()
    if rest.SerializeToString() == _WITH_WORKLOAD * n:
        return np.ones(n, dtype=bool)
    rows = rest.workloads[:]  # type: ignore[attr-defined]
    return np.array([r.workload.ByteSize() == 0 for r in rows], dtype=bool)
