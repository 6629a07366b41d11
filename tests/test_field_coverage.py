"""Every hand-written codec accounts for every field of its message and its value, and a field
added to either fails loudly; each byte writer and the request decoder equal the plain
conversions on values and messages with every field set."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import wire_strategies as ws
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st
from message_servicer import add_results
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import Placement, Workload, WorkloadResult
from strata_policy.placement.outputs import ColumnarBatch, PlacedColumns
from strata_policy.service import (
    convert,
    place_request_decoder,
    result_encoder,
    result_encoder_fields,
)
from strata_policy.service.field_coverage import FieldMap, UnhandledFieldError, descriptor

MAPS = [
    pytest.param(convert.RESULT_FIELDS, id="convert.fill_result"),
    pytest.param(convert.WORKLOAD_FIELDS, id="convert.workload_from_proto"),
    pytest.param(result_encoder_fields.VALUE_WRITER_FIELDS, id="result_encoder._write_results"),
    pytest.param(result_encoder_fields.COLUMN_WRITER_FIELDS, id="result_encoder._write_columns"),
]


def with_added_field(message: type[Message], number: int = 99) -> type[Message]:
    """A copy of ``message``'s type (from a pool of its own) with one more field, ``added``."""
    pool = descriptor_pool.DescriptorPool()
    files: list[Any] = []
    todo = [descriptor(message).file]
    while todo:  # the file and what it imports, imports first
        file = todo.pop()
        files.insert(0, file)
        todo += file.dependencies
    for file in dict.fromkeys(files):
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        if file is descriptor(message).file:
            (kind,) = [m for m in proto.message_type if m.name == descriptor(message).name]
            kind.field.add(name="added", number=number, type=3, label=1)  # int64, optional
        pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName(descriptor(message).full_name)
    )


def with_added_value_field(cls: type) -> type:
    """A dataclass with ``cls``'s fields, in order, and one more, ``added``."""
    fields = [(f.name, Any) for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__name__, [*fields, ("added", int)])


@pytest.mark.parametrize("field_map", MAPS)
def test_declared_maps_account_for_every_field(field_map: FieldMap) -> None:
    """Each codec's declaration covers its message, its value and their nested messages."""
    assert field_map.problems() == []
    assert field_map.check() is field_map


def _drifts(field_map: FieldMap) -> list[tuple[str, FieldMap, str]]:
    """(case, the map after the drift, the problem it must name) for one codec's map."""
    name = descriptor(field_map.message).name
    first = next(iter(field_map.fields))
    out = [
        (
            "a field added to the message",
            dataclasses.replace(field_map, message=with_added_field(field_map.message)),
            f"does not handle {name}.added (field 99)",
        ),
        (
            "a declaration dropped",
            dataclasses.replace(
                field_map, fields={k: v for k, v in field_map.fields.items() if k != first}
            ),
            f"does not handle {name}.{first}",
        ),
        (
            "a field declared that the message lacks",
            dataclasses.replace(field_map, fields={**field_map.fields, "gone": "gone"}),
            f"declares {name}.gone, which the message does not have",
        ),
    ]
    if field_map.value is not None:
        value = with_added_value_field(field_map.value)
        out.append(
            (
                "a field added to the value",
                dataclasses.replace(field_map, value=value),
                f"does not handle {field_map.value.__name__}.added",
            )
        )
    if field_map.nested:
        inner = field_map.nested[0]
        added = dataclasses.replace(inner, message=with_added_field(inner.message))
        out.append(
            (
                "a field added to a nested message",
                dataclasses.replace(field_map, nested=(added, *field_map.nested[1:])),
                f"does not handle {descriptor(inner.message).name}.added (field 99)",
            )
        )
        out.append(
            (
                "a nested map dropped",
                dataclasses.replace(field_map, nested=field_map.nested[1:]),
                "with no map of",
            )
        )
    return out


DRIFTS = [
    pytest.param(changed, problem, id=f"{case}: {p.id}")
    for p in MAPS
    for case, changed, problem in _drifts(p.values[0])
]


@pytest.mark.parametrize(("changed", "problem"), DRIFTS)
def test_a_drift_fails_naming_the_codec_and_the_field(changed: FieldMap, problem: str) -> None:
    """A field the codec does not account for, on either side, raises at ``check``."""
    with pytest.raises(UnhandledFieldError) as raised:
        changed.check()
    assert raised.value.codec == changed.codec
    assert any(problem in p for p in raised.value.problems), raised.value.problems
    assert changed.codec in str(raised.value)


