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


class WarmingHealth(health.HealthServicer):
    """Health of a warming server: NOT_SERVING until a client refused during the warm-up has
    been told so once, SERVING from then on (the warm-up ends between that client's checks).

    Driven by the client's own calls, not a timer: on a loaded machine a timer could end the
    warm-up before the first call (nothing refused) or between the refusal and the health
    check (never NOT_SERVING), and the test would fail for reasons of speed alone.
    """

    def __init__(self) -> None:
        super().__init__()
        self.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        self.warming: WarmingUp | None = None

    def Check(self, request: object, context: grpc.ServicerContext) -> object:
        """The status now; after telling a refused client NOT_SERVING, turn SERVING."""
        reply = super().Check(request, context)
        warming = self.warming
        if warming is not None and warming.refused and not warming.serving.is_set():
            warming.serving.set()
            self.set("", health_pb2.HealthCheckResponse.SERVING)
        return reply


@pytest.fixture
def warming() -> Iterator[tuple[str, WarmingUp]]:
    """A server that turns SERVING once a refused client has been told NOT_SERVING."""
    health_servicer = WarmingHealth()
    servicer = WarmingUp(health_servicer)
    health_servicer.warming = servicer
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    svc_grpc.add_PolicyServiceServicer_to_server(servicer, srv)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    yield f"127.0.0.1:{port}", servicer
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
