"""Place requests read from their bytes: the same workloads, message and errors as protobuf."""

from __future__ import annotations

from dataclasses import replace

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import Workload
from strata_policy.service import convert, place_request_decoder

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

names = st.text("abcxyz-./0123é", max_size=8)
int64s = st.integers(-(2**63), 2**63 - 1)
workload_messages = st.builds(
    pb.Workload,
    id=names | st.sampled_from(["x" * 127, "y" * 128, "z" * 300]),
    scope_id=st.sampled_from(["", "org", "team"]),
    request=st.dictionaries(st.sampled_from(["cpu", "gpu", "memory", "rdma"]), int64s, max_size=3),
    replicas=st.integers(-(2**31), 2**31 - 1),
    priority=st.sampled_from([0, 5, -1]),
    preemptible=st.sampled_from([None, True, False]),
    node_selector=st.dictionaries(names, names, max_size=2),
    gpu_model=st.sampled_from(["", "A100", "V100M16|V100M32"]),
    spread=st.sampled_from([None, pb.Spread(), pb.Spread(topology_key="zone")]),
    queued_at_ms=st.sampled_from([0, 17, 2**62, 2**63 - 1, -1]) | st.integers(0, 2**45),
)
requests = st.builds(
    svc.PlaceRequest,
    cluster_id=names,
    workloads=st.lists(workload_messages, max_size=6),
    workload_ids=st.lists(names, max_size=2),
    order=st.sampled_from([pb.ORDER_UNSPECIFIED, pb.ORDER_FAIR]),
    policy=st.sampled_from([pb.POLICY_UNSPECIFIED, pb.POLICY_BEST_FIT]),
    dry_run=st.booleans(),
    expected_generation=st.sampled_from([0, 7]),
    request_id=names,
    resource_weights=st.dictionaries(st.sampled_from(["cpu", "gpu"]), st.floats(0, 2), max_size=2),
    seed=st.sampled_from([0, 2**64 - 1]),
    now_ms=st.sampled_from([0, 1234]),
)


def protobuf_reads(raw: bytes) -> tuple[svc.PlaceRequest, list[Workload]]:
    """The general path: protobuf parses, ``convert`` converts; the message loses its workloads."""
    message = svc.PlaceRequest.FromString(raw)
    workloads = convert.workloads_from_proto(message.workloads)
    message.ClearField("workloads")
    return message, workloads


def assert_tags_honest(decoded: place_request_decoder.DecodedPlace) -> None:
    """A tag per workload; workloads under one tag (by identity) are equal but for id and
    queued_at_ms."""
    seen: dict[int, Workload] = {}
    for w, tag in zip(decoded.workloads, decoded.tags, strict=True):
        first = seen.setdefault(id(tag), w)
        assert replace(w, id="", queued_at_ms=0) == replace(first, id="", queued_at_ms=0)


def assert_reads_alike(raw: bytes) -> None:
    """``decode_place`` equals the general path: workloads field for field, message byte for
    byte, and a DecodeError exactly where protobuf raises one."""
    try:
        message, workloads = protobuf_reads(raw)
    except DecodeError:
        with pytest.raises(DecodeError):
            place_request_decoder.decode_place(raw)
        return
    for _ in range(2):  # the second time from the cached tails
        decoded = place_request_decoder.decode_place(raw)
        assert decoded.workloads == workloads
        assert [list(w.request.items()) for w in decoded.workloads] == [
            list(w.request.items()) for w in workloads
        ]
        assert [dict(w.node_selector) for w in decoded.workloads] == [
            dict(w.node_selector) for w in workloads
        ]
        assert decoded.message.SerializeToString() == message.SerializeToString()
        assert_tags_honest(decoded)
        assert (decoded.cluster_id, decoded.request_id, decoded.dry_run) == (
            message.cluster_id,
            message.request_id,
            message.dry_run,
        )


@settings(max_examples=200)
@given(requests)
def test_decode_equals_protobuf(request: svc.PlaceRequest) -> None:
    """Any request reads as protobuf and ``convert`` read it."""
    assert_reads_alike(request.SerializeToString())


