"""ctl and the server's states: warming up (wait for SERVING), then the call goes through."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc

from strata_policy.cli import main


class WarmingUp(svc_grpc.PolicyServiceServicer):
    """Answers UNAVAILABLE until health says SERVING, as a server compiling its kernels does."""

    def __init__(self, health_servicer: health.HealthServicer) -> None:
        self.health = health_servicer
        self.serving = threading.Event()
        self.refused = 0

    def ListClusters(self, request: object, context: grpc.ServicerContext) -> object:
        """UNAVAILABLE while warming up, then one cluster."""
        if not self.serving.is_set():
            self.refused += 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "warming up; retry")
        return svc.ListClustersResponse(clusters=[svc.ClusterSummary(cluster_id="warm")])


@pytest.fixture
def warming() -> Iterator[tuple[str, WarmingUp]]:
    """A server that turns SERVING 0.6 s after it starts."""
    health_servicer = health.HealthServicer()
    health_servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    servicer = WarmingUp(health_servicer)
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    svc_grpc.add_PolicyServiceServicer_to_server(servicer, srv)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()

    def ready() -> None:
        servicer.serving.set()
        health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)

    timer = threading.Timer(0.6, ready)
    timer.start()
    yield f"127.0.0.1:{port}", servicer
    timer.cancel()
    srv.stop(None)


def test_waits_for_serving_then_calls(
    warming: tuple[str, WarmingUp], capsys: pytest.CaptureFixture[str]
) -> None:
    """A call refused during warm-up is sent again once health says SERVING."""
    address, servicer = warming
    assert main(["ctl", "--address", address, "clusters"]) == 0
    assert "warm" in capsys.readouterr().out
    assert servicer.refused == 1


def test_unavailable_while_serving_is_not_retried(capsys: pytest.CaptureFixture[str]) -> None:
    """A server that says SERVING and still refuses gets one call, and ctl reports it."""
    health_servicer = health.HealthServicer()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    servicer = WarmingUp(health_servicer)  # its serving event is never set: it always refuses
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    svc_grpc.add_PolicyServiceServicer_to_server(servicer, srv)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        assert main(["ctl", "--address", f"127.0.0.1:{port}", "clusters"]) == 1
    finally:
        srv.stop(None)
    assert servicer.refused == 1
    assert "warming up; retry" in capsys.readouterr().err
