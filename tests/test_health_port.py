"""The plaintext health-only port: what Kubernetes' gRPC probes reach when the API has TLS."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strata_policy.service.config import ServerConfig
from strata_policy.service.health_port import LIVENESS, HealthPort
from strata_policy.service.server import SERVICE_NAME, Server

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def check(port: int, service: str = "") -> int:
    """One plaintext Health/Check, as the kubelet's grpc probe makes it."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
        return int(reply.status)


@pytest.fixture
def port() -> Iterator[HealthPort]:
    """A started health port on a free loopback port."""
    hp = HealthPort("127.0.0.1:0", ("", SERVICE_NAME))
    hp.start()
    yield hp
    hp.stop(0)


def test_not_serving_until_told(port: HealthPort) -> None:
    """A new health port says NOT_SERVING, then whatever the server sets, for both names."""
    assert check(port.port) == NOT_SERVING
    port.set(SERVING)
    assert check(port.port) == SERVING
    assert check(port.port, SERVICE_NAME) == SERVING
    port.set(NOT_SERVING)
    assert check(port.port, SERVICE_NAME) == NOT_SERVING


def test_busy_is_not_ready_but_alive() -> None:
    """While busy() (every slot taken) Check says NOT_SERVING, except for ``liveness``, which
    is SERVING whenever the listener runs: load takes a pod out of the Service, never kills it."""
    busy = [False]
    hp = HealthPort("127.0.0.1:0", ("", SERVICE_NAME), busy=lambda: busy[0])
    assert (
        hp.servicer.Check(health_pb2.HealthCheckRequest(service=LIVENESS), None).status
        == NOT_SERVING
    )
    hp.start()
    try:
        hp.set(SERVING)
        assert check(hp.port) == SERVING
        busy[0] = True
        assert check(hp.port) == NOT_SERVING
        assert check(hp.port, SERVICE_NAME) == NOT_SERVING
        assert check(hp.port, LIVENESS) == SERVING
        busy[0] = False
        hp.set(NOT_SERVING)  # warming up or draining: not ready, still alive
        assert check(hp.port) == NOT_SERVING
        assert check(hp.port, LIVENESS) == SERVING
    finally:
        hp.stop(0)


def test_it_serves_nothing_but_health(port: HealthPort) -> None:
    """The PolicyService is not reachable on the health port (UNIMPLEMENTED)."""
    with grpc.insecure_channel(f"127.0.0.1:{port.port}") as channel:
        call = channel.unary_unary(f"/{SERVICE_NAME}/GetCluster")
        with pytest.raises(grpc.RpcError) as caught:
            call(b"", timeout=30)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_unknown_service_name_is_not_found(port: HealthPort) -> None:
    """Only the names the server reports are known, as on the API port."""
    with pytest.raises(grpc.RpcError) as caught:
        check(port.port, "other.Service")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_address_in_use_is_one_clear_error() -> None:
    """A taken address is an OSError naming it, before the server starts anything."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(OSError, match=f"cannot listen for health on {address}"):
            HealthPort(address)


def test_the_server_mirrors_its_health_on_the_health_port() -> None:
    """The server mirrors its health on --health-address: NOT_SERVING, SERVING, then draining.

    The API port here is plaintext to keep the test light; the health port does not depend on
    it (tests/test_tls.py covers TLS itself), which is the point: the probe never needs TLS.
    """
    server = Server(ServerConfig(address="127.0.0.1:0", health_address="127.0.0.1:0"))
    assert server.health_port is not None
    health_port = server.health_port.port
    server.health_port.start()  # as start() does first, before the slow restore and warm-up
    assert check(health_port) == NOT_SERVING
    server.start()
    try:
        assert check(health_port) == SERVING
        assert check(health_port, SERVICE_NAME) == SERVING
    finally:
        server.stop()
    with pytest.raises(grpc.RpcError):  # stopped with the server
        check(health_port)
