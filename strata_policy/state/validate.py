"""Validation of snapshots and deltas, field by field, before anything is built.

Built on the field checks of ``state.request_checks`` (ids, amounts, a workload), which also
checks the other requests. Every problem becomes a ``FieldViolation`` whose path reads like the
request (``snapshot.nodes[3].capacity["cpu"]``), so a client can point at the exact field.
Validators collect every violation they can find rather than stopping at the first, and never
build state: a call that fails validation changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from strata_policy.errors import FieldViolation
from strata_policy.model import Node, RunningWorkload, Scope, Snapshot
from strata_policy.model.resources import GPU, MAX_AMOUNT, MILLI_PER_GPU
from strata_policy.state.request_checks import amounts, check_id, workload
from strata_policy.state.running_columns import RunningColumns, nodes_plainly_valid

MAX_NODE_RESOURCES = 64  # distinct resource names across a cluster's nodes: the matrix's columns
MAX_DEVICES_PER_NODE = 64
MAX_SCOPE_DEPTH = 64  # real tenancy trees are a handful of levels; this bounds every path walk


def node(n: Node, path: str, out: list[FieldViolation]) -> None:
    """A node: id, non-negative capacity, whole GPU devices."""
    check_id(n.id, f"{path}.id", out)
    amounts(n.capacity, f"{path}.capacity", out)
    gpu = n.capacity.get(GPU, 0)
    if gpu > 0 and gpu % MILLI_PER_GPU:
        out.append(
            FieldViolation(
                f'{path}.capacity["gpu"]', f"{gpu} is not a multiple of 1000 (whole devices)"
            )
        )
    elif gpu // MILLI_PER_GPU > MAX_DEVICES_PER_NODE:
        out.append(
            FieldViolation(
                f'{path}.capacity["gpu"]', f"more than {MAX_DEVICES_PER_NODE} devices on one node"
            )
        )


def scope(s: Scope, path: str, out: list[FieldViolation]) -> None:
    """A scope on its own: id, amounts, weight, guarantee within limit."""
    check_id(s.id, f"{path}.id", out)
    if s.parent_id == s.id and s.id:
        out.append(FieldViolation(f"{path}.parent_id", "a scope cannot be its own parent"))
    amounts(s.guarantee, f"{path}.guarantee", out)
    amounts(s.limit, f"{path}.limit", out)
    if not math.isfinite(s.weight) or s.weight <= 0:
        out.append(FieldViolation(f"{path}.weight", f"must be a positive number, got {s.weight}"))
    for name, guaranteed in s.guarantee.items():
        limit = s.limit.get(name)
        if limit is not None and guaranteed > limit:
            out.append(
                FieldViolation(
                    f'{path}.guarantee["{name}"]',
                    f"guarantee {guaranteed} is above the limit {limit}",
                )
            )


def scope_tree(scopes: Sequence[Scope], path: str, out: list[FieldViolation]) -> None:
    """Unique ids, known parents and no cycles across the whole tree."""
    seen: dict[str, int] = {}
    for i, s in enumerate(scopes):
        scope(s, f"{path}[{i}]", out)
        if s.id in seen:
            out.append(FieldViolation(f"{path}[{i}].id", f"duplicate scope id {s.id!r}"))
        seen.setdefault(s.id, i)
    by_id = {s.id: s for s in scopes}
    for i, s in enumerate(scopes):
        if s.parent_id and s.parent_id not in by_id:
            out.append(FieldViolation(f"{path}[{i}].parent_id", f"unknown parent {s.parent_id!r}"))
    _cycles_and_depth(scopes, by_id, seen, path, out)


def _cycles_and_depth(
    scopes: Sequence[Scope],
    by_id: Mapping[str, Scope],
    first: Mapping[str, int],
    path: str,
    out: list[FieldViolation],
) -> None:
    """Report each cycle once, and scopes deeper than ``MAX_SCOPE_DEPTH``; O(scopes).

    Each scope's depth is found once, walking up until a scope of known depth (memoised), so a
    long chain costs its length, not its length squared. A walk that meets itself is a cycle.
    """
    depth: dict[str, int] = {}
    in_cycle: set[str] = set()
    for s in scopes:
        if s.id in depth or s.id in in_cycle:
            continue
        walk: list[str] = []
        on_walk: dict[str, int] = {}
        cur = s.id
        while cur in by_id and cur not in depth and cur not in in_cycle:
            if cur in on_walk:
                cycle = walk[on_walk[cur] :]
                in_cycle.update(cycle)
                if len(cycle) > 1:  # a scope that is its own parent is reported by ``scope``
                    i = first[cycle[0]]
                    out.append(
                        FieldViolation(
                            f"{path}[{i}].parent_id",
                            "cycle in the scope tree: " + " -> ".join([*cycle, cur]),
                        )
                    )
                break
            on_walk[cur] = len(walk)
            walk.append(cur)
            cur = by_id[cur].parent_id
        base = depth.get(cur, 0) if cur in by_id else 0
        for k, sid in enumerate(reversed(walk)):
            if sid in in_cycle:
                continue
            depth[sid] = base + k + 1
            if depth[sid] == MAX_SCOPE_DEPTH + 1:
                out.append(
                    FieldViolation(
                        f"{path}[{first[sid]}].parent_id",
                        f"scope {sid!r} is {MAX_SCOPE_DEPTH + 1} levels deep; "
                        f"the tree may be at most {MAX_SCOPE_DEPTH} deep",
                    )
                )


def unique(ids: Iterable[str], path: str, what: str, out: list[FieldViolation]) -> None:
    """Report the second and later uses of an id."""
    seen: set[str] = set()
    for i, value in enumerate(ids):
        if value and value in seen:
            out.append(FieldViolation(f"{path}[{i}].id", f"duplicate {what} id {value!r}"))
        seen.add(value)


def node_resources(nodes: Sequence[Node], path: str, out: list[FieldViolation]) -> None:
    """At most ``MAX_NODE_RESOURCES`` distinct resource names over all nodes (each is a column
    of the node × resource matrix, so an unbounded count would be an unbounded allocation)."""
    names: set[str] = set()
    for i, n in enumerate(nodes):
        names.update(n.capacity)
        if len(names) > MAX_NODE_RESOURCES:
            out.append(
                FieldViolation(
                    f"{path}[{i}].capacity",
                    f"more than {MAX_NODE_RESOURCES} distinct resource names across the nodes",
                )
            )
            return
    cluster_totals(nodes, path, out)


def cluster_totals(nodes: Sequence[Node], path: str, out: list[FieldViolation]) -> None:
    """The cluster's capacity per resource at most ``MAX_AMOUNT``: each node's amount is bounded
    on its own, but the cluster's total is kept in int64 too (the node matrix's sums, free
    headroom), where a larger one would wrap and every decision would read a wrong capacity."""
    totals: dict[str, int] = {}
    for n in nodes:
        for name, amount in n.capacity.items():
            totals[name] = totals.get(name, 0) + amount
    for name in sorted(totals):
        if totals[name] > MAX_AMOUNT:
            out.append(
                FieldViolation(
                    path,
                    f"the nodes' total {name} {totals[name]} is above the maximum {MAX_AMOUNT} "
                    "for one cluster (split it into clusters, or use a coarser unit)",
                )
            )


def snapshot_shape(snap: Snapshot, path: str = "snapshot") -> list[FieldViolation]:
    """Everything that can be checked without building the node state.

    Running workloads held as columns (``RunningColumns``) are asked ``plainly_valid`` instead
    of walked; when it cannot say so, or the nodes or scopes have a problem, every workload is
    made and walked, so the violations are exactly the plain path's.
    """
    if isinstance(snap.workloads, RunningColumns) and snap.workloads.plainly_valid():
        if nodes_plainly_valid(snap.nodes):
            out: list[FieldViolation] = []
            scope_tree(snap.scopes, f"{path}.scopes", out)
        else:
            out = snapshot_shape(Snapshot(snap.nodes, snap.scopes), path)
        if not out:
            return out
    out = []
    node_resources(snap.nodes, f"{path}.nodes", out)
    for i, n in enumerate(snap.nodes):
        node(n, f"{path}.nodes[{i}]", out)
    unique((n.id for n in snap.nodes), f"{path}.nodes", "node", out)
    scope_tree(snap.scopes, f"{path}.scopes", out)
    scope_ids = {s.id: s for s in snap.scopes}
    node_ids = {n.id: n for n in snap.nodes}
    for i, rw in enumerate(snap.workloads):
        running_workload(rw, f"{path}.workloads[{i}]", scope_ids, node_ids, out)
    unique((rw.workload.id for rw in snap.workloads), f"{path}.workloads", "workload", out)
    return out


def running_workload(
    rw: RunningWorkload,
    path: str,
    scopes: Mapping[str, object],
    nodes: Mapping[str, Node],
    out: list[FieldViolation],
) -> None:
    """A running workload: the workload itself, then its placements (one per replica or none)."""
    workload(rw.workload, f"{path}.workload", scopes, out)
    if rw.admitted_at_ms < 0:
        out.append(FieldViolation(f"{path}.admitted_at_ms", "must not be negative"))
    if rw.placements and len(rw.placements) != rw.workload.replicas:
        out.append(
            FieldViolation(
                f"{path}.placements",
                f"{len(rw.placements)} placements for {rw.workload.replicas} replicas "
                "(give one per replica, or none for an admitted, unplaced workload)",
            )
        )
    for j, p in enumerate(rw.placements):
        if p.node_id not in nodes:
            out.append(
                FieldViolation(f"{path}.placements[{j}].node_id", f"unknown node {p.node_id!r}")
            )
        if len(set(p.gpu_devices)) != len(p.gpu_devices):
            out.append(
                FieldViolation(f"{path}.placements[{j}].gpu_devices", "duplicate device index")
            )
