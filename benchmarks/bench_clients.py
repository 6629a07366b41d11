"""Many clients at once: Admit throughput from 4 client processes vs Health/Check's, same server.

DESIGN §6: with 4 client processes calling in parallel, Admit throughput ≥ 0.7 × the Health/Check
throughput of the same server, in every round. The clients are separate processes (threads in
one process would measure the client's GIL, not the server), each with one call in flight, all
following one wall-clock schedule. The server is ``strata-policy serve`` as deployed: metrics on,
logs at ``info``.

The machine is shared (2 cores, other work running), and its load drifts within seconds. So a
round is not one phase per kind: it is ``SLICES`` short slices of each kind, interleaved (Health,
Admit dry run, Admit committed, then the next slice in a rotated order), and a round's ratio is
Admit's calls over Health's in that round: a drift slower than a slice hits every kind alike.
The table gives each ratio's minimum and median over the rounds (the bar is on the minimum).

The server's CPU time per call (every thread's, from ``/proc``: nanoseconds from ``schedstat``
where the kernel has it, else clock ticks) does not depend on the machine's other load the way
throughput does: Health's CPU per call over Admit's is the ratio a CPU-bound server reaches.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc

from benchmarks.bench_service import served_process
from strata_policy.model import Scope, Snapshot
from strata_policy.service import convert
from strata_policy.testing import node

CLIENTS = 4
KINDS = ("health", "admit", "commit")
ROUNDS = 10
SLICES = 10
SLICE_SECONDS = 0.1
GAP_SECONDS = 0.01  # a client's last call of a slice ends (one call in flight: ~2 ms) in the gap
BAR = 0.7
# The server as deployed (deploy/kubernetes sets STRATA_METRICS_ADDRESS): every call is counted
# in the metrics too; logs at the default level, info.
SERVE_FLAGS = ("--metrics-address", "127.0.0.1:0")

# One client process: follows the schedule (a JSON list of [kind, begin, end] wall-clock
# instants), calling as fast as it can within each slice; prints each slice's completed calls.
_CLIENT = """
import json, sys, time
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from strata.policy.v1 import policy_service_pb2 as svc, policy_service_pb2_grpc as svc_grpc
from strata.policy.v1 import types_pb2 as pb
port, who, schedule = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
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
for n, (kind, begin, end) in enumerate(schedule):
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


@dataclass(frozen=True, slots=True)
class Slice:
    """One slice of the schedule: a kind of call from ``begin`` to ``end`` (wall clock)."""

    round: int
    kind: str
    begin: float
    end: float


def schedule(start: float, rounds: int, slices: int, seconds: float, gap: float) -> list[Slice]:
    """``rounds`` × ``slices`` × every kind, back to back from ``start``; each slice rotates the
    kinds' order, so no kind always follows the same one."""
    out: list[Slice] = []
    at = start
    for r in range(rounds):
        for s in range(slices):
            for i in range(len(KINDS)):
                out.append(Slice(r, KINDS[(i + s) % len(KINDS)], at, at + seconds))
                at += seconds + gap
    return out


@dataclass(frozen=True, slots=True)
class Measured:
    """Per round and kind: calls/s over the clients, and the server's CPU seconds per call
    (empty without ``/proc``)."""

    rates: dict[str, list[float]]
    cpu_per_call: dict[str, list[float]]


