"""What the server logs per PolicyService call (``service.rpc_log``).

A call that did not end OK has its own ``info`` line with its request id; an OK call's line is
``debug``; every call is counted in an ``rpcs`` summary written within the interval after the
first call it counts, and on stop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb
from structlog.testing import capture_logs
from structlog.typing import EventDict

from strata_policy.model import Scope, Snapshot
from strata_policy.service import convert
from strata_policy.service.client import Client, RpcError
from strata_policy.service.config import ServerConfig
from strata_policy.service.rpc_log import MAX_LOGGED_ID, RpcLog
from strata_policy.service.server import Server
from strata_policy.testing import node

OK = grpc.StatusCode.OK
CODES = (OK, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL)


@pytest.fixture
def all_levels() -> Iterator[None]:
    """structlog lets every level through (the suite's default drops below warning)."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        yield
    finally:
        structlog.configure(wrapper_class=wrapper)


@contextmanager
def own_lines() -> Iterator[list[EventDict]]:
    """``capture_logs``, keeping only the lines this thread writes.

    A server another test started (the session's) writes its summary from its own loop thread
    when its timer is up, which may be inside a capture window here.
    """
    me = threading.get_ident()

    def this_thread(logger: Any, method: str, event: EventDict) -> EventDict:
        if threading.get_ident() != me:
            raise structlog.DropEvent
        return event

    with capture_logs(processors=[this_thread]) as logs:
        yield logs


def _admit(cluster_id: str = "c", request_id: str = "r-1") -> svc.AdmitRequest:
    workload = pb.Workload(id="w", scope_id="team", request={"cpu": 1})
    return svc.AdmitRequest(cluster_id=cluster_id, request_id=request_id, workloads=[workload])


@pytest.mark.usefixtures("all_levels")
@pytest.mark.parametrize(
    ("code", "response", "level", "generation"),
    [
        pytest.param(OK, svc.AdmitResponse(generation=4), "debug", 4, id="OK: debug only"),
        pytest.param(grpc.StatusCode.NOT_FOUND, None, "info", None, id="NOT_FOUND: info"),
        pytest.param(grpc.StatusCode.INTERNAL, None, "info", None, id="INTERNAL: info"),
        pytest.param(
            grpc.StatusCode.FAILED_PRECONDITION, None, "info", None, id="FAILED_PRECONDITION: info"
        ),
    ],
)
def test_a_calls_own_line(
    code: grpc.StatusCode, response: Any, level: str, generation: int | None
) -> None:
    """Each call has one ``rpc`` line with its ids and code: ``info`` unless it ended OK."""
    rpc_log = RpcLog()
    with own_lines() as logs:
        rpc_log.record("Admit", _admit("prod", "r-7"), response, code, 0.0025)
    assert logs == [
        {
            "event": "rpc",
            "log_level": level,
            "method": "Admit",
            "cluster_id": "prod",
            "request_id": "r-7",
            "generation": generation,
            "code": code.name,
            "duration_ms": 2.5,
        }
    ]


@pytest.mark.usefixtures("all_levels")
def test_a_huge_id_is_cut_in_the_line_and_the_summary() -> None:
    """A refused call's megabyte ids are logged as their first ``MAX_LOGGED_ID`` characters and
    their length, in its line and in the summary that names it the slowest."""
    rpc_log = RpcLog()
    huge = "x" * 1_000_000
    with own_lines() as logs:
        rpc_log.record("Admit", _admit(huge, huge), None, grpc.StatusCode.INVALID_ARGUMENT, 0.5)
        rpc_log.flush()
    cut = "x" * MAX_LOGGED_ID + "… (1,000,000 characters)"
    assert (logs[0]["cluster_id"], logs[0]["request_id"]) == (cut, cut)
    assert (logs[1]["slowest_cluster_id"], logs[1]["slowest_request_id"]) == (cut, cut)


@pytest.mark.usefixtures("all_levels")
def test_a_refused_call_is_logged_without_a_request() -> None:
    """A call refused before its bytes are read logs empty ids, not an error of its own."""
    rpc_log = RpcLog()
    with own_lines() as logs:
        rpc_log.record("Admit", None, None, grpc.StatusCode.UNAUTHENTICATED, 0.0)
        rpc_log.flush()
    assert [(x["event"], x["log_level"]) for x in logs] == [("rpc", "info"), ("rpcs", "info")]
    assert (logs[0]["cluster_id"], logs[0]["request_id"], logs[0]["generation"]) == ("", "", None)
    assert (logs[1]["slowest_cluster_id"], logs[1]["slowest_request_id"]) == ("", "")


@pytest.mark.usefixtures("all_levels")
def test_the_summary_counts_by_method_and_code_and_names_the_slowest() -> None:
    """``flush`` writes the calls since the last summary by method and code, then resets."""
    rpc_log = RpcLog()
    calls = [
        ("Admit", OK, 0.001, "a"),
        ("Admit", OK, 0.004, "b"),
        ("Admit", grpc.StatusCode.NOT_FOUND, 0.002, "c"),
        ("Place", OK, 0.003, "d"),
    ]
    with own_lines() as logs:
        for method, code, seconds, request_id in calls:
            rpc_log.record(method, _admit(request_id=request_id), None, code, seconds)
        rpc_log.flush()
        rpc_log.flush()  # nothing counted since: no line
    summaries = [x for x in logs if x["event"] == "rpcs"]
    assert summaries == [
        {
            "event": "rpcs",
            "log_level": "info",
            "calls": 4,
            "by_method": {"Admit": {"NOT_FOUND": 1, "OK": 2}, "Place": {"OK": 1}},
            "slowest_method": "Admit",
            "slowest_cluster_id": "c",
            "slowest_request_id": "b",
            "slowest_ms": 4.0,
        }
    ]


@pytest.mark.usefixtures("all_levels")
def test_the_summary_is_written_by_the_loop_within_its_interval() -> None:
    """On a loop, the first call counted arms one timer; it writes the summary, and an idle
    loop writes nothing more."""
    rpc_log = RpcLog(every=0.05)

    async def scenario() -> None:
        rpc_log.record("Admit", _admit(), None, OK, 0.001)
        rpc_log.record("Admit", _admit(), None, OK, 0.001)
        await asyncio.sleep(0.3)

    with own_lines() as logs:
        asyncio.run(scenario())
    assert [(x["event"], x.get("calls")) for x in logs if x["log_level"] == "info"] == [("rpcs", 2)]


@pytest.mark.parametrize(
    ("level", "debug"),
    [
        pytest.param(logging.DEBUG, True, id="debug: OK calls get their line"),
        pytest.param(logging.INFO, False, id="info: OK calls are only counted"),
        pytest.param(logging.WARNING, False, id="warning: OK calls are only counted"),
    ],
)
def test_the_level_is_read_when_the_log_is_made(level: int, debug: bool) -> None:
    """An ``RpcLog`` made under a level writes OK calls' lines only if it lets debug through."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))
    try:
        rpc_log = RpcLog()
        with own_lines() as logs:
            rpc_log.record("Admit", _admit(), None, OK, 0.001)
    finally:
        structlog.configure(wrapper_class=wrapper)
    assert rpc_log.debug is debug
    assert [x["log_level"] for x in logs] == (["debug"] if debug else [])


@pytest.mark.parametrize("every", [0.0, -1.0, float("nan")])
def test_a_summary_interval_must_be_positive(every: float) -> None:
    """A zero, negative or NaN interval is refused when the log is made."""
    with pytest.raises(ValueError, match="must be positive"):
        RpcLog(every=every)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("Admit", "Place", "GetCluster")),
            st.sampled_from(CODES),
            st.floats(0, 5, allow_nan=False),
            st.booleans(),
        ),
        max_size=30,
    )
)
def test_every_call_is_counted_once_and_every_failure_has_a_line(
    calls: list[tuple[str, grpc.StatusCode, float, bool]],
) -> None:
    """Over any calls and flushes, the summaries count each call once, and each non-OK call
    has exactly one ``info`` line with its request id."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        rpc_log = RpcLog()
        with own_lines() as logs:
            for i, (method, code, seconds, flush) in enumerate(calls):
                rpc_log.record(method, _admit(request_id=f"r{i}"), None, code, seconds)
                if flush:
                    rpc_log.flush()
            rpc_log.flush()
    finally:
        structlog.configure(wrapper_class=wrapper)
    counted: dict[tuple[str, str], int] = {}
    for summary in (x for x in logs if x["event"] == "rpcs"):
        for method, codes in summary["by_method"].items():
            for code, n in codes.items():
                counted[method, code] = counted.get((method, code), 0) + n
    expected: dict[tuple[str, str], int] = {}
    for method, code, _, _ in calls:
        expected[method, code.name] = expected.get((method, code.name), 0) + 1
    assert counted == expected
    lines = [x["request_id"] for x in logs if x["event"] == "rpc"]
    assert lines == [f"r{i}" for i, (_, code, _, _) in enumerate(calls) if code is not OK]


@pytest.mark.usefixtures("all_levels")
def test_a_server_logs_failures_per_call_and_counts_the_rest_on_stop() -> None:
    """Through a real server: the failed call's line carries its request id, the OK ones are
    debug lines, and stopping the server writes the summary of them all."""
    srv = Server(ServerConfig(address="127.0.0.1:0", workers=2))
    srv.start()
    snapshot = Snapshot(nodes=(node("n0", cpu=8000),), scopes=(Scope("team"),))
    client = Client(f"127.0.0.1:{srv.port}")
    # The capture takes every server's lines: the session's server writes its summary on its
    # own timer, maybe in this window. This server's lines are told apart by cluster ids no
    # other test uses (a summary names its slowest call's).
    cid, missing = f"rpc-log-{uuid.uuid4().hex[:8]}", f"missing-{uuid.uuid4().hex[:8]}"
    with capture_logs() as captured:

        def logs() -> list[dict[str, Any]]:
            return [
                x
                for x in captured
                if {x.get("cluster_id"), x.get("slowest_cluster_id")} & {cid, missing}
            ]

        try:
            push = {"clusterId": cid, "snapshot": {}}
            client.call("PushSnapshot", push | {"snapshot": _json(snapshot)})
            client.call("Admit", {"clusterId": cid, "requestId": "ok-1", "dryRun": True,
                                  "workloads": [{"id": "w", "scopeId": "team",
                                                 "request": {"cpu": "1"}}]})  # fmt: skip
            with pytest.raises(RpcError):
                client.call("GetCluster", {"clusterId": missing})
        finally:
            client.close()
            deadline = time.monotonic() + 30
            while sum(x["event"] == "rpc" for x in logs()) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)  # the lines are written just after the answers
            srv.grpc.stop(0)
        mine = logs()
    rpc = {x["method"]: x for x in mine if x["event"] == "rpc"}
    assert {m: (x["log_level"], x["code"]) for m, x in rpc.items()} == {
        "PushSnapshot": ("debug", "OK"),
        "Admit": ("debug", "OK"),
        "GetCluster": ("info", "NOT_FOUND"),
    }
    assert rpc["GetCluster"]["cluster_id"] == missing
    assert rpc["Admit"]["request_id"] == "ok-1"
    (summary,) = [x for x in mine if x["event"] == "rpcs"]
    assert summary["by_method"] == {
        "Admit": {"OK": 1},
        "GetCluster": {"NOT_FOUND": 1},
        "PushSnapshot": {"OK": 1},
    }


def _json(snapshot: Snapshot) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict  # noqa: PLC0415

    return MessageToDict(convert.snapshot_to_proto(snapshot))
