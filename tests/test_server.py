"""The server as a user runs it: health, reflection, JSON logs, and a graceful SIGTERM drain."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from strata_policy.service.client import Client, RpcError
from strata_policy.service.config import ServerConfig
from strata_policy.service.server import DETAIL_TYPES, Server


def test_health_and_reflection(server: Server, client: Client) -> None:
    """Health says SERVING for the service and overall; reflection lists PolicyService."""
    assert client.health() == "SERVING"
    assert client.health("strata.policy.v1.PolicyService") == "SERVING"
    services = ProtoReflectionDescriptorDatabase(client.channel).get_services()
    assert "strata.policy.v1.PolicyService" in services
    assert "grpc.health.v1.Health" in services


@pytest.mark.parametrize("name", DETAIL_TYPES)
def test_error_detail_types_are_reflected(client: Client, name: str) -> None:
    """Reflection serves google.rpc's detail types, so reflection clients (grpcurl) decode them."""
    found = ProtoReflectionDescriptorDatabase(client.channel).FindFileContainingSymbol(name)
    assert found.name == "google/rpc/error_details.proto"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_logs_rpcs_and_drains_on_sigterm() -> None:
    """`strata-policy serve` logs a JSON line per failed RPC, a summary counting every RPC, and
    exits 0 after draining on SIGTERM."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "strata_policy.cli", "serve", "--address", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        health = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + 120
        status = None
        while time.monotonic() < deadline:
            try:
                status = health.Check(health_pb2.HealthCheckRequest(), timeout=2).status
            except grpc.RpcError:
                status = None
            if status == health_pb2.HealthCheckResponse.SERVING:
                break
            time.sleep(0.2)
        assert status == health_pb2.HealthCheckResponse.SERVING
        client = Client(f"127.0.0.1:{port}")
        client.call("PushSnapshot", {"clusterId": "logs", "snapshot": {}, "requestId": "r-9"})
        with pytest.raises(RpcError):
            client.call("DeleteCluster", {"clusterId": "logs", "expectedGeneration": 7,
                                          "requestId": "r-10"})  # fmt: skip
        client.close()
        channel.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    (rpc,) = [x for x in lines if x.get("event") == "rpc"]  # the OK call's line is debug
    assert rpc["method"] == "DeleteCluster"
    assert (rpc["cluster_id"], rpc["request_id"], rpc["generation"], rpc["code"]) == (
        "logs",
        "r-10",
        None,
        "ABORTED",
    )
    assert "duration_ms" in rpc
    (summary,) = [x for x in lines if x.get("event") == "rpcs"]  # written on stop
    assert summary["by_method"] == {
        "DeleteCluster": {"ABORTED": 1},
        "PushSnapshot": {"OK": 1},
    }
    events = [x["event"] for x in lines]
    assert events.index("listening") < events.index("warming kernels") < events.index("serving")
    assert events.index("serving") < events.index("draining") < events.index("stopped")


def test_sigterm_during_the_warm_up_stops_at_once(tmp_path: Path) -> None:
    """A signal while the kernels compile (an empty cache) ends the process promptly, exit 0."""
    port = _free_port()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}  # nothing cached: a long compile
    proc = subprocess.Popen(
        [sys.executable, "-m", "strata_policy.cli", "serve", "--address", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        for line in proc.stderr:  # until the warm-up has begun
            lines.append(line)
            if "warming kernels" in line:
                break
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    lines += rest.splitlines() if rest else []
    assert proc.returncode == 0
    assert any("stopped during start-up" in line for line in lines)
    assert not any('"serving"' in line for line in lines)
    assert took < 30, f"stopped {took:.1f} s after SIGTERM"  # a full compile takes minutes here


def test_a_port_in_use_is_refused(server: Server) -> None:
    """A second server on a taken port fails to start instead of sharing the port's traffic
    (gRPC's default SO_REUSEPORT would split the clusters' state between two processes)."""
    with pytest.raises(OSError, match="cannot listen"):
        Server(ServerConfig(address=f"127.0.0.1:{server.port}"))
