"""Concurrent mixed load over gRPC, then the invariants: capacity, limits, usage, generations."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from cluster_invariants import violations

from strata_policy.service.client import Client, RpcError

THREADS = 8
SECONDS = 3.0  # each thread calls for at least this long ...
MIN_OK = 8  # ... and until this many of its calls succeeded
HANG_GUARD_SECONDS = 120.0  # (a loaded 2-core machine is slow, never this slow)
GPU_SIZES = (250, 500, 1000, 2000, 4000)
SCOPES = ("team-a", "team-b", "team-c", "proj-x")
ALLOWED = {"INVALID_ARGUMENT", "ABORTED"}  # bad removals / stale ids / generation conflicts


def cluster_snapshot() -> dict[str, Any]:
    """Six 8-GPU nodes over two zones; a tree with guarantees and limits at two levels."""
    return {
        "nodes": [
            {"id": f"n{i}", "capacity": {"cpu": 64000, "memory": 2**38, "gpu": 8000},
             "labels": {"zone": f"z{i % 2}"}}
            for i in range(6)
        ],
        "scopes": [
            {"id": "org", "limit": {"gpu": 40000}},
            {"id": "team-a", "parentId": "org", "guarantee": {"gpu": 16000},
             "limit": {"gpu": 24000}},
            {"id": "team-b", "parentId": "org", "guarantee": {"gpu": 16000}},
            {"id": "team-c", "limit": {"gpu": 12000, "cpu": 40000}},
            {"id": "proj-x", "parentId": "team-a", "limit": {"gpu": 8000}},
        ],
    }  # fmt: skip


@dataclass
class Log:
    """What one client thread saw."""

    codes: Counter[str] = field(default_factory=Counter)
    commits: list[tuple[str, int]] = field(default_factory=list)  # (cluster, generation)
    admitted: list[str] = field(default_factory=list)


def changed(method: str, answer: dict[str, Any]) -> bool:
    """Whether a committed answer changed the cluster (so it must have a generation of its own)."""
    if method in ("Admit", "Place"):
        return any(
            r["decision"] in ("DECISION_ADMITTED", "DECISION_PLACED")
            and not any(reason["code"] == "ALREADY_PLACED" for reason in r["reasons"])
            for r in answer["results"]
        )
    if method == "Release":
        return bool(answer["released"])
    if method == "Reclaim":
        result = answer.get("result") or {}
        return result.get("decision") in ("DECISION_ADMITTED", "DECISION_PLACED")
    return method == "UpdateSnapshot"


def new_workload(rng: random.Random, tag: str) -> dict[str, Any]:
    """A random workload: a GPU share or whole GPUs, sometimes a gang spread over zones."""
    gpu = rng.choice(GPU_SIZES)
    replicas = rng.choice((1, 1, 1, 2))
    out: dict[str, Any] = {
        "id": f"{tag}-{uuid.uuid4().hex[:8]}",
        "scopeId": rng.choice(SCOPES),
        "request": {"cpu": rng.choice((500, 2000, 8000)), "gpu": gpu},
        "replicas": replicas,
        "priority": rng.randint(0, 3),
        "preemptible": rng.random() < 0.8,
    }
    if replicas > 1 and rng.random() < 0.5:
        out["spread"] = {"topologyKey": "zone"}
    return out


def step(client: Client, rng: random.Random, cid: str, log: Log, known: list[str]) -> None:
    """One random call; records its code and, when it changed the cluster, its generation."""
    roll = rng.random()
    request: dict[str, Any] = {"clusterId": cid}
    if roll < 0.25:
        method = "Admit"
        request["workloads"] = [new_workload(rng, "a") for _ in range(rng.randint(1, 3))]
        request["order"] = rng.choice(["ORDER_FIFO", "ORDER_FAIR", "ORDER_PRIORITY"])
    elif roll < 0.5:
        method = "Place"
        if known and rng.random() < 0.3:
            request["workloadIds"] = rng.sample(known, min(len(known), 2))
        else:
            request["workloads"] = [new_workload(rng, "p") for _ in range(rng.randint(1, 3))]
        request["policy"] = rng.choice(["POLICY_BEST_FIT", "POLICY_FIRST_FIT", "POLICY_RANDOM"])
    elif roll < 0.75:
        method = "Release"
        request["workloadIds"] = rng.sample(known, min(len(known), 2)) if known else ["none"]
    elif roll < 0.9:
        method = "Reclaim"
        request["workload"] = new_workload(rng, "r")
        request["requirePlacement"] = rng.random() < 0.5
        request["dryRun"] = rng.random() < 0.3
    else:
        method = "UpdateSnapshot"
        node = f"extra-{rng.randint(0, 2)}"
        if rng.random() < 0.5:
            request["upsertNodes"] = [{"id": node, "capacity": {"cpu": 32000, "gpu": 4000}}]
        else:
            request["removeNodeIds"] = [node]
    if rng.random() < 0.05 and log.commits:
        request["expectedGeneration"] = log.commits[-1][1]
    try:
        answer = client.call(method, request)
    except RpcError as exc:
        log.codes[f"{method}:{exc.code}"] += 1
        return
    log.codes[f"{method}:OK"] += 1
    if not request.get("dryRun") and changed(method, answer):
        log.commits.append((cid, int(answer["generation"])))
    for r in answer.get("results", []):
        if r["decision"] in ("DECISION_ADMITTED", "DECISION_PLACED"):
            known.append(r["workloadId"])


def test_mixed_concurrent_load_keeps_the_invariants(client: Client) -> None:
    """8 threads of Admit/Place/Release/Reclaim/UpdateSnapshot on shared clusters break nothing."""
    clusters = [f"stress-{uuid.uuid4().hex[:6]}-{i}" for i in range(2)]
    for cid in clusters:
        client.call("PushSnapshot", {"clusterId": cid, "snapshot": cluster_snapshot()})
    known: dict[str, list[str]] = {cid: [] for cid in clusters}
    logs = [Log() for _ in range(THREADS)]
    began = time.monotonic()

    def run(n: int) -> None:
        rng = random.Random(n)
        while time.monotonic() - began < HANG_GUARD_SECONDS:
            ok = sum(v for k, v in logs[n].codes.items() if k.endswith(":OK"))
            if time.monotonic() - began >= SECONDS and ok >= MIN_OK:
                return
            cid = clusters[rng.randrange(len(clusters))]
            step(client, rng, cid, logs[n], known[cid])

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=HANG_GUARD_SECONDS + 60)
    assert not any(t.is_alive() for t in threads), "a client thread is stuck in a call"

    codes: Counter[str] = sum((log.codes for log in logs), Counter())
    bad = {
        k: v for k, v in codes.items() if not k.endswith(":OK") and k.split(":")[1] not in ALLOWED
    }
    assert not bad, f"unexpected status codes: {bad}"
    assert sum(v for k, v in codes.items() if k.endswith(":OK")) >= MIN_OK * THREADS
    for cid in clusters:
        assert violations(client, cid) == [], cid
    by_cluster: dict[str, list[int]] = defaultdict(list)
    for log in logs:
        for cid in clusters:
            mine = [g for c, g in log.commits if c == cid]
            assert mine == sorted(set(mine)), "one client saw generations go back or repeat"
        for cid, g in log.commits:
            by_cluster[cid].append(g)
    for cid, gens in by_cluster.items():
        assert len(gens) == len(set(gens)), f"two changes to {cid} share a generation"
        final = int(client.call("GetCluster", {"clusterId": cid})["generation"])
        assert max(gens) <= final
