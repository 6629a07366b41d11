"""Invariants of a cluster as seen over gRPC (GetCluster with its snapshot), for e2e tests.

Shared by the crash-recovery, stress and fuzz tests: no node over capacity (per resource and
per GPU device), usage equals the sum of the workloads in each subtree, and no limit exceeded.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from strata_policy.model import Snapshot
from strata_policy.state.codec import snapshot_from_dict


def amounts(values: dict[str, Any] | None) -> dict[str, int]:
    """A proto-JSON map of int64 (strings) as ints, zeros dropped."""
    return {k: int(v) for k, v in (values or {}).items() if int(v)}


def read(client: Any, cluster_id: str) -> tuple[dict[str, Any], Snapshot]:
    """GetCluster with the snapshot: the raw answer and the decoded snapshot."""
    answer: dict[str, Any] = client.call(
        "GetCluster", {"clusterId": cluster_id, "includeSnapshot": True}
    )
    return answer, snapshot_from_dict(answer.get("snapshot", {}))


def node_violations(snap: Snapshot) -> list[str]:
    """Nodes holding more than their capacity, or GPU devices holding more than 1000 milli."""
    out = []
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    devices: dict[tuple[str, int], int] = defaultdict(int)
    for rw in snap.workloads:
        request = rw.workload.request
        gpu = request.get("gpu", 0)
        for p in rw.placements:
            for name, amount in request.items():
                used[p.node_id][name] += amount
            for d in p.gpu_devices:
                devices[(p.node_id, d)] += gpu if gpu < 1000 else 1000
    nodes = {n.id: n for n in snap.nodes}
    for node_id, total in used.items():
        for name, amount in total.items():
            capacity = nodes[node_id].capacity.get(name, 0)
            if amount > capacity:
                out.append(f"node {node_id}: {name} {amount} > capacity {capacity}")
    for (node_id, d), milli in devices.items():
        if milli > 1000 or d >= nodes[node_id].gpu_devices:
            out.append(f"node {node_id} device {d}: {milli} milli-GPU")
    return out


def subtree_usage(snap: Snapshot) -> dict[str, dict[str, int]]:
    """Usage per scope recomputed from the workloads: each total charged up the path."""
    parent = {s.id: s.parent_id for s in snap.scopes}
    usage: dict[str, dict[str, int]] = {s.id: defaultdict(int) for s in snap.scopes}
    for rw in snap.workloads:
        scope_id = rw.workload.scope_id
        while scope_id:
            for name, amount in rw.workload.total.items():
                usage[scope_id][name] += amount
            scope_id = parent.get(scope_id, "")
    return {sid: {k: v for k, v in u.items() if v} for sid, u in usage.items()}


def quota_violations(answer: dict[str, Any], snap: Snapshot, check_limits: bool) -> list[str]:
    """Reported usage differing from the workloads' sum, and (optionally) limits exceeded."""
    out = []
    expected = subtree_usage(snap)
    for s in answer.get("scopes", []):
        usage = amounts(s.get("usage"))
        if usage != expected.get(s["id"], {}):
            out.append(f"scope {s['id']}: usage {usage} != sum of workloads {expected[s['id']]}")
        if check_limits:
            for name, limit in amounts(s.get("limit")).items():
                if usage.get(name, 0) > limit:
                    out.append(f"scope {s['id']}: {name} usage {usage[name]} > limit {limit}")
            for name in (s.get("limit") or {}).keys() - amounts(s.get("limit")).keys():
                if usage.get(name, 0) > 0:
                    out.append(f"scope {s['id']}: {name} used under a zero limit")
    return out


def violations(client: Any, cluster_id: str, check_limits: bool = True) -> list[str]:
    """Every invariant the cluster breaks right now (empty when it is sound)."""
    answer, snap = read(client, cluster_id)
    return node_violations(snap) + quota_violations(answer, snap, check_limits)
