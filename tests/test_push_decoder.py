"""A PushSnapshot request read from its bytes (``snapshot_decoder.decode_push``) is the request
protobuf parses, split or whole, and a push through the handler ends exactly as the plain path
does: the same state and answers, or the same refusal."""

from __future__ import annotations

from typing import Any

import pytest
from fake_context import Aborted, Context
from google.protobuf.message import DecodeError
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb
from test_snapshot_wire import NODES, SCOPES, field, snapshot_bytes, varint

from strata_policy.engine import Engine
from strata_policy.errors import InvalidArgument
from strata_policy.model import Snapshot
from strata_policy.service import convert
from strata_policy.service.servicer import PolicyServicer, method_handlers
from strata_policy.service.snapshot_decoder import DecodedPush, decode_push
from strata_policy.service.status import to_status
from strata_policy.testing import running, workload

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)


def rejoined(decoded: DecodedPush) -> svc.PushSnapshotRequest:
    """The whole request a decoded one stands for: its message with the running workloads of
    its kept bytes put back."""
    whole = svc.PushSnapshotRequest()
    whole.CopyFrom(decoded.message)
    if decoded.body:  # (no presence added to a request without a snapshot)
        body = pb.Snapshot.FromString(decoded.body)
        whole.snapshot.nodes.extend(body.nodes)
        whole.snapshot.workloads.extend(body.workloads)
    return whole


def same_as_protobuf(raw: bytes) -> DecodedPush | None:
    """Check ``decode_push(raw)`` against protobuf's parse of ``raw``; the decoded request, or
    ``None`` when both refuse the bytes."""
    try:
        want = svc.PushSnapshotRequest.FromString(raw)
    except DecodeError:
        with pytest.raises(DecodeError):
            decode_push(raw)
        return None
    got = decode_push(raw)
    assert rejoined(got) == want
    assert got.workload_count == len(want.snapshot.workloads)
    assert got.node_count == len(want.snapshot.nodes)
    assert (got.cluster_id, got.request_id, got.dry_run) == (
        want.cluster_id,
        want.request_id,
        want.dry_run,
    )
    if got.body is not None:
        assert not got.message.snapshot.workloads
        assert not got.message.snapshot.nodes
    return got


@st.composite
def request_bytes(draw: st.DrawFn) -> tuple[bytes, bool]:
    """A ``PushSnapshotRequest``'s bytes in any field order, with repeated scalars, unknown
    fields, no snapshot or a snapshot in two pieces, and whether the reader must keep its
    running workloads as bytes (the snapshot given once, nothing in it the kernel declines)."""
    snap, plain = draw(snapshot_bytes())
    chunks = [field(1, draw(st.sampled_from([b"", b"c", "é".encode()])))]
    chunks += [field(3, draw(st.sampled_from([0, 1]))) for _ in range(draw(st.integers(0, 2)))]
    chunks += [field(4, draw(st.sampled_from([0, 7, -1])))]
    chunks += [field(5, draw(st.sampled_from([b"", b"r1"])))]
    if draw(st.booleans()):
        chunks.append(field(draw(st.sampled_from([6, 99])), draw(st.sampled_from([3, b"x"]))))
    if draw(st.booleans()):
        chunks.append(varint(7 << 3 | 5) + b"\x01\x02\x03\x04")  # an unknown fixed32
    pieces = draw(st.sampled_from([0, 1, 1, 1, 2]))
    cut = draw(st.integers(0, len(snap)))
    if pieces == 1:
        chunks.append(field(2, snap))
    elif pieces == 2:  # protobuf merges the two: the reader leaves them to it
        chunks += [field(2, snap[:cut]), field(2, snap[cut:])]
    return b"".join(draw(st.permutations(chunks))), pieces == 1 and plain


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_bytes())
def test_decoded_request_is_protobufs(case: tuple[bytes, bool]) -> None:
    """Split or whole, the decoded request is the one protobuf parses from the same bytes."""
    raw, kept = case
    got = same_as_protobuf(raw)
    if kept:
        assert got is not None
        assert got.body is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_bytes())
