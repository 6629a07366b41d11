"""The autoscaling replay's inputs: a priced catalog of the openb node shapes, and a seeded
synthetic day of managed PostgreSQL and inference.

**Price model** (linear AWS us-east-1 on-demand rates, docs/capacity.md): a node costs
$0.0330 per vCPU-hour + $0.00375 per GiB-hour + a per-GPU increment by model: V100M16 $2.567,
V100M32 $3.146 (p3 and p3dn against m5/r5), T4 $0.402 (g4dn.12xlarge), A10 $0.842 (g5.12xlarge).
AWS has no P100 and the trace does not say what G2/G3 are: P100 is priced at GCE's ratio to
V100 (1.46/2.48 of V100M16, $1.511), G2 and G3 like T4 (the cheap assumption: the notes show
this choice dominates any cluster-cost figure, so it is stated, not hidden).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from strata_policy.capacity import NodeGroup
from strata_policy.model import Node, Scope, Workload
from strata_policy.model.resources import CPU, GPU, MEMORY
from strata_policy.simulate.trace import TimedWorkload

GI = 1024**3
CPU_HOUR = 0.0330
GIB_HOUR = 0.00375
GPU_HOUR = {
    "V100M16": 2.567,
    "V100M32": 3.146,
    "T4": 0.402,
    "A10": 0.842,
    "P100": round(2.567 * 1.46 / 2.48, 3),
    "G2": 0.402,
    "G3": 0.402,
}
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def price_of(capacity: dict[str, int], model: str) -> float:
    """The node's price per hour under the linear model above."""
    gpus = capacity.get(GPU, 0) // 1000
    return round(
        capacity.get(CPU, 0) / 1000 * CPU_HOUR
        + capacity.get(MEMORY, 0) / GI * GIB_HOUR
        + gpus * GPU_HOUR.get(model, GPU_HOUR["T4"]),
        4,
    )


def openb_catalog(nodes: Sequence[Node], max_count: int = 2_000) -> list[NodeGroup]:
    """One group per distinct (capacity, model) of ``nodes``, priced, ids by shape."""
    shapes: dict[tuple[tuple[tuple[str, int], ...], str], int] = {}
    for nd in nodes:
        key = (tuple(sorted(nd.capacity.items())), nd.gpu_model)
        shapes[key] = shapes.get(key, 0) + 1
    out = []
    for (cap, model), _ in sorted(shapes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        capacity = dict(cap)
        name = f"{model or 'cpu'}-{capacity.get(CPU, 0) // 1000}c-{capacity.get(GPU, 0) // 1000}g"
        name = name.lower()
        template = Node(id=f"{name}-", capacity=capacity, gpu_model=model)
        out.append(NodeGroup(name, template, price_of(capacity, model), 0, max_count))
    return out


def day_catalog(zones: Sequence[str] = ("a", "b", "c")) -> list[NodeGroup]:
    """The synthetic day's catalog: CPU (m5/r5-like) and GPU (g4dn/g5/p3-like) shapes per zone."""
    shapes = (
        ("m-4", 4, 16, 0, ""), ("m-16", 16, 64, 0, ""), ("r-8", 8, 64, 0, ""),
        ("t4-1", 8, 32, 1, "T4"), ("t4-4", 48, 192, 4, "T4"),
        ("a10-1", 8, 32, 1, "A10"), ("v100-4", 32, 244, 4, "V100M16"),
    )  # fmt: skip
    out = []
    for name, cpu, mem, gpus, model in shapes:
        capacity = {CPU: cpu * 1000, MEMORY: mem * GI}
        if gpus:
            capacity[GPU] = gpus * 1000
        for z in zones:
            gid = f"{name}-{z}"
            template = Node(id=f"{gid}-", capacity=capacity, labels={ZONE: z}, gpu_model=model)
            out.append(NodeGroup(gid, template, price_of(capacity, model), 0, 500))
    return out


def synthetic_day(seed: int = 42, hours: int = 24) -> tuple[list[Scope], list[TimedWorkload]]:
    """A seeded day: managed PostgreSQL (HA clusters of 3 replicas in distinct zones, not
    preemptible, steady, a few created and deleted over the day) in scope ``db`` (guaranteed
    what its steady clusters need) and inference (replicas following a diurnal load: each
    model's replica count is ``base + amp·(1 + sin)`` sampled every 15 minutes; fractional
    (0.5 T4) and whole GPUs) in scope ``inference``, guaranteed its base replicas."""
    rng = random.Random(seed)
    end_ms = hours * 3_600_000
    out: list[TimedWorkload] = []
    db_cpu = 0
    for i in range(12):
        size = rng.choice((1, 2, 4))
        w = Workload(
            id=f"pg-{i}", scope_id="db", request={CPU: size * 1000, MEMORY: size * 4 * GI},
            replicas=3, priority=100, preemptible=False, spread_key=ZONE,
        )  # fmt: skip
        start = 0 if i < 9 else rng.randrange(0, end_ms // 2)
        stop = None if i < 9 or rng.random() < 0.5 else start + rng.randrange(3, 8) * 3_600_000
        if i < 9:
            db_cpu += size * 3000
        out.append(TimedWorkload(w, start, stop))
    models = (("chat", 500, "T4", 4, 10), ("embed", 500, "T4", 2, 6), ("vision", 1000, "A10", 2, 4))
    inf_gpu = 0
    step = 15 * 60_000
    serial = 0
    for name, gpu, model, base, amp in models:
        inf_gpu += base * gpu
        for t in range(0, end_ms, step):
            phase = 2 * math.pi * (t / 86_400_000 - 0.25)
            want = base + round(amp * (1 + math.sin(phase)) / 2 * rng.uniform(0.8, 1.2))
            for r in range(want):
                preemptible = r >= base
                w = Workload(
                    id=f"{name}-{serial}", scope_id="inference",
                    request={CPU: 2000, MEMORY: 8 * GI, GPU: gpu}, priority=50,
                    preemptible=preemptible, gpu_model=model,
                )  # fmt: skip
                serial += 1
                out.append(TimedWorkload(w, t, t + step))
    scopes = [
        Scope(id="db", guarantee={CPU: db_cpu}),
        Scope(id="inference", guarantee={GPU: inf_gpu}),
    ]
    return scopes, sorted(out, key=lambda tw: (tw.arrival_ms, tw.workload.id))