@settings(max_examples=300)
@given(requests, st.data())
def test_damaged_bytes_read_as_protobuf_reads_them(
    request: svc.PlaceRequest, data: st.DataObject
) -> None:
    """Cut, overwritten or extended bytes give protobuf's answer: the same values or its error."""
    raw = bytearray(request.SerializeToString())
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.integers(0, len(raw)))
        what = data.draw(st.sampled_from(["cut", "byte", "insert"]))
        if what == "cut":
            del raw[where:]
        elif what == "byte" and where < len(raw):
            raw[where] = data.draw(st.integers(0, 255))
        else:
            raw[where:where] = data.draw(st.binary(min_size=1, max_size=3))
    assert_reads_alike(bytes(raw))


W = pb.Workload(id="w", scope_id="org", request={"cpu": 1})
TAIL = W.SerializeToString()[3:]  # after the id's key, length and one byte
CASES = [
    pytest.param(b"", id="empty request"),
    pytest.param(
        svc.PlaceRequest(
            workloads=[
                pb.Workload(id=f"w{i}", scope_id="org", gpu_model="aP\x05") for i in range(2)
            ]
        ).SerializeToString(),
        id="tail ending like a stamp that is not one",
    ),
    pytest.param(
        svc.PlaceRequest(
            workloads=[pb.Workload(id=f"w{i}", gpu_model="P\x05", queued_at_ms=i) for i in range(3)]
        ).SerializeToString(),
        id="stamps after a string ending like a stamp",
    ),
    pytest.param(
        svc.PlaceRequest(workloads=[pb.Workload()]).SerializeToString(), id="empty workload"
    ),
    pytest.param(svc.PlaceRequest(workloads=[W, W, W]).SerializeToString(), id="equal workloads"),
    pytest.param(b"\x12\x03\x0a\x01w" + b"\x12\x00", id="workload, then an empty one last"),
    pytest.param(
        b"\x12" + bytes([3 + len(TAIL) + 3]) + b"\x0a\x01w" + TAIL + b"\x0a\x01v",
        id="tail sets the id again",
    ),
    pytest.param(
        b"\x12" + bytes([3 + len(TAIL) + 2]) + b"\x0a\x01w" + TAIL + b"\x0a\x00",
        id="tail sets the id again, to empty",
    ),
    pytest.param(
        b"\x12" + bytes([3 + len(TAIL) + 3]) + b"\x0a\x01w" + TAIL + b"\x0a\x80\x00",
        id="tail sets the id to empty, length in two bytes",
    ),
    pytest.param(
        b"\x12" + bytes([3 + len(TAIL) + 2]) + b"\x0a\x01w" + TAIL + b"\x58\x01",
        id="unknown field in a workload",
    ),
    pytest.param(
        b"\x10\x05" + svc.PlaceRequest(workloads=[W]).SerializeToString(),
        id="field 2 as a varint: unknown",
    ),
    pytest.param(b"\x92\x00\x03\x0a\x01w", id="workloads key spelled in two bytes"),
    pytest.param(b"\x12\x03\x0a\x01\xff", id="id not UTF-8"),
    pytest.param(b"\x12\x05\x0a\x01w", id="workload runs past the end"),
    pytest.param(b"\x12\x03\x0a\x05w", id="id runs past its workload"),
    pytest.param(b"\x0b\x0c" + svc.PlaceRequest(workloads=[W]).SerializeToString(), id="a group"),
    pytest.param(b"\x00\x01", id="field 0"),
    pytest.param(b"\x0a\x80\x80\x80\x80\x80\x01p", id="overlong length"),
    pytest.param(b"\x08" + b"\xff" * 11 + b"\x01", id="varint of twelve bytes"),
    pytest.param(b"\x12\x80\x01\x0a\x7e" + b"w" * 126, id="workload length in two bytes"),
]


@pytest.mark.parametrize("raw", CASES)
def test_unusual_bytes_read_as_protobuf_reads_them(raw: bytes) -> None:
    """Each unusual layout or damage gives protobuf's answer."""
    assert_reads_alike(raw)


def test_a_tail_is_parsed_once_and_shared() -> None:
    """Workloads with one tail share its request dict (the values are immutable)."""
    raw = svc.PlaceRequest(
        workloads=[pb.Workload(id=f"w{i}", scope_id="org", request={"gpu": 1000}) for i in range(3)]
    ).SerializeToString()
    first, *others = place_request_decoder.decode_place(raw).workloads
    assert all(w.request is first.request for w in others)
    assert [w.id for w in (first, *others)] == ["w0", "w1", "w2"]


