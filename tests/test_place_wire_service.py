"""The Place and Admit handlers the server registers (bytes in or out) answer as the message
translations (``message_servicer``) do."""

from __future__ import annotations

from typing import Any

import pytest
from fake_context import Aborted, Context
from hypothesis import given, settings
from hypothesis import strategies as st
from message_servicer import MessageServicer
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.engine import Engine
from strata_policy.errors import PermissionDenied
from strata_policy.model import Scope, Snapshot
from strata_policy.service.auth import Grant, check_request
from strata_policy.service.place_request_decoder import decode_place
from strata_policy.service.result_encoder import encoded_data
from strata_policy.testing import node


def _servicer() -> MessageServicer:
    engine = Engine()
    nodes = tuple(
        node(f"n{i}", cpu=8, gpus=2 * (i % 3), labels={"zone": f"z{i % 2}"}) for i in range(6)
    )
    scopes = (
        Scope("org"),
        Scope("a", "org", guarantee={"gpu": 2000}, limit={"cpu": 24000}),
        Scope("b", "org"),
    )
    engine.push_snapshot("c", Snapshot(nodes, scopes))
    return MessageServicer(engine)


def _answer(call: Any, request: Any) -> tuple[str, Any]:
    """("ok", the response) or ("aborted", (code, details, trailing metadata))."""
    context = Context()
    try:
        return "ok", call(request, context)
    except Aborted:
        s = context.status
        return "aborted", (s.code, s.details, tuple(s.trailing_metadata))


def _assert_same(expected: tuple[str, Any], got: tuple[str, Any]) -> None:
    """A message answer and an encoded one are the same bytes and generation; errors equal."""
    if expected[0] == "ok":
        assert got[0] == "ok"
        assert encoded_data(got[1]) == expected[1].SerializeToString()
        assert got[1].generation == expected[1].generation
    else:
        assert got == expected


workloads = st.builds(
    pb.Workload,
    id=st.sampled_from(["w1", "w2", "w3", "w4", "", "x" * 300]),
    scope_id=st.sampled_from(["a", "b", "org", "nope"]),
    request=st.dictionaries(
        st.sampled_from(["cpu", "gpu", ""]),
        st.sampled_from([0, 500, 1000, 1500, 4000, -1]),
        max_size=2,
    ),
    replicas=st.sampled_from([0, 1, 2, 20_000]),
    priority=st.sampled_from([0, 3]),
    preemptible=st.sampled_from([None, False]),
    node_selector=st.sampled_from([{}, {"zone": "z1"}]),
    spread=st.sampled_from([None, pb.Spread(topology_key="zone")]),
)
requests = st.builds(
    svc.PlaceRequest,
    cluster_id=st.sampled_from(["c", "c", "c", "unknown"]),
    workloads=st.lists(workloads, max_size=40),
    workload_ids=st.lists(st.sampled_from(["w1", "zz"]), max_size=1),
    order=st.sampled_from([pb.ORDER_FIFO, pb.ORDER_PRIORITY, pb.ORDER_FAIR]),
    policy=st.sampled_from([pb.POLICY_FIRST_FIT, pb.POLICY_MOST_ALLOCATED]),
    dry_run=st.booleans(),
    resource_weights=st.sampled_from([{}, {"cpu": 2.0}, {"gpu": -1.0}]),
    now_ms=st.sampled_from([1, 1234]),  # not the engines' clocks: the states are compared
)


admits = st.builds(
    svc.AdmitRequest,
    cluster_id=st.sampled_from(["c", "c", "c", "unknown"]),
    workloads=st.lists(workloads, max_size=3),
    order=st.sampled_from([pb.ORDER_FIFO, pb.ORDER_FAIR]),
    dry_run=st.booleans(),
    request_id=st.sampled_from(["", "r1"]),
    expected_generation=st.sampled_from([0, 0, 1, -1]),
    now_ms=st.sampled_from([1, 1234]),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(admits, min_size=1, max_size=6))
def test_encoded_admit_equals_admit(batch: list[svc.AdmitRequest]) -> None:
    """Byte-identical answers, the same errors, and the same state after each call."""
    general, encoded = _servicer(), _servicer()
    for request in batch:
        _assert_same(_answer(general.admit_message, request), _answer(encoded.Admit, request))
        assert general.engine.snapshot("c") == encoded.engine.snapshot("c")


@settings(max_examples=60, deadline=None)
@given(st.lists(requests, min_size=1, max_size=3))
def test_wire_handler_equals_place(batch: list[svc.PlaceRequest]) -> None:
    """Byte-identical answers, the same errors, and the same state after each call."""
    general, wire = _servicer(), _servicer()
    for request in batch:
        raw = request.SerializeToString()
        expected = _answer(general.place_message, svc.PlaceRequest.FromString(raw))
        _assert_same(expected, _answer(wire.Place, decode_place(raw)))
        assert general.engine.snapshot("c") == wire.engine.snapshot("c")


def test_wire_handler_places_a_large_batch_as_place() -> None:
    """A batch big enough for the engine's fast lane gives the same bytes and state."""
    request = svc.PlaceRequest(
        cluster_id="c",
        workloads=[
            pb.Workload(id=f"w{i}", scope_id="ab"[i % 2], request={"cpu": 500}) for i in range(120)
        ],
        policy=pb.POLICY_MOST_ALLOCATED,
        now_ms=1,
    )
    general, wire = _servicer(), _servicer()
    raw = request.SerializeToString()
    expected = general.place_message(svc.PlaceRequest.FromString(raw), Context())  # type: ignore[arg-type]
    got = wire.Place(decode_place(raw), Context())  # type: ignore[arg-type]
    assert encoded_data(got) == expected.SerializeToString()
    assert general.engine.snapshot("c") == wire.engine.snapshot("c")


GRANTS = [
    Grant("team-a", frozenset({"a"}), read_write=True),
    Grant("viewer", frozenset({"a", "b"}), read_write=False),
    Grant("ops", frozenset({"*"}), read_write=True),
]


@pytest.mark.parametrize("grant", GRANTS, ids=lambda g: g.name)
@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(svc.PlaceRequest(cluster_id="a"), id="own cluster"),
        pytest.param(svc.PlaceRequest(cluster_id="b", dry_run=True), id="other cluster, dry run"),
        pytest.param(
            svc.PlaceRequest(cluster_id="a", workloads=[pb.Workload(id="w")]), id="with workloads"
        ),
    ],
)
def test_auth_reads_the_decoded_request_as_the_message(
    grant: Grant, request_: svc.PlaceRequest
) -> None:
    """Authorization sees the same cluster and dry run in the decoded request as in the message."""
    method = "/strata.policy.v1.PolicyService/Place"

    def outcome(request: object) -> str:
        try:
            check_request(grant, method, request)
        except PermissionDenied as exc:
            return str(exc)
        return "allowed"

    raw = request_.SerializeToString()
    assert outcome(decode_place(raw)) == outcome(svc.PlaceRequest.FromString(raw))
