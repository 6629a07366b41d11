"""Many clients at once: Admit throughput from 4 client processes vs Health/Check's, same server.

DESIGN §6: with 4 client processes calling in parallel, Admit throughput ≥ 0.7 × the Health/Check
throughput of the same server. The clients are separate processes (threads in one process would
measure the client's GIL, not the server), each with one call in flight, all started together on
a shared wall-clock instant. Phases alternate Health, Admit (dry run), Admit (committed), so drifts
in the shared machine's load hit each alike; each ratio is the median over the rounds of
Admit's rate over the Health rate measured just before it.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc

from benchmarks.bench_service import served_process
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


def throughput(
    rounds: int = 8, seconds: float = 1.0, gap: float = 0.1
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per round and kind: calls/s summed over the ``CLIENTS`` client processes, and the
    server's CPU seconds per call (all its threads; ``/proc``, so Linux only, else empty)."""
    kinds = [k for _ in range(rounds) for k in KINDS]
    with served_process() as (port, pid, channel):
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
        cpu = [_server_cpu(pid, start + n * (seconds + gap), seconds) for n in range(len(kinds))]
        timeout = 60 + len(kinds) * (seconds + gap)
        counts = [json.loads(p.communicate(timeout=timeout)[0]) for p in procs]
    rates: dict[str, list[float]] = {k: [] for k in KINDS}
    cpu_per_call: dict[str, list[float]] = {k: [] for k in KINDS}
    for phase, kind in enumerate(kinds):
        calls = sum(c[phase] for c in counts)
        rates[kind].append(calls / seconds)
        spent = cpu[phase]
        if spent is not None and calls:
            cpu_per_call[kind].append(spent / calls)
    return rates, cpu_per_call


def _server_cpu(pid: int, begin: float, seconds: float) -> float | None:
    """CPU seconds the server spends from ``begin`` (wall clock) for ``seconds``, or ``None``
    without ``/proc``. Sampled just inside the phase and scaled to its whole length."""
    stat = f"/proc/{pid}/stat"
    if not os.path.exists(stat):
        return None
    slop = min(0.05, seconds / 10)

    def ticks() -> float:
        with open(stat) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    time.sleep(max(0.0, begin + slop - time.time()))
    before = ticks()
    time.sleep(max(0.0, begin + seconds - slop - time.time()))
    return (ticks() - before) * seconds / (seconds - 2 * slop)


def run() -> list[str]:
    """The many-clients table: each round's Admit rate over the Health rate measured just before
    it (adjacent in time, so the shared machine's drifts cancel), median over the rounds."""
    rates, cpu = throughput()
    health = rates["health"]
    rows = [
        f"### {CLIENTS} client processes in parallel, one call in flight each (same server)",
        "",
        "| calls | median calls/s | median of the per-round ratios to Health/Check |",
        "|---|---|---|",
        f"| Health/Check (baseline) | {statistics.median(health):,.0f} | 1.00 |",
    ]
    for kind, label in (("admit", "1 workload, dry run"), ("commit", "1 workload, committed")):
        ratios = [a / h for a, h in zip(rates[kind], health, strict=True)]
        rows.append(
            f"| Admit ({label}) | {statistics.median(rates[kind]):,.0f} "
            f"| {statistics.median(ratios):.2f} (bar ≥ 0.7; rounds {min(ratios):.2f}–"
            f"{max(ratios):.2f}) |"
        )
    if cpu["health"]:
        rows += [
            "",
            "Server CPU time per call (all its threads; insensitive to the machine's other load):",
            "",
            "| calls | median CPU µs per call | Health's over this (the ratio a CPU-bound "
            "server reaches) |",
            "|---|---|---|",
        ]
        base = statistics.median(cpu["health"])
        for kind, label in (
            ("health", "Health/Check"),
            ("admit", "Admit, dry run"),
            ("commit", "Admit, committed"),
        ):
            each = statistics.median(cpu[kind])
            rows.append(f"| {label} | {each * 1e6:.0f} | {base / each:.2f} |")
    return rows
