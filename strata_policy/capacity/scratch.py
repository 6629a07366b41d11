"""Scratch node matrices for planning: built from a node list, nodes blocked and unblocked.

A plan simulates on matrices it owns (never the cluster's): ``build`` makes one from nodes and
running workloads; ``block`` takes every free unit of a node (its free resources in one
replica, each partly used GPU device's free milli, the fully free devices as whole GPUs), so
the placement engine sees it as full, which is how "the node is gone" and "not this node"
are asked of the same kernels; ``unblock`` undoes it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from strata_policy.model import Node, Placement, RunningWorkload, Workload
from strata_policy.model.resources import GPU, MILLI_PER_GPU, Resources
from strata_policy.state.matrix_build import allocate_running, matrix_from_nodes
from strata_policy.state.nodes import GPU_COL, NodeMatrix

Blocked = list[tuple[int, dict[str, int], tuple[int, ...]]]


def build(nodes: Sequence[Node], running: Sequence[RunningWorkload]) -> NodeMatrix:
    """A matrix of ``nodes`` with every placed replica of ``running`` allocated."""
    matrix = matrix_from_nodes(nodes)
    if not allocate_running(matrix, running):
        for rw in running:
            for p in rw.placements:
                matrix.allocate(matrix.index[p.node_id], rw.workload.request, p.gpu_devices)
    return matrix


def extend(base: NodeMatrix, extra: Sequence[Node]) -> NodeMatrix:
    """A matrix of ``base``'s nodes (their allocation copied) followed by the empty ``extra``
    nodes: what ``build`` would give for the same running work, without placing it again."""
    matrix = matrix_from_nodes([*base.nodes, *extra])
    n, width = len(base), base.gpu_free.shape[1]
    cols = [matrix.resource_index[r] for r in base.resources]
    matrix.allocated[:n, cols] = base.allocated
    matrix.free[:n] = matrix.capacity[:n] - matrix.allocated[:n]
    matrix.gpu_free[:n, :width] = base.gpu_free
    return matrix


def block(matrix: NodeMatrix, n: int) -> Blocked:
    """Take all that is free on node ``n``; returns what ``unblock`` gives back."""
    taken: Blocked = []
    rest = {
        r: int(matrix.free[n, c])
        for c, r in enumerate(matrix.resources)
        if c != GPU_COL and matrix.free[n, c] > 0
    }
    whole = tuple(
        d for d in range(int(matrix.gpu_devices[n])) if matrix.gpu_free[n, d] == MILLI_PER_GPU
    )
    first = dict(rest)
    if whole:
        first[GPU] = len(whole) * MILLI_PER_GPU
    if first:
        matrix.allocate(n, first, whole)
        taken.append((n, first, whole))
    for d in range(int(matrix.gpu_devices[n])):
        left = int(matrix.gpu_free[n, d])
        if 0 < left < MILLI_PER_GPU:
            share = {GPU: left}
            matrix.allocate(n, share, (d,))
            taken.append((n, share, (d,)))
    return taken


def unblock(matrix: NodeMatrix, taken: Blocked) -> None:
    """Undo ``block`` (or several, in reverse)."""
    for n, request, devices in reversed(taken):
        matrix.deallocate(n, request, devices)


def one_replica(w: Workload) -> Workload:
    """``w`` as a single replica without spread, for placing one replica on its own (the
    caller keeps spread by blocking the nodes the other replicas rule out)."""
    return Workload(
        id=w.id,
        scope_id=w.scope_id,
        request=w.request,
        replicas=1,
        priority=w.priority,
        preemptible=w.preemptible,
        node_selector=w.node_selector,
        gpu_model=w.gpu_model,
        spread_key="",
        queued_at_ms=w.queued_at_ms,
    )


def unallocate(matrix: NodeMatrix, request: Resources, placements: Sequence[Placement]) -> None:
    """Free the given replicas."""
    for p in placements:
        matrix.deallocate(matrix.index[p.node_id], request, p.gpu_devices)


def allocate(matrix: NodeMatrix, request: Resources, placements: Sequence[Placement]) -> None:
    """Take the given replicas."""
    for p in placements:
        matrix.allocate(matrix.index[p.node_id], request, p.gpu_devices)
