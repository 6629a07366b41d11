"""What a replay measures: typical shapes, GPU fragmentation, and the paper's metric buckets.

All of it is computed here from the trace and the engine's answers (the placements it returned),
never read back from the engine's internals, so the simulator checks the engine rather than
trusting it: ``ClusterMirror`` replays the returned placements onto its own per-device arrays and
refuses one that would overfill a device.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from strata_policy.model import Node, Placement, Workload
from strata_policy.model.resources import CPU, GPU, MILLI_PER_GPU

BUCKETS = 131  # arrived share of the cluster's GPUs, 0 … 130 %
REPORT_POINTS = (90, 100, 110, 120, 130)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Shape:
    """A typical workload shape for FGD: per-replica cpu and gpu request, allowed models, share."""

    cpu: int
    gpu: int
    gpu_model: str
    weight: float

    @property
    def models(self) -> frozenset[str]:
        """Allowed GPU models (``A|B`` = either); empty = any."""
        return frozenset(m for m in self.gpu_model.split("|") if m)


def typical_shapes(workloads: Iterable[Workload], coverage: float = 0.95) -> tuple[Shape, ...]:
    """The most common shapes until they cover ``coverage`` of the workloads, renormalised.

    FGD's grouping key (cpu_milli, gpu_milli, num_gpu, gpu_spec) is, in our units, (cpu, device-
    level gpu request, gpu_model). Equal counts are ordered by the key so the result is
    deterministic. Shapes are added until the running share reaches ``coverage``.
    """
    counts = Counter(
        (w.request.get(CPU, 0), w.request.get(GPU, 0), w.gpu_model if w.request.get(GPU) else "")
        for w in workloads
    )
    total = sum(counts.values())
    chosen: list[tuple[tuple[int, int, str], int]] = []
    covered = 0
    for key, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if total and covered / total >= coverage:
            break
        chosen.append((key, count))
        covered += count
    return tuple(Shape(c, g, m, n / covered) for (c, g, m), n in chosen)


class ClusterMirror:
    """Per-node CPU and per-device GPU free, rebuilt from the engine's placements.

    ``gpu_free`` is [N, D] milli-GPUs (-1 where a node has no such device), in the trace's node
    order, whatever order the snapshot handed to the engine used.
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = tuple(nodes)
        self.index = {n.id: i for i, n in enumerate(self.nodes)}
        devices = max([n.gpu_devices for n in self.nodes] + [1])
        self.gpu_free: IntArray = np.full((len(self.nodes), devices), -1, dtype=np.int64)
        for i, n in enumerate(self.nodes):
            self.gpu_free[i, : n.gpu_devices] = MILLI_PER_GPU
        self.cpu_free: IntArray = np.array([n.capacity.get(CPU, 0) for n in nodes], np.int64)
        models = sorted({n.gpu_model for n in self.nodes})
        self.model_names = tuple(models)
        self.model_code: IntArray = np.array(
            [models.index(n.gpu_model) for n in self.nodes], np.int64
        )

    @property
    def gpu_capacity(self) -> int:
        """The cluster's GPU capacity in milli-GPUs."""
        return int(np.count_nonzero(self.gpu_free >= 0)) * MILLI_PER_GPU

    @property
    def gpu_allocated(self) -> int:
        """Milli-GPUs held by placed replicas."""
        return self.gpu_capacity - int(self.gpu_free[self.gpu_free > 0].sum())

    def apply(self, workload: Workload, placements: Sequence[Placement], sign: int = 1) -> None:
        """Take (sign 1) or give back (sign -1) one workload's replicas, all or nothing.

        Raises ``AssertionError`` (changing nothing) when a device or a node's CPU would leave its
        bounds: the engine placed something the cluster cannot hold, a bug to stop on.
        """
        gpu = workload.request.get(GPU, 0)
        per_device = gpu if gpu < MILLI_PER_GPU else MILLI_PER_GPU
        gpu_free, cpu_free = self.gpu_free.copy(), self.cpu_free.copy()
        for placement in placements:
            n = self.index[placement.node_id]
            cpu_free[n] -= sign * workload.request.get(CPU, 0)
            for d in placement.gpu_devices:
                gpu_free[n, d] -= sign * per_device
                if not 0 <= gpu_free[n, d] <= MILLI_PER_GPU:
                    raise AssertionError(
                        f"{workload.id}: device {d} of {placement.node_id} out of range"
                    )
            if cpu_free[n] < 0:
                raise AssertionError(f"{workload.id}: {placement.node_id} over its cpu")
        self.gpu_free, self.cpu_free = gpu_free, cpu_free

    def fragmentation(self, shapes: Sequence[Shape]) -> FloatArray:
        """FGD's F_n per node: Σ_m p_m F_n(m), in milli-GPUs (see ``fragmentation_ratio``)."""
        return node_fragmentation(
            self.gpu_free, self.cpu_free, self.model_code, self.model_names, shapes
        )

    def fragmentation_ratio(self, shapes: Sequence[Shape]) -> float:
        """Σ_n F_n / Σ_n idle GPU milli: the fragmented share of idle GPUs (0 when none idle)."""
        idle = float(self.gpu_free[self.gpu_free > 0].sum())
        return float(self.fragmentation(shapes).sum()) / idle if idle else 0.0