def throughput(
    rounds: int = ROUNDS,
    slices: int = SLICES,
    seconds: float = SLICE_SECONDS,
    gap: float = GAP_SECONDS,
) -> Measured:
    """Run the schedule against a ``strata-policy serve`` process (see the module docstring)."""
    with served_process(*SERVE_FLAGS) as (port, pid, channel):
        stub = svc_grpc.PolicyServiceStub(channel)  # type: ignore[no-untyped-call]
        snapshot = Snapshot(
            nodes=tuple(node(f"n{i}", cpu=100_000, gpus=8) for i in range(100)),
            scopes=(Scope("org"), Scope("team", "org")),
        )
        stub.PushSnapshot(
            svc.PushSnapshotRequest(cluster_id="many", snapshot=convert.snapshot_to_proto(snapshot))
        )
        plan = schedule(time.time() + 3.0, rounds, slices, seconds, gap)  # clients ready by then
        wire = json.dumps([[s.kind, s.begin, s.end] for s in plan])
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _CLIENT, port, f"p{i}", wire],
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(CLIENTS)
        ]
        cpu = [_server_cpu(pid, s.begin, s.end) for s in plan]
        timeout = 60 + plan[-1].end - time.time()
        counts = [json.loads(p.communicate(timeout=timeout)[0]) for p in procs]
    calls: dict[tuple[int, str], int] = {}
    spent: dict[tuple[int, str], tuple[float, float]] = {}  # (CPU, wall) seconds sampled
    for n, s in enumerate(plan):
        key = (s.round, s.kind)
        calls[key] = calls.get(key, 0) + sum(c[n] for c in counts)
        cpu_s, wall_s = spent.get(key, (0.0, 0.0))
        sampled = cpu[n]
        if sampled is not None:
            spent[key] = (cpu_s + sampled[0], wall_s + sampled[1])
    measured = Measured({k: [] for k in KINDS}, {k: [] for k in KINDS})
    for r in range(rounds):
        for kind in KINDS:
            n = calls[r, kind]
            measured.rates[kind].append(n / (slices * seconds))
            cpu_s, wall_s = spent.get((r, kind), (0.0, 0.0))
            if wall_s > 0 and n:  # the CPU rate sampled, over the round's slices of this kind
                measured.cpu_per_call[kind].append(cpu_s / wall_s * slices * seconds / n)
    return measured


def _server_cpu(pid: int, begin: float, end: float) -> tuple[float, float] | None:
    """(CPU, wall) seconds of the server sampled within ``begin``-``end`` (wall clock), or
    ``None`` without ``/proc``. The samples are taken just inside the slice; this process may
    wake late on a loaded machine, so the wall time actually between them is returned too."""
    if not os.path.exists(f"/proc/{pid}/stat"):
        return None
    slop = min(0.01, (end - begin) / 10)
    time.sleep(max(0.0, begin + slop - time.time()))
    before, at = _cpu_seconds(pid), time.time()
    time.sleep(max(0.0, end - slop - time.time()))
    after, until = _cpu_seconds(pid), time.time()
    if until <= at or until > end:  # woken past the slice: its samples would mix kinds
        return None
    return after - before, until - at


def _cpu_seconds(pid: int) -> float:
    """The process's CPU seconds so far: its threads' ``schedstat`` run times (nanoseconds), or
    ``stat``'s user + system ticks where the kernel keeps no schedstat."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run() -> list[str]:
    """The many-clients tables: per-round ratios to Health/Check (minimum and median) and the
    server's CPU time per call."""
    m = throughput()
    health = m.rates["health"]
    rows = [
        f"### {CLIENTS} client processes in parallel, one call in flight each (same server)",
        "",
        f"{ROUNDS} rounds, each {SLICES} interleaved {SLICE_SECONDS:g} s slices of every kind; "
        "a round's ratio is its Admit calls over its Health/Check calls.",
        "",
        "| calls | median calls/s | per-round ratio to Health/Check: min | median | "
        f"rounds < {BAR} |",
        "|---|---|---|---|---|",
        f"| Health/Check (baseline) | {statistics.median(health):,.0f} | 1.00 | 1.00 | |",
    ]
    for kind, label in (("admit", "1 workload, dry run"), ("commit", "1 workload, committed")):
        ratios = [a / h for a, h in zip(m.rates[kind], health, strict=True)]
        below = sum(r < BAR for r in ratios)
        rows.append(
            f"| Admit ({label}) | {statistics.median(m.rates[kind]):,.0f} | {min(ratios):.2f} "
            f"| {statistics.median(ratios):.2f} | {below} of {len(ratios)} (bar: none) |"
        )
    cpu = m.cpu_per_call
    if len(cpu["health"]) == ROUNDS:
        rows += [
            "",
            "Server CPU time per call (all its threads; insensitive to the machine's other load):",
            "",
            "| calls | median CPU µs per call | Health's over this, per round: min | median |",
            "|---|---|---|---|",
        ]
        for kind, label in (
            ("health", "Health/Check"),
            ("admit", "Admit, dry run"),
            ("commit", "Admit, committed"),
        ):
            if len(cpu[kind]) != ROUNDS:
                continue
            ratios = [h / a for h, a in zip(cpu["health"], cpu[kind], strict=True)]
            rows.append(
                f"| {label} | {statistics.median(cpu[kind]) * 1e6:.0f} | {min(ratios):.2f} "
                f"| {statistics.median(ratios):.2f} |"
            )
    return rows