def test_cut_requests_read_as_protobuf_reads_them(case: tuple[bytes, bool]) -> None:
    """A request cut short anywhere is refused where protobuf refuses it, and read as protobuf
    reads it where protobuf does not (a cut between fields)."""
    raw, _ = case
    for cut in range(0, len(raw), max(1, len(raw) // 40)):
        same_as_protobuf(raw[:cut])


STRING_FIELDS = [
    pytest.param(lambda s: field(1, field(1, s)), id="workload id"),
    pytest.param(lambda s: field(1, field(2, s)), id="scope id"),
    pytest.param(lambda s: field(1, field(3, field(1, s) + field(2, 1))), id="request name"),
    pytest.param(lambda s: field(1, field(7, field(1, s))), id="selector key"),
    pytest.param(lambda s: field(1, field(7, field(2, s))), id="selector value"),
    pytest.param(lambda s: field(1, field(8, s)), id="gpu model"),
    pytest.param(lambda s: field(1, field(9, field(1, s))), id="spread key"),
    pytest.param(lambda s: field(1, b"") + field(2, field(1, s)), id="placement node"),
]


@pytest.mark.parametrize("record", STRING_FIELDS)
@settings(max_examples=150, deadline=None)
@given(text=st.one_of(st.binary(max_size=6), st.text(max_size=3).map(str.encode)))
def test_strings_not_utf8_are_refused_as_protobuf_refuses_them(record: Any, text: bytes) -> None:
    """Any bytes in any string of a running workload: refused exactly when protobuf refuses
    them (not UTF-8), read as protobuf reads them otherwise."""
    raw = field(1, b"c") + field(2, field(3, record(text)))
    got = same_as_protobuf(raw)
    if got is not None:
        assert got.body is not None  # read by the kernel whenever protobuf reads it


def pushed(raw: bytes, through_handler: bool) -> Any:
    """Push ``raw`` to a fresh engine, through the server's handler or the plain path
    (protobuf's parse, workloads converted one by one); what the engine then shows."""
    engine = Engine(clock=lambda: 1000)
    if through_handler:
        handler = method_handlers(PolicyServicer(engine))["PushSnapshot"]
        context = Context()
        try:
            handler.unary_unary(handler.request_deserializer(raw), context)
        except Aborted:
            return ("refused", context.status)  # code, message, field violations
    else:
        message = svc.PushSnapshotRequest.FromString(raw)
        snap = convert.snapshot_from_proto(message.snapshot)
        plain = Snapshot(
            snap.nodes, snap.scopes, convert.plain_running_from_proto(message.snapshot)
        )
        try:
            engine.push_snapshot(message.cluster_id, plain)
        except InvalidArgument as e:
            return ("refused", rpc_status.to_status(to_status(e)))
    probes = [workload("p1", "team", cpu=4), workload("p2", "org", gpu_milli=1000)]
    return (
        engine.snapshot("c"),
        engine.get_cluster("c"),
        engine.admit("c", probes, dry_run=True).results,
        engine.place("c", probes[1:], dry_run=True).results,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot_bytes())
def test_handler_push_ends_as_the_plain_path(case: tuple[bytes, bool]) -> None:
    """Through the handler, any snapshot gives the plain path's state and answers, or its
    INVALID_ARGUMENT with the same violations."""
    raw = field(1, b"c") + field(2, case[0])
    assert pushed(raw, through_handler=True) == pushed(raw, through_handler=False)


def test_handler_refuses_a_bad_placement_as_the_plain_path() -> None:
    """A workload placed on a node that does not exist: the same violations either way."""
    snap = Snapshot(NODES, SCOPES, (running(workload("a", "team", cpu=1), "n9"),))
    raw = svc.PushSnapshotRequest(
        cluster_id="c", snapshot=convert.snapshot_to_proto(snap)
    ).SerializeToString()
    refused = pushed(raw, through_handler=True)
    assert refused[1].code.name == "INVALID_ARGUMENT"
    assert "n9" in refused[1].details
    assert refused == pushed(raw, through_handler=False)


ONE = field(1, field(1, b"a") + field(2, b"team"))  # a RunningWorkload record's payload
BYTE_CASES = [
    pytest.param(field(2, field(3, ONE)) * 2, id="snapshot given twice: merged"),
    pytest.param(field(2, field(3, ONE)) + field(2, b""), id="an empty snapshot after"),
    pytest.param(field(2, field(4, b"x") + field(3, ONE)), id="a field the snapshot lacks"),
    pytest.param(varint(2 << 3) + varint(1) + field(2, field(3, ONE)), id="snapshot as varint"),
    pytest.param(varint(9 << 3 | 3) + varint(9 << 3 | 4) + field(2, field(3, ONE)), id="group"),
    pytest.param(varint(0) + field(2, field(3, ONE)), id="field number 0"),
    pytest.param(field(2, field(3, ONE)) + varint(5 << 3 | 2) + varint(9), id="cut after"),
]


@pytest.mark.parametrize("raw", BYTE_CASES)
def test_requests_the_reader_leaves_to_protobuf(raw: bytes) -> None:
    """Requests the reader does not split are protobuf's to parse or refuse, and end equal."""
    same_as_protobuf(raw)


UTF8_CASES = [
    pytest.param("é€😀".encode(), id="two, three and four bytes"),
    pytest.param(b"\xc0\x80", id="overlong two"),
    pytest.param(b"\xe0\x80\x80", id="overlong three"),
    pytest.param(b"\xf0\x80\x80\x80", id="overlong four"),
    pytest.param(b"\xed\xa0\x80", id="surrogate"),
    pytest.param(b"\xf4\x90\x80\x80", id="past U+10FFFF"),
    pytest.param(b"\xf5\x80\x80\x80", id="lead past F4"),
    pytest.param(b"\xe2\x82", id="cut short"),
    pytest.param(b"\x80", id="lone continuation"),
    pytest.param(b"\xe2\x28\xa1", id="bad continuation"),
]


@pytest.mark.parametrize("record", STRING_FIELDS)
@pytest.mark.parametrize("text", UTF8_CASES)
def test_utf8_edges_as_protobuf(record: Any, text: bytes) -> None:
    """Each edge of UTF-8 in each string of a running workload, as protobuf takes it."""
    raw = field(1, b"c") + field(2, field(3, record(text)))
    got = same_as_protobuf(raw)
    assert (got is not None) == (text == "é€😀".encode())
