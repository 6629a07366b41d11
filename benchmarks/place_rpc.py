"""The Place RPC of 1,000 workloads against a server in its own process, as users run it.

``bench_service.place_rpc_vs_in_process`` runs the server inside the benchmark's process, so
the client's serializing and parsing and the server's work share one GIL, and the in-process
placements run in a process that also hosts an idle server. Here the server is
``strata-policy serve`` (``bench_service._served``), and the in-process placements are timed
in a third process, one placement at a time interleaved with the RPCs, so that a drift in the
shared machine's load hits both sides alike (each is timed where it runs: the pipe that asks
for a placement is not in its time).
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

from grpc_health.v1 import health_pb2, health_pb2_grpc
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import Scope, Snapshot, Workload
from strata_policy.service import convert
from strata_policy.testing import node


def _snapshot(nodes: int) -> Snapshot:
    return Snapshot(
        nodes=tuple(node(f"n{i}", gpus=8) for i in range(nodes)), scopes=(Scope("org"),)
    )


def _workloads(count: int) -> list[Workload]:
    return [Workload(f"w{i}", "org", {"cpu": 2000, "gpu": 1000}) for i in range(count)]


def serve_placements(count: int, nodes: int) -> None:
    """Time one ``Engine.place`` of ``count`` workloads (dry run) per line read from stdin and
    write its seconds to stdout: the in-process side, timed in a process of its own."""
    from strata_policy import kernels  # noqa: PLC0415
    from strata_policy.engine import Engine  # noqa: PLC0415
    from strata_policy.service.servicer import options_from_proto  # noqa: PLC0415

    kernels.warmup()
    engine = Engine()
    engine.push_snapshot("p", _snapshot(nodes))
    workloads = _workloads(count)
    options = options_from_proto(pb.POLICY_MOST_ALLOCATED, {}, 0)
    print("ready", flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        engine.place("p", workloads, options=options, dry_run=True)
        print(time.perf_counter() - start, flush=True)


@contextlib.contextmanager
def _placer(count: int, nodes: int) -> Iterator[Callable[[], float]]:
    """A process running ``serve_placements``; yields a call that times one placement there."""
    code = (
        "import logging, structlog\n"
        "structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))\n"
        "from benchmarks.place_rpc import serve_placements\n"
        f"serve_placements({count}, {nodes})\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    stdin, stdout = proc.stdin, proc.stdout
    if stdin is None or stdout is None:
        raise RuntimeError("no pipes to the placing process")
    if stdout.readline().strip() != "ready":
        raise RuntimeError("the placing process did not start")

    def one() -> float:
        stdin.write("\n")
        stdin.flush()
        return float(stdout.readline())

    try:
        yield one
    finally:
        stdin.close()
        proc.wait(timeout=60)


def place_rpc_served(count: int = 1000, nodes: int = 1000) -> list[str]:
    """One Place RPC of ``count`` workloads to a served process vs the same placements in a
    process of their own + a no-op RPC (Health/Check).

    Each is timed back to back on its own, as the in-process bench times its no-op: a no-op
    right after a Place would wait for that call's aftermath (its log line, freeing its
    objects) and flatter the ratio."""
    from benchmarks.bench_service import (  # noqa: PLC0415
        _interleaved_medians_us,
        _median_us,
        _served,
    )

    with _served() as channel, _placer(count, nodes) as place_elsewhere:
        stub = svc_grpc.PolicyServiceStub(channel)  # type: ignore[no-untyped-call]
        health = health_pb2_grpc.HealthStub(channel)
        stub.PushSnapshot(
            svc.PushSnapshotRequest(
                cluster_id="p", snapshot=convert.snapshot_to_proto(_snapshot(nodes))
            )
        )
        request = svc.PlaceRequest(
            cluster_id="p",
            workloads=[convert.workload_to_proto(w) for w in _workloads(count)],
            dry_run=True,
            policy=pb.POLICY_MOST_ALLOCATED,
        )
        samples: list[float] = []
        local, rpc = _interleaved_medians_us(
            lambda: samples.append(place_elsewhere()), lambda: stub.Place(request), 150, warmup=20
        )
        local = statistics.median(samples[-150:]) * 1e6  # as timed there, without the pipe
        noop = _median_us(lambda: health.Check(health_pb2.HealthCheckRequest()), 300)
    base = local + noop
    return [
        "| measure | median µs | ratio |",
        "|---|---|---|",
        f"| {count:,} placements in a process of their own (Engine.place, dry run, "
        f"{nodes:,} nodes; interleaved with the RPCs) | {local:.0f} | |",
        f"| no-op RPC (Health/Check) | {noop:.0f} | |",
        f"| one Place RPC carrying the {count:,} workloads to `strata-policy serve` | {rpc:.0f} "
        f"| {rpc / base:.2f} × (in process + no-op) (bar ≤ 1.5) |",
    ]