def test_stamped_workloads_share_their_head() -> None:
    """Workloads alike but for their ``queued_at_ms`` read from one cached head."""
    stamps = [1, 2**40 + 7, 2**63 - 1, 300]
    raw = svc.PlaceRequest(
        workloads=[
            pb.Workload(id=f"w{i}", scope_id="org", request={"gpu": 1000}, queued_at_ms=t)
            for i, t in enumerate(stamps)
        ]
    ).SerializeToString()
    assert_reads_alike(raw)
    decoded = place_request_decoder.decode_place(raw).workloads
    assert [w.queued_at_ms for w in decoded] == stamps
    assert all(w.request is decoded[0].request for w in decoded)


def test_long_tails_are_read_but_not_kept() -> None:
    """A tail longer than the cache takes is read by protobuf every time, and not kept."""
    selector = {f"key{i}": "v" * 40 for i in range(30)}
    alike = [pb.Workload(id=f"w{i}", scope_id="org", node_selector=selector) for i in range(2)]
    raw = svc.PlaceRequest(workloads=alike).SerializeToString()
    assert_reads_alike(raw)
    assert all(
        len(tail) <= place_request_decoder._MAX_TAIL_BYTES for tail in place_request_decoder._tails
    )


@settings(max_examples=150)
@given(
    base=workload_messages,
    other=workload_messages,
    picks=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 9)), min_size=1, max_size=60),
    request_id=names,
)
def test_runs_of_one_tail_read_alike(
    base: pb.Workload, other: pb.Workload, picks: list[tuple[int, int]], request_id: str
) -> None:
    """Batches repeating one tail (read as a run, ``place_request_decoder._run``) read as
    protobuf reads them: ids of any length, ids holding the tail's own bytes, another tail mixed
    in, fields after."""
    shared = pb.Workload()
    shared.CopyFrom(base)
    shared.ClearField("id")
    tail = shared.SerializeToString().decode("utf-8", "ignore")
    odd = ["", "x" * 130, tail, f"a{tail}", f"{tail}{tail}", tail[:3]]
    workloads = []
    for i, (kind, which) in enumerate(picks):
        w = pb.Workload()
        w.CopyFrom(other if kind == 7 else shared)  # one in eight from another tail
        w.id = odd[which] if which < len(odd) and kind == 0 else f"w{i}"
        workloads.append(w)
    request = svc.PlaceRequest(cluster_id="c", workloads=workloads, request_id=request_id)
    assert_reads_alike(request.SerializeToString())


@settings(max_examples=100)
@given(
    base=workload_messages,
    stamps=st.lists(st.integers(0, 2**63 - 1), min_size=8, max_size=40),
    same=st.booleans(),
)
def test_batches_of_one_tag_read_alike(base: pb.Workload, stamps: list[int], same: bool) -> None:
    """A batch of workloads alike but for id, and for their stamps or not, reads as protobuf
    reads it: one tail is one tag (``place_request_decoder._workloads`` repeats its fields),
    stamps a head's."""
    workloads = []
    for i, stamp in enumerate(stamps):
        w = pb.Workload()
        w.CopyFrom(base)
        w.id = f"w{i}"
        w.queued_at_ms = stamps[0] if same else stamp
        workloads.append(w)
    assert_reads_alike(svc.PlaceRequest(cluster_id="c", workloads=workloads).SerializeToString())


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(["w0", "w\x001", "w2", "w3"], id="an id holding NUL"),
        pytest.param(["w0", "é", "\u2603", "w3"], id="ids not ascii"),
        pytest.param(["w0", "", "w2", ""], id="empty ids"),
    ],
)
def test_run_ids_read_alike(ids: list[str]) -> None:
    """A run's ids, joined and split or read one by one, are protobuf's."""
    raw = svc.PlaceRequest(
        workloads=[pb.Workload(id=i, scope_id="org", request={"gpu": 1000}) for i in ids]
    ).SerializeToString()
    assert_reads_alike(raw)
