"""What a client sends cannot take the server's capacity: slots, workers, readable errors.

A server with 2 engine workers and 8 concurrency slots is sent what a careless or hostile client
sends (bytes that do not parse, oversize requests, deadline storms, cancelled calls, idle
streams); afterwards no slot is held and other clients are served at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status
from strata.policy.v1 import policy_service_pb2 as svc

from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.service.client import Client, RpcError
from strata_policy.service.config import ServerConfig
from strata_policy.service.server import Server
from strata_policy.service.status import MAX_VIOLATIONS, to_status

SERVICE = "/strata.policy.v1.PolicyService/"
SLOTS = 8
MAX_MESSAGE = 64 * 1024


class Recorder:
    """Counts finished RPCs by (method, code), as the metrics do."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        """Record one RPC."""
        with self.lock:
            self.seen.append((method, code))


@pytest.fixture(scope="module")
def small() -> Iterator[Server]:
    """A started server with 2 workers, 8 slots and 64 KiB messages, metrics recorded."""
    config = ServerConfig(
        address="127.0.0.1:0", workers=2, max_concurrent_rpcs=SLOTS, max_message_bytes=MAX_MESSAGE
    )
    srv = Server(config)
    srv.gate.observer = Recorder()
    srv.start()
    Client(f"127.0.0.1:{srv.port}").call("PushSnapshot", {"clusterId": "c", "snapshot": {}})
    yield srv
    srv.grpc.stop(0)


@pytest.fixture
def channel(small: Server) -> Iterator[grpc.Channel]:
    """A channel of its own to the small server."""
    with grpc.insecure_channel(f"127.0.0.1:{small.port}") as ch:
        yield ch


def raw_call(channel: grpc.Channel, method: str, data: bytes, timeout: float = 10) -> grpc.RpcError:
    """Send ``data`` as the request's bytes; the error the server answers with."""
    call = channel.unary_unary(SERVICE + method)
    with pytest.raises(grpc.RpcError) as caught:
        call(data, timeout=timeout)
    return caught.value


