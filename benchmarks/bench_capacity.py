"""PlanCapacity speed as a ratio taken in one run (DESIGN §6): never asserted, only reported.

A 10,000-node cluster in 50 catalog groups (10 shapes × 5 zones, CPU and GPU nodes priced from
AWS us-east-1 on-demand, docs/capacity.md), each node running one workload that leaves 8 CPUs
free; 1,000 pending workloads, half CPU-only (they fit the free room) and half asking for a
GPU share or a whole GPU (the CPU nodes have none: scale-up). The bar: ``plan_capacity`` for the
1,000 ≤ 10 × one ``place_batch`` of the same 1,000 onto the existing nodes (same policy:
FRAGMENTATION_AWARE against the cluster's task mix, the plan's default).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from strata_policy.capacity import NodeGroup, PlanOptions, plan_capacity
from strata_policy.model import Policy, Workload
from strata_policy.placement.place import PlacementOptions, place_batch
from strata_policy.state.cluster import ClusterState
from strata_policy.testing import group_node, node, running, scope, snapshot, workload

ZONES = ("a", "b", "c", "d", "e")
# (name, cpu, memory GiB, GPUs, model, $/h): m5/r5/g4dn/g5/p3 sizes from the notes' table.
SHAPES = (
    ("m5x", 4, 16, 0, "", 0.192), ("m58x", 32, 128, 0, "", 1.536), ("m524x", 96, 384, 0, "", 4.608),
    ("r5x", 4, 32, 0, "", 0.252), ("r58x", 32, 256, 0, "", 2.016),
    ("g4x", 4, 16, 1, "T4", 0.526), ("g412x", 48, 192, 4, "T4", 3.912),
    ("g5x", 4, 16, 1, "A10G", 1.006), ("g512x", 48, 192, 4, "A10G", 5.672),
    ("p316x", 64, 488, 8, "V100", 24.48),
)  # fmt: skip
ZONE = "topology.kubernetes.io/zone"


def _catalog() -> list[NodeGroup]:
    groups = []
    for name, cpu, mem, gpus, model, price in SHAPES:
        for z in ZONES:
            template = node(f"{name}-{z}-", cpu, mem, gpus, model, {ZONE: z})
            groups.append(NodeGroup(f"{name}-{z}", template, price, 0, 1_000))
    return groups


def _state(n_nodes: int) -> ClusterState:
    nodes, run = [], []
    for i in range(n_nodes):
        z = ZONES[i % len(ZONES)]
        nodes.append(group_node(f"n{i}", f"m58x-{z}", 32, 128, labels={ZONE: z}))
        run.append(running(workload(f"r{i}", "t", cpu=24, memory_gi=64), f"n{i}"))
    return ClusterState.build("bench", snapshot(nodes, [scope("t")], run), 1)


def _pending(n: int) -> list[Workload]:
    out = []
    for i in range(n):
        if i % 2:
            out.append(workload(f"p{i}", "t", cpu=2, memory_gi=4))
        else:
            gpu = (500, 1000)[i % 4 // 2]
            out.append(workload(f"p{i}", "t", cpu=2, memory_gi=8, gpu_milli=gpu))
    return out


def _best(fn: Callable[[], object], repeat: int = 3) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run() -> list[str]:
    """The table (markdown lines)."""
    state, groups, pending = _state(10_000), _catalog(), _pending(1_000)
    placement = PlacementOptions(policy=Policy.FRAGMENTATION_AWARE, task_mix=state.task_mix)
    options = PlanOptions(placement=placement)
    base = _best(lambda: place_batch(state.matrix, pending, placement))
    planned = _best(lambda: plan_capacity(state, groups, pending, options))
    plan = plan_capacity(state, groups, pending, options)
    added = sum(s.count for s in plan.scale_up)
    return [
        "| measure (10,000 nodes, 50 groups, 1,000 pending) | seconds | × batch Place | bar |",
        "|---|---|---|---|",
        f"| batch Place of the 1,000 onto the existing nodes | {base:.4f} | 1.0 | |",
        f"| PlanCapacity ({added} nodes added, {len(plan.consolidation)} consolidated) "
        f"| {planned:.4f} | {planned / base:.1f} | ≤ 10 |",
        "",
        f"plan: cost {plan.cost_per_hour:.2f}/h, lower bound {plan.lower_bound_per_hour:.2f}/h",
    ]
