"""The FGD paper's placement in plain NumPy: the benchmark's baseline and the tests' twin.

A straightforward implementation of Fragmentation Gradient Descent (Weng et al., ATC 2023) as
the openb README describes the authors' simulator: for every arriving pod and every feasible node,
the node's fragmentation F_n (``metrics.node_fragmentation``) is computed before and after the
pod would land there, on each device that fits for a sharing pod (first device wins ties) and on
the first k fully free devices for a k-GPU pod; the score is ``100 · sigmoid((F_before −
F_after) / 1000)``, truncated to an integer when ``truncate``; the highest score wins and ties go
to the lowest node index. It recomputes F for every node at every step, vectorised over nodes,
which is what "straightforward" means here: no per-node cache, no compiled loop. It is slow on
purpose and obviously close to the definition; the engine's kernel must agree with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from strata_policy.model import Node, Workload
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU
from strata_policy.simulate.metrics import (
    ClusterMirror,
    FloatArray,
    IntArray,
    Shape,
    node_fragmentation,
)

Choice = tuple[int, tuple[int, ...]] | None  # (node index, devices) or unplaced


def fgd_replay(
    nodes: Sequence[Node], arrivals: Sequence[Workload], shapes: Sequence[Shape], truncate: bool
) -> list[Choice]:
    """Place ``arrivals`` one by one on ``nodes`` (in this order), committing each."""
    mirror = ClusterMirror(nodes)
    mem_free = np.array([n.capacity.get(MEMORY, 0) for n in nodes], dtype=np.int64)
    out: list[Choice] = []
    for w in arrivals:
        choice = _choose(mirror, mem_free, w, shapes, truncate)
        out.append(choice)
        if choice is not None:
            n, devices = choice
            gpu = w.request.get(GPU, 0)
            mirror.cpu_free[n] -= w.request.get(CPU, 0)
            mem_free[n] -= w.request.get(MEMORY, 0)
            for d in devices:
                mirror.gpu_free[n, d] -= gpu if gpu < MILLI_PER_GPU else MILLI_PER_GPU
    return out


def _choose(
    mirror: ClusterMirror,
    mem_free: IntArray,
    w: Workload,
    shapes: Sequence[Shape],
    truncate: bool,
) -> Choice:
    cpu, gpu = w.request.get(CPU, 0), w.request.get(GPU, 0)
    free = mirror.gpu_free
    feasible = (mirror.cpu_free >= cpu) & (mem_free >= w.request.get(MEMORY, 0))
    if w.gpu_models and gpu:
        allowed = [i for i, m in enumerate(mirror.model_names) if m in w.gpu_models]
        feasible &= np.isin(mirror.model_code, allowed)
    before = _frag(mirror, free, mirror.cpu_free, shapes)
    cpu_after = mirror.cpu_free - cpu
    best_score = -np.inf * np.ones(len(feasible))
    best_device = np.full(len(feasible), -1, dtype=np.int64)
    if gpu == 0:
        best_score = _score(before - _frag(mirror, free, cpu_after, shapes), truncate)
    elif gpu < MILLI_PER_GPU:
        for d in range(free.shape[1]):
            fits = free[:, d] >= gpu
            if not fits.any():
                continue
            after_free = free.copy()
            after_free[:, d] -= gpu
            score = _score(before - _frag(mirror, after_free, cpu_after, shapes), truncate)
            better = fits & (score > best_score)
            best_score = np.where(better, score, best_score)
            best_device = np.where(better, d, best_device)
        feasible &= best_device >= 0
    else:
        k = gpu // MILLI_PER_GPU
        whole = free == MILLI_PER_GPU
        feasible &= whole.sum(axis=1) >= k
        rank = np.cumsum(whole, axis=1)
        taken = whole & (rank <= k)
        after_free = np.where(taken & feasible[:, None], 0, free)
        best_score = _score(before - _frag(mirror, after_free, cpu_after, shapes), truncate)
    if not feasible.any():
        return None
    n = int(np.argmax(np.where(feasible, best_score, -np.inf)))
    if gpu == 0:
        return n, ()
    if gpu < MILLI_PER_GPU:
        return n, (int(best_device[n]),)
    devices = np.flatnonzero(free[n] == MILLI_PER_GPU)[: gpu // MILLI_PER_GPU]
    return n, tuple(int(d) for d in devices)


def _frag(
    mirror: ClusterMirror,
    gpu_free: IntArray,
    cpu_free: IntArray,
    shapes: Sequence[Shape],
) -> FloatArray:
    return node_fragmentation(gpu_free, cpu_free, mirror.model_code, mirror.model_names, shapes)


def _score(delta: FloatArray, truncate: bool) -> FloatArray:
    score: FloatArray = 100.0 / (1.0 + np.exp(-delta / 1000.0))
    return np.floor(score) if truncate else score