# F_n(m), the paper's definition (frag.go): when m cannot run on n at all (a CPU-only shape, a GPU
# model it does not allow, too little CPU, or too few devices with m's per-device milli left) every
# idle milli-GPU on n is fragmented for m; otherwise only the devices whose free milli is below
# m's per-device need are. F_n weighs each typical shape by its share. Memory plays no part.
def node_fragmentation(
    gpu_free: IntArray,
    cpu_free: IntArray,
    model_code: IntArray,
    model_names: Sequence[str],
    shapes: Sequence[Shape],
) -> FloatArray:
    """F_n for every node, vectorised over nodes and devices (one pass per shape)."""
    free = np.where(gpu_free > 0, gpu_free, 0)
    idle = free.sum(axis=1).astype(np.float64)
    out = np.zeros(len(cpu_free), dtype=np.float64)
    for shape in shapes:
        if shape.gpu == 0:
            out += shape.weight * idle
            continue
        need = shape.gpu if shape.gpu < MILLI_PER_GPU else MILLI_PER_GPU
        count = 1 if shape.gpu < MILLI_PER_GPU else shape.gpu // MILLI_PER_GPU
        usable = (free >= need).sum(axis=1) >= count
        usable &= cpu_free >= shape.cpu
        if shape.models:
            allowed = [i for i, name in enumerate(model_names) if name in shape.models]
            usable &= np.isin(model_code, allowed)
        below = np.where(free < need, free, 0).sum(axis=1).astype(np.float64)
        out += shape.weight * np.where(usable, below, idle)
    return out


def bucket_curve(arrived_milli: IntArray, allocated_milli: IntArray, capacity: int) -> FloatArray:
    """Allocation rate (% of cluster GPUs) per arrived bucket 0 … 130 %, NaN where no event.

    The paper's analysis: each arrival event's arrived % is rounded to a whole percent (half to
    even, as pandas does), the allocation rates of the events in a bucket are averaged, and an
    empty bucket takes the mean of the events within ±1 % of it.
    """
    arrived_pct = np.round(arrived_milli * 100.0 / capacity)
    alloc_pct = np.round(allocated_milli * 100.0 / capacity, 2)
    curve = np.full(BUCKETS, np.nan)
    for b in range(BUCKETS):
        hit = arrived_pct == b
        if not hit.any():
            hit = (arrived_pct >= b - 1) & (arrived_pct <= b + 1)
        if hit.any():
            curve[b] = float(alloc_pct[hit].mean())
    return curve
