"""UpdateSnapshot figures (DESIGN §6): watch-event deltas in process, and one workload upserted
over gRPC beside Health/Check, both on a 10,000-node, 100,000-workload cluster.

Each line has its baseline from the same run: the plain path (apply the delta to the whole
snapshot and build the state again, what every UpdateSnapshot cost before it was incremental)
for the in-process deltas, and Health/Check on the same server for the RPC.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from grpc_health.v1 import health_pb2, health_pb2_grpc
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc
from strata.policy.v1 import types_pb2 as pb

from benchmarks.bench_service import _interleaved_medians_us, _served, push_request_bytes
from strata_policy.engine import Engine
from strata_policy.model import Node, Placement, RunningWorkload, Scope, Snapshot, Workload
from strata_policy.state import incremental
from strata_policy.state.changes import Delta

NODES = 10_000
WORKLOADS = 100_000
EVENTS = 1_000


def _cluster(nodes: int, workloads: int) -> Snapshot:
    """``nodes`` 8-GPU nodes in 8 zones; ``workloads`` one-replica pods of 100 mCPU on them."""
    return Snapshot(
        nodes=tuple(_node(i, False) for i in range(nodes)),
        scopes=(Scope("org"), *(Scope(f"team{t}", "org") for t in range(10))),
        workloads=tuple(_pod(f"w{i}", i % 10, i % nodes) for i in range(workloads)),
    )


def _node(i: int, cordoned: bool) -> Node:
    return Node(
        id=f"node-{i:06d}",
        capacity={"cpu": 64000, "memory": 256 << 30, "gpu": 8000},
        labels={"zone": f"z{i % 8}"},
        unschedulable=cordoned,
        gpu_model="A100",
    )


def _pod(wid: str, team: int, node: int) -> RunningWorkload:
    return RunningWorkload(
        Workload(wid, f"team{team}", {"cpu": 100}), (Placement(f"node-{node:06d}"),), 1
    )


def _watch_delta(round_: int, nodes: int, live: list[str]) -> Delta:
    """1,000 events: 450 pods started, 450 pods deleted, 100 nodes cordoned or uncordoned (the
    450 deleted are the longest running; the started land spread over the nodes)."""
    started = tuple(
        _pod(f"r{round_}-{k}", k % 10, (round_ * 997 + k * 31) % nodes) for k in range(450)
    )
    deleted = tuple(live[k] for k in range(450))
    del live[:450]
    live.extend(rw.workload.id for rw in started)
    # Even rounds cordon 100 nodes, odd rounds uncordon the same ones: every node event changes.
    cordon = tuple(_node((round_ // 2 * 131 + k * 97) % nodes, round_ % 2 == 0) for k in range(100))
    return Delta(upsert_nodes=cordon, upsert_workloads=started, remove_workload_ids=deleted)


def _timed(call: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of one call (the CPU time of this process: what the machine's load
    does not stretch, unlike the wall time of a shared 2-core VM)."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def watch_deltas(rounds: int = 6) -> list[str]:
    """Deltas of 1,000 mixed watch events applied in process, vs the plain path (one run)."""
    snapshot = _cluster(NODES, WORKLOADS)
    engine = Engine()
    engine.push_snapshot("c", snapshot)
    live = [rw.workload.id for rw in snapshot.workloads]
    mixed: list[tuple[float, float]] = []
    pods_only: list[tuple[float, float]] = []
    after_nodes, after_pods = [], []
    probe = [Workload("probe", "team0", {"cpu": 100})]

    def place_once() -> float:
        return _timed(lambda: engine.place("c", probe, dry_run=True))[0]

    place_once()
    for r in range(rounds):
        delta = _watch_delta(r, NODES, live)
        mixed.append(_timed(lambda d=delta: engine.update_snapshot("c", d)))  # type: ignore[misc]
        after_nodes.append(place_once())
        pods = Delta(
            upsert_workloads=_watch_delta(100 + r, NODES, live).upsert_workloads[:500],
            remove_workload_ids=tuple(live[:500]),
        )
        del live[:500]
        live.extend(rw.workload.id for rw in pods.upsert_workloads)
        pods_only.append(_timed(lambda d=pods: engine.update_snapshot("c", d)))  # type: ignore[misc]
        after_pods.append(place_once())
    state = engine.store._slots["c"].state
    assert state is not None
    delta = _watch_delta(rounds, NODES, live)
    plain, plain_cpu = _timed(lambda: incremental.rebuild(state, delta, engine.limits.check_sizes))

    def row(what: str, runs: list[tuple[float, float]]) -> str:
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        return (
            f"| {what} | {wall * 1e3:.1f} | {EVENTS / wall:,.0f} | {cpu * 1e3:.1f} "
            f"| {EVENTS / cpu:,.0f} | {plain / wall:.0f} × faster |"
        )

    return [
        "| delta of 1,000 watch events, 10,000 nodes / 100,000 workloads | median ms "
        "| events/s (bar ≥ 50,000) | CPU ms | events per CPU second | vs plain path (wall) |",
        "|---|---|---|---|---|---|",
        f"| plain path (rebuild the whole state; baseline) | {plain * 1e3:.0f} | "
        f"{EVENTS / plain:,.0f} | {plain_cpu * 1e3:.0f} | {EVENTS / plain_cpu:,.0f} | 1.00 |",
        row("in place: 450 pod adds, 450 pod deletes, 100 node cordon/uncordon", mixed),
        row("in place: 500 pod adds, 500 pod deletes", pods_only),
        "",
        "| the next Place (one workload, dry run) | median ms |",
        "|---|---|",
        f"| after a delta with node updates (placement caches rebuilt for the new node data) "
        f"| {statistics.median(after_nodes) * 1e3:.2f} |",
        f"| after a delta of pod events only (caches kept, refreshed from the matrix journal) "
        f"| {statistics.median(after_pods) * 1e3:.2f} |",
    ]


def update_vs_health(calls: int = 2000) -> list[str]:
    """One running workload upserted by UpdateSnapshot vs Health/Check, interleaved, on a
    ``strata-policy serve`` holding 10,000 nodes and 100,000 workloads."""
    with _served() as channel:
        stub = svc_grpc.PolicyServiceStub(channel)  # type: ignore[no-untyped-call]
        health = health_pb2_grpc.HealthStub(channel)
        push = svc.PushSnapshotRequest.FromString(push_request_bytes(NODES, WORKLOADS))
        push.cluster_id = "u"
        stub.PushSnapshot(push, timeout=600)
        requests = iter(
            [
                svc.UpdateSnapshotRequest(
                    cluster_id="u",
                    upsert_workloads=[
                        pb.RunningWorkload(
                            workload=pb.Workload(id=f"u{i}", scope_id="org", request={"cpu": 10}),
                            placements=[pb.Placement(node_id=f"node-{i % NODES:06d}")],
                        )
                    ],
                )
                for i in range(calls + 300)
            ]
        )  # built before the clock starts, as the Health request is
        check = health_pb2.HealthCheckRequest()
        base, upd = _interleaved_medians_us(
            lambda: health.Check(check), lambda: stub.UpdateSnapshot(next(requests)), calls
        )
    return [
        "| measure (10,000 nodes, 100,000 workloads) | median µs | ratio to Health/Check |",
        "|---|---|---|",
        f"| Health/Check (baseline, interleaved) | {base:.0f} | 1.00 |",
        f"| UpdateSnapshot upserting one running workload | {upd:.0f} | "
        f"{upd / base:.2f} (bar ≤ 1.5) |",
    ]


def run() -> list[str]:
    """All UpdateSnapshot figures."""
    lines = ["### Watch-event deltas in process (UpdateSnapshot applied in place)", ""]
    lines += watch_deltas()
    lines += ["", "### One-workload UpdateSnapshot over gRPC vs Health/Check (same server)", ""]
    lines += update_vs_health()
    return lines