def test_the_decoder_layout_holds() -> None:
    """The Place request decoder's assumptions hold for today's messages and ``Workload``."""
    assert place_request_decoder.layout_problems() == []


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        pytest.param(
            {"workload": with_added_field(pb.Workload, 11)},
            "does not handle Workload.added (field 11)",
            id="a workload field added: unhandled",
        ),
        pytest.param(
            {"workload": with_added_field(pb.Workload, 11)},
            "but added follows it",
            id="a workload field after queued_at_ms: no stamp",
        ),
        pytest.param(
            {"request": with_added_field(svc.PlaceRequest, 99)},
            None,
            id="a request field added: left to protobuf",
        ),
        pytest.param(
            {"names": ("id", "queued_at_ms", "scope_id")},
            "reads Workload's fields as id, ..., queued_at_ms",
            id="Workload's fields reordered",
        ),
        pytest.param(
            {"names": (*(f.name for f in dataclasses.fields(Workload)), "added")},
            "reads Workload's fields as id, ..., queued_at_ms",
            id="a Workload field after queued_at_ms",
        ),
    ],
)
def test_decoder_layout_drifts(kwargs: dict[str, Any], problem: str | None) -> None:
    """What the decoder assumes is checked against the messages it is given."""
    problems = place_request_decoder.layout_problems(**kwargs)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(
            lambda: ws.value_of(with_added_value_field(Placement), ws.PLACEMENT),
            id="a dataclass field without a strategy",
        ),
        pytest.param(
            lambda: ws.message_of(with_added_field(pb.Spread), ws.SPREAD),
            id="a message field without a strategy",
        ),
        pytest.param(
            lambda: ws.value_of(Placement, {**ws.PLACEMENT, "gone": st.none()}),
            id="a strategy for a field that is gone",
        ),
    ],
)
def test_strategies_refuse_a_field_table_that_drifted(build: Any) -> None:
    """A new field with no strategy (or a strategy with no field) fails the tests' import."""
    with pytest.raises(ws.MissingStrategy):
        build()


def _unset(value: object) -> list[str]:
    """The fields of a dataclass value, nested ones too, left at their default."""
    out = []
    for f in dataclasses.fields(value):  # type: ignore[arg-type]
        got = getattr(value, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if default is not dataclasses.MISSING and got == default:
            out.append(f.name)
        for item in got if isinstance(got, tuple) else ():
            if dataclasses.is_dataclass(item):
                out += [f"{f.name}.{n}" for n in _unset(item)]
    return out


def _absent(message: Message) -> list[str]:
    """The fields of a message, nested ones too, not set."""
    present = {f.name for f, _ in message.ListFields()}
    out = [f.name for f in message.DESCRIPTOR.fields if f.name not in present]
    for f, value in message.ListFields():
        if f.message_type is not None and not f.message_type.GetOptions().map_entry:
            for item in value if f.is_repeated else [value]:
                out += [f"{f.name}.{n}" for n in _absent(item)]
    return out


@given(ws.results(full=True))
def test_full_results_set_every_field(result: WorkloadResult) -> None:
    """``results(full=True)`` leaves no field, nested or not, at its default."""
    assert _unset(result) == []


@given(ws.place_requests(full=True))
def test_full_requests_set_every_field(request: svc.PlaceRequest) -> None:
    """``place_requests(full=True)`` leaves no field of the request or its workloads unset."""
    assert _absent(request) == []


def _messages(results: list[WorkloadResult]) -> list[pb.WorkloadResult]:
    return [convert.result_to_proto(r) for r in results]


@settings(max_examples=150)
@given(st.lists(ws.results(full=True) | ws.results(), max_size=5), st.sampled_from([0, 9]))
def test_value_writer_parses_as_fill_result(results: list[WorkloadResult], generation: int) -> None:
    """``response_bytes`` and ``add_results`` give ``fill_result``'s message for any fields."""
    written = svc.PlaceResponse.FromString(result_encoder.response_bytes(generation, results))
    added = svc.PlaceResponse(generation=generation)
    add_results(added, results)
    expected = svc.PlaceResponse(generation=generation, results=_messages(results))
    assert written == expected
    assert added == expected


@settings(max_examples=150)
@given(st.lists(ws.placed_columns(full=True) | ws.placed_columns(), min_size=1, max_size=3))
def test_column_writer_parses_as_fill_result(runs: list[PlacedColumns]) -> None:
    """``columnar_bytes`` gives ``fill_result``'s message for the runs' rows, every column set."""
    written = svc.PlaceResponse.FromString(
        result_encoder.columnar_bytes(ColumnarBatch(5, tuple(runs)))
    )
    rows = [r for run in runs for r in run.results()]
    assert written == svc.PlaceResponse(generation=5, results=_messages(rows))


@settings(max_examples=150)
@given(ws.place_requests(full=True) | ws.place_requests())
def test_decoder_equals_the_message_conversion(request: svc.PlaceRequest) -> None:
    """``decode_place`` reads every field of every workload as ``convert`` reads the message,
    and the rest of the request as protobuf does."""
    raw = request.SerializeToString()
    for _ in range(2):  # the second time from the cached tails
        decoded = place_request_decoder.decode_place(raw)
        want = convert.workloads_from_proto(request.workloads)
        assert ws.workloads_equal_field_by_field(list(decoded.workloads), want) == []
        rest = svc.PlaceRequest()
        rest.CopyFrom(request)
        rest.ClearField("workloads")
        assert decoded.message == rest
