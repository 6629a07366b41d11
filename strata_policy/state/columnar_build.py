"""The parts of building a ``ClusterState`` from ``RunningColumns``, per column with numpy.

``ClusterState.build`` of a plain snapshot reads every workload once: its placed replicas
become ``nodes.ReplicaRows``, its ``request × replicas`` is summed per scope, its shape is
counted in the task mix and it is inserted into the held workloads. Here each of those is the
same value computed from the columns: the same rows (workload order, then replica order; the
same devices, -1 padded to the widest), the same non-zero sums per scope, the same shape counts
in the same first-seen order, and the same ids in the same admission order, mapped to their
rows until a workload is read (``state.running_table``). Each function answers ``None`` where
the plain path would have to speak (a request for a resource no node has, a negative device, a
sum too large for int64), and the caller then takes the plain path.
"""

from __future__ import annotations

import numpy as np

from strata_policy.model import RunningWorkload, Workload
from strata_policy.model.resources import CPU, GPU
from strata_policy.state.nodes import NodeMatrix, ReplicaRows
from strata_policy.state.running_columns import RunningColumns
from strata_policy.state.running_table import RowNumbers, RunningTable
from strata_policy.state.taskmix import TaskMix

_EXACT_IN_FLOAT = 2**53


def replica_rows(matrix: NodeMatrix, cols: RunningColumns) -> ReplicaRows | None:
    """``matrix_build.running_rows`` of the columns' workloads."""
    placed = cols.placed_rows()
    if cols.devices.size and cols.devices.min() < -1:
        return None  # a negative device (-1 is the padding)
    req = np.zeros((placed.shape[0], len(matrix.resources)), dtype=np.int64)
    for k, name in enumerate(cols.resources):
        amounts = cols.request[placed, k]
        c = matrix.resource_index.get(name)
        if c is not None:
            req[:, c] = amounts
        elif amounts.size and amounts.max() > 0:
            return None
    return ReplicaRows(cols.placement_node.astype(np.int64), req, cols.devices)


def charges(cols: RunningColumns) -> dict[str, dict[str, int]] | None:
    """``request × replicas`` summed per scope, non-zero sums only, scopes in the order their
    first workload comes; ``None`` when a sum might not fit in int64."""
    n = len(cols)
    if not n or not cols.resources:
        return {}
    totals = cols.request * cols.replicas[:, None]
    most = int(totals.max())
    if most * n >= 2**63:
        return None
    scope = cols.scope
    seen, first = np.unique(scope, return_index=True)
    order = seen[np.argsort(first, kind="stable")]
    width = len(cols.scopes)
    sums = np.zeros((width, len(cols.resources)), dtype=np.int64)
    for k in range(len(cols.resources)):
        if most * n < _EXACT_IN_FLOAT:
            sums[:, k] = np.bincount(scope, weights=totals[:, k], minlength=width).astype(np.int64)
        else:
            np.add.at(sums[:, k], scope, totals[:, k])
    names = [s.id for s in cols.scopes]
    out: dict[str, dict[str, int]] = {}
    for s in order.tolist():
        row = sums[s].tolist()
        amounts = {r: a for r, a in zip(cols.resources, row, strict=True) if a}
        if amounts:
            out[names[s]] = amounts
    return out


def observe(mix: TaskMix, cols: RunningColumns) -> None:
    """``mix.observe_many`` of the columns' workloads: replicas counted per (cpu, gpu, model),
    in the order each first comes."""
    n = len(cols)
    if not n:
        return
    zero = np.zeros(n, dtype=np.int64)
    cpu = cols.request[:, cols.resources.index(CPU)] if CPU in cols.resources else zero
    gpu = cols.request[:, cols.resources.index(GPU)] if GPU in cols.resources else zero
    _, cpu_code = np.unique(cpu, return_inverse=True)
    gpu_seen, gpu_code = np.unique(gpu, return_inverse=True)
    models = max(len(cols.gpu_models), 1)
    key = (cpu_code.astype(np.int64) * len(gpu_seen) + gpu_code) * models + cols.gpu_model
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    replicas = np.bincount(inverse, weights=cols.replicas).astype(np.int64)
    shapes = []
    for g in np.argsort(first, kind="stable").tolist():
        row = int(first[g])
        request = {CPU: int(cpu[row]), GPU: int(gpu[row])}
        model = cols.gpu_models[int(cols.gpu_model[row])]
        shapes.append(Workload("", "", request, int(replicas[g]), gpu_model=model))
    mix.observe_many(shapes)


def held(cols: RunningColumns) -> tuple[RunningTable, RowNumbers]:
    """The held workloads (ids mapped to their rows, made on first read) and their admission
    numbers (snapshot order). Columns with an index of their ids' bytes (``cols.id_index``: a
    push's) answer both from it, so no dict of their ids is made by the push nor by the first
    call that looks one up (``state.running_table.PushedIds``); others, two copies of the
    columns' id → row map (a dict's copy is a fraction of building it)."""
    made: list[list[str]] = []  # each row's scope id, listed the first time one is asked

    def scope_of(row: int) -> str:
        if not made:
            made.append(cols.scope_ids())
        return made[0][row]

    bulk = getattr(cols.make, "bulk", None)  # a pushed snapshot's RowMaker makes rows in bulk
    many = bulk(cols) if bulk is not None else None
    index = cols.id_index
    if index is not None and index.count:  # no ids, nothing to index: a plain (empty) dict

        def ids() -> list[str]:
            return cols.ids

        table = RunningTable(None, cols.__getitem__, scope_of, many, index=index, ids=ids)
        return table, RowNumbers(index=index, ids=ids)
    rows = cols.rows()
    workloads: dict[str, RunningWorkload | int] = dict(rows)
    return RunningTable(workloads, cols.__getitem__, scope_of, many), RowNumbers(dict(rows))
