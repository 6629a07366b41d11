"""Many clients at once: Admit throughput from 4 client processes vs Health/Check's, same server.

DESIGN §6: with 4 client processes calling in parallel, Admit throughput ≥ 0.7 × the Health/Check
throughput of the same server. The clients are separate processes (threads in one process would
measure the client's GIL, not the server), each with one call in flight, all started together on
a shared wall-clock instant. Phases alternate Health, Admit (dry run), Admit (committed), so drifts
in the shared machine's load hit each alike; each figure is the median phase of its kind.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc

from strata_policy.model import Scope, Snapshot
from strata_policy.service import convert
from strata_policy.testing import node

CLIENTS = 4
KINDS = ("health", "admit", "commit")

# One client process: waits for each phase's start instant, calls as fast as it can until the
# phase ends, prints the count of completed calls per phase as one JSON list.
_CLIENT = """
import json, sys, time
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from strata.policy.v1 import policy_service_pb2 as svc, policy_service_pb2_grpc as svc_grpc
from strata.policy.v1 import types_pb2 as pb
port, who, start, seconds, gap, kinds = sys.argv[1:7]
start, seconds, gap = float(start), float(seconds), float(gap)
channel = grpc.insecure_channel(f"127.0.0.1:{port}")
health = health_pb2_grpc.HealthStub(channel)
stub = svc_grpc.PolicyServiceStub(channel)
check = health_pb2.HealthCheckRequest()
def admit(i, dry):
    w = pb.Workload(id=f"{who}-{i}", scope_id="team", request={"cpu": 1})
    return svc.AdmitRequest(cluster_id="many", workloads=[w], dry_run=dry)
dry = admit(0, True)
health.Check(check); stub.Admit(dry)
counts = []
for n, kind in enumerate(kinds.split(",")):
    begin = start + n * (seconds + gap)
    end = begin + seconds
    time.sleep(max(0.0, begin - time.time()))
    done = 0
    while time.time() < end:
        if kind == "health":
            health.Check(check)
        elif kind == "admit":
            stub.Admit(dry)
        else:
            stub.Admit(admit(f"{n}-{done}", False))
        done += 1
    counts.append(done)
print(json.dumps(counts))
"""


def throughput(rounds: int = 8, seconds: float = 1.0, gap: float = 0.1) -> dict[str, list[float]]:
    """Calls/s of each kind per round, summed over the ``CLIENTS`` client processes."""
    kinds = [k for _ in range(rounds) for k in KINDS]
    with _served() as (port, channel):
        stub = svc_grpc.PolicyServiceStub(channel)  # type: ignore[no-untyped-call]
        snapshot = Snapshot(
            nodes=tuple(node(f"n{i}", cpu=100_000, gpus=8) for i in range(100)),
            scopes=(Scope("org"), Scope("team", "org")),
        )
        stub.PushSnapshot(
            svc.PushSnapshotRequest(cluster_id="many", snapshot=convert.snapshot_to_proto(snapshot))
        )
        start = time.time() + 3.0  # every client imported and connected by then
        argv = [sys.executable, "-c", _CLIENT, port, "", str(start), str(seconds), str(gap)]
        argv.append(",".join(kinds))
        procs = [
            subprocess.Popen([*argv[:4], f"p{i}", *argv[5:]], stdout=subprocess.PIPE, text=True)
            for i in range(CLIENTS)
        ]
        timeout = 60 + len(kinds) * (seconds + gap)
        counts = [json.loads(p.communicate(timeout=timeout)[0]) for p in procs]
    rates: dict[str, list[float]] = {k: [] for k in KINDS}
    for phase, kind in enumerate(kinds):
        rates[kind].append(sum(c[phase] for c in counts) / seconds)
    return rates


@contextlib.contextmanager
def _served() -> Iterator[tuple[str, Any]]:
    """A ``strata-policy serve`` subprocess on a free port, SERVING: yields (port, channel)."""
    import grpc  # noqa: PLC0415
    from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    with tempfile.TemporaryFile("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "strata_policy.cli", "serve", "--address", f"127.0.0.1:{port}"],
            stderr=log,
        )
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        health = health_pb2_grpc.HealthStub(channel)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                with contextlib.suppress(grpc.RpcError):
                    reply = health.Check(health_pb2.HealthCheckRequest(), timeout=2)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                time.sleep(0.2)
            yield port, channel
        finally:
            channel.close()
            proc.terminate()
            proc.wait(timeout=60)


def run() -> list[str]:
    """The many-clients table."""
    rates = throughput()
    health = statistics.median(rates["health"])
    rows = [
        f"### {CLIENTS} client processes in parallel, one call in flight each (same server)",
        "",
        "| calls | median calls/s (per round) | ratio to Health/Check |",
        "|---|---|---|",
        f"| Health/Check (baseline) | {health:,.0f} ({_each(rates['health'])}) | 1.00 |",
    ]
    for kind, label in (("admit", "1 workload, dry run"), ("commit", "1 workload, committed")):
        rate = statistics.median(rates[kind])
        rows.append(
            f"| Admit ({label}) | {rate:,.0f} ({_each(rates[kind])}) "
            f"| {rate / health:.2f} (bar ≥ 0.7) |"
        )
    return rows


def _each(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)