def error_info(exc: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The ErrorInfo detail of a failed call."""
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]  # an RpcError is a Call
    assert status is not None, f"no rich status: {exc}"
    info = error_details_pb2.ErrorInfo()
    assert any(d.Unpack(info) for d in status.details if d.Is(info.DESCRIPTOR))
    return info


def served_normally(small: Server) -> None:
    """No slot is held once the calls sent have ended, and another client's call succeeds.

    The bounds are hang guards (a loaded 2-core machine answers slowly, never wrongly): a slot
    held for good would fail the first assertion, and a worker held for good the call."""
    deadline = time.monotonic() + 30
    while small.slots.in_use and time.monotonic() < deadline:
        time.sleep(0.01)
    assert small.slots.in_use == 0
    client = Client(f"127.0.0.1:{small.port}", timeout=30)
    try:
        assert client.call("GetCluster", {"clusterId": "c"})["generation"] == "1"
        assert client.health() == "SERVING"
    finally:
        client.close()


@pytest.mark.parametrize(
    ("method", "data"),
    [
        pytest.param("Admit", b"\xff\xff\xff\xff", id="admit: garbage"),
        pytest.param("Place", b"\x0a\x05ab", id="place: truncated field (own decoder)"),
        pytest.param("PushSnapshot", b"\x12\xff\xff\xff\xff\x0f", id="push: length past the end"),
        pytest.param("GetCluster", b"\x0a\x02\xc3\x28", id="get: invalid UTF-8 cluster id"),
    ],
)
def test_undecodable_bytes_are_invalid_argument(
    small: Server, channel: grpc.Channel, method: str, data: bytes
) -> None:
    """Bytes that do not parse: INVALID_ARGUMENT with an ErrorInfo, logged and counted."""
    exc = raw_call(channel, method, data)
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert error_info(exc).reason == "INVALID_ARGUMENT"
    assert f"{method}Request: the request's bytes do not parse" in (exc.details() or "")
    observer = small.gate.observer
    assert isinstance(observer, Recorder)
    deadline = time.monotonic() + 30  # observed just after the answer is sent
    while (method, "INVALID_ARGUMENT") not in observer.seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (method, "INVALID_ARGUMENT") in observer.seen
    served_normally(small)


def _garbage(channel: grpc.Channel) -> None:
    for _ in range(3 * SLOTS):
        raw_call(channel, "Admit", b"\xff\xff\xff")


def _oversize(channel: grpc.Channel) -> None:
    for _ in range(3 * SLOTS):
        exc = raw_call(channel, "GetCluster", b"\x0a" + b"\xff\xff\x0f" + b"x" * (2 * MAX_MESSAGE))
        assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def _deadline_storm(channel: grpc.Channel) -> None:
    call = channel.unary_unary(
        SERVICE + "GetCluster",
        request_serializer=svc.GetClusterRequest.SerializeToString,
        response_deserializer=svc.GetClusterResponse.FromString,
    )
    request = svc.GetClusterRequest(cluster_id="c", include_snapshot=True)
    for _ in range(3):
        pending = [call.future(request, timeout=0.002) for _ in range(100)]
        for f in pending:
            f.exception()  # wait for each to end, whatever its outcome


def _cancelled(channel: grpc.Channel) -> None:
    call = channel.unary_unary(SERVICE + "GetCluster")
    for _ in range(3 * SLOTS):
        call.future(svc.GetClusterRequest(cluster_id="c").SerializeToString()).cancel()


@pytest.mark.parametrize(
    "storm",
    [
        pytest.param(_garbage, id="undecodable bytes"),
        pytest.param(_oversize, id="requests over the size limit"),
        pytest.param(_deadline_storm, id="300 calls with a 2 ms deadline"),
        pytest.param(_cancelled, id="calls cancelled at once"),
    ],
)
def test_calls_that_do_no_work_leave_no_slot(
    small: Server, channel: grpc.Channel, storm: Callable[[grpc.Channel], None]
) -> None:
    """After many times the slot count of calls that never run, every slot is free again."""
    storm(channel)
    served_normally(small)


def test_idle_streams_hold_no_worker(small: Server) -> None:
    """16 idle reflection streams and 16 health watches on 2 workers: unary calls still run."""
    channel = grpc.insecure_channel(f"127.0.0.1:{small.port}")
    reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
    watch = health_pb2_grpc.HealthStub(channel)
    idle = threading.Event()

    def never() -> Iterator[reflection_pb2.ServerReflectionRequest]:
        idle.wait(30)
        return
        yield  # a generator that sends nothing until the test ends

    streams: list[Any] = [reflect.ServerReflectionInfo(never(), timeout=60) for _ in range(16)]
    watches = [watch.Watch(health_pb2.HealthCheckRequest(), timeout=60) for _ in range(16)]
    streams += watches
    try:
        # every watch has been taken up (its first status came); the reflection streams were
        # opened before them on the same channel
        assert all(next(w).status == health_pb2.HealthCheckResponse.SERVING for w in watches)
        check = watch.Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert check.status == health_pb2.HealthCheckResponse.SERVING
        served_normally(small)
    finally:
        idle.set()
        for stream in streams:
            stream.cancel()
        channel.close()


def test_a_full_server_says_not_serving(small: Server) -> None:
    """Health/Check answers NOT_SERVING while every slot is taken, SERVING again after."""
    client = Client(f"127.0.0.1:{small.port}", timeout=30)
    try:
        small.slots.in_use += SLOTS  # as if 8 calls were running
        try:
            assert client.health() == "NOT_SERVING"
            with pytest.raises(RpcError) as refused:
                client.call("GetCluster", {"clusterId": "c"})
            assert (refused.value.code, refused.value.reason) == (
                "RESOURCE_EXHAUSTED",
                "SIZE_LIMIT_EXCEEDED",
            )
        finally:
            small.slots.in_use -= SLOTS
        assert client.health() == "SERVING"
    finally:
        client.close()


def test_calls_before_ready_are_unavailable_at_once() -> None:
    """Before start-up is done, calls end UNAVAILABLE with a RetryInfo, without waiting."""
    srv = Server(ServerConfig(address="127.0.0.1:0", workers=1))
    try:
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = health.Check(health_pb2.HealthCheckRequest(), timeout=30)
            assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
            # this server never becomes ready: a call held until it is would end
            # DEADLINE_EXCEEDED, so UNAVAILABLE proves it was answered without waiting
            exc = raw_call(channel, "GetCluster", b"", timeout=30)
        assert exc.code() == grpc.StatusCode.UNAVAILABLE
        assert error_info(exc).reason == "SERVER_NOT_READY"
        status = rpc_status.from_call(exc)  # type: ignore[arg-type]  # an RpcError is a Call
        assert status is not None
        retry = error_details_pb2.RetryInfo()
        assert any(d.Unpack(retry) for d in status.details if d.Is(retry.DESCRIPTOR))
        assert retry.retry_delay.ToMilliseconds() > 0
    finally:
        srv.grpc.stop(0)


def _cycle(n: int) -> dict[str, Any]:
    return {"scopes": [{"id": f"s{i}", "parentId": f"s{(i + 1) % n}"} for i in range(n)]}


def _bad_nodes(n: int) -> dict[str, Any]:
    return {"nodes": [{"id": f"n{i}", "capacity": {"cpu": "-1"}} for i in range(n)]}


@pytest.mark.parametrize(
    "snapshot",
    [
        pytest.param(_cycle(5000), id="a 5,000-scope cycle"),
        pytest.param(_bad_nodes(5000), id="5,000 bad nodes"),
    ],
)
def test_big_errors_stay_readable(server: Server, snapshot: dict[str, Any]) -> None:
    """A huge error reaches a default client as INVALID_ARGUMENT with capped details."""
    client = Client(f"127.0.0.1:{server.port}", timeout=30)
    try:
        with pytest.raises(RpcError) as caught:
            client.call("PushSnapshot", {"clusterId": "big-error", "snapshot": snapshot})
    finally:
        client.close()
    assert caught.value.code == "INVALID_ARGUMENT", caught.value
    assert 1 <= len(caught.value.violations) <= 20
    assert all(len(f) + len(d) <= 400 for f, d in caught.value.violations)


def test_error_details_are_capped() -> None:
    """5,000 violations: the first 20 are sent, the count says 5,000, the status stays small."""
    exc = InvalidArgument([FieldViolation(f"nodes[{i}].id", "x" * 1000) for i in range(5000)])
    status = to_status(exc)
    info = error_details_pb2.ErrorInfo()
    bad = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(info)
    assert status.details[1].Unpack(bad)
    assert len(bad.field_violations) == MAX_VIOLATIONS
    assert (info.metadata["violations"], info.metadata["violations_shown"]) == ("5000", "20")
    assert len(status.SerializeToString()) < 8 * 1024


def test_many_clients_in_parallel_are_all_served(small: Server) -> None:
    """Calls from 16 threads at once, 4 times the slots: each ends OK or RESOURCE_EXHAUSTED,
    and every slot is free afterwards."""
    client = Client(f"127.0.0.1:{small.port}", timeout=30)

    def one(i: int) -> str:
        try:
            client.call("GetCluster", {"clusterId": "c"})
        except RpcError as exc:
            return exc.code
        return "OK"

    try:
        with futures.ThreadPoolExecutor(16) as pool:
            codes = set(pool.map(one, range(400)))
    finally:
        client.close()
    assert codes <= {"OK", "RESOURCE_EXHAUSTED"}
    assert "OK" in codes
    served_normally(small)
