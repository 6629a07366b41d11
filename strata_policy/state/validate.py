"""Validation of snapshots, deltas and requests, field by field, before anything is built.

Every problem becomes a ``FieldViolation`` whose path reads like the request
(``snapshot.nodes[3].capacity["cpu"]``), so a client can point at the exact field. Validators
collect every violation they can find rather than stopping at the first, and never build state:
a call that fails validation changes nothing.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import Node, RunningWorkload, Scope, Snapshot, Workload
from strata_policy.model.resources import GPU, MAX_AMOUNT, MILLI_PER_GPU, valid_gpu_request
from strata_policy.state.running_columns import RunningColumns, nodes_plainly_valid

_ID = operator.attrgetter("id")
_SCOPE = operator.attrgetter("scope_id")
_REQUEST = operator.attrgetter("request")
_REPLICAS = operator.attrgetter("replicas")

if TYPE_CHECKING:
    from strata_policy.state.taskmix import TaskType

MAX_REPLICAS = 10_000  # one gang; the largest training jobs are a few thousand replicas
MAX_NODE_RESOURCES = 64  # distinct resource names across a cluster's nodes: the matrix's columns
MAX_ID_LENGTH = 253  # a Kubernetes object name: cluster, scope, node and workload ids
MAX_REQUEST_ID_LENGTH = 128  # a UUID is 36; room for a prefix, bounded for idempotency memory
MAX_DEVICES_PER_NODE = 64
MAX_WEIGHT = 1e9  # score weights and task-type weights
MAX_SCOPE_DEPTH = 64  # real tenancy trees are a handful of levels; this bounds every path walk


def check(violations: list[FieldViolation]) -> None:
    """Raise ``InvalidArgument`` when there is anything to report."""
    if violations:
        raise InvalidArgument(violations)


def _id(value: str, path: str, out: list[FieldViolation]) -> None:
    if not value:
        out.append(FieldViolation(path, "must not be empty"))
    elif len(value) > MAX_ID_LENGTH:
        out.append(FieldViolation(path, f"longer than {MAX_ID_LENGTH} characters"))


def request_ids(cluster_id: str, request_id: str) -> list[FieldViolation]:
    """Every call's ``cluster_id`` (not empty, at most ``MAX_ID_LENGTH``) and ``request_id``
    (optional, at most ``MAX_REQUEST_ID_LENGTH``): both are kept as keys (clusters, remembered
    answers), so their length bounds what a caller can make the server hold."""
    out: list[FieldViolation] = []
    if not cluster_id or len(cluster_id) > MAX_ID_LENGTH:
        _id(cluster_id, "cluster_id", out)
    if len(request_id) > MAX_REQUEST_ID_LENGTH:
        out.append(FieldViolation("request_id", f"longer than {MAX_REQUEST_ID_LENGTH} characters"))
    return out


def check_request_ids(cluster_id: str, request_id: str) -> None:
    """Raise ``InvalidArgument`` for ``request_ids``' violations; the common case (both fine)
    is decided inline, for this is on every call's path."""
    if not cluster_id or len(cluster_id) > MAX_ID_LENGTH or len(request_id) > MAX_REQUEST_ID_LENGTH:
        check(request_ids(cluster_id, request_id))


def id_list(ids: Sequence[str], path: str) -> list[FieldViolation]:
    """Ids named by a request (``workload_ids``): none empty or longer than ``MAX_ID_LENGTH``."""
    out: list[FieldViolation] = []
    if ids and (min(map(len, ids)) < 1 or max(map(len, ids)) > MAX_ID_LENGTH):
        for i, value in enumerate(ids):
            _id(value, f"{path}[{i}]", out)
    return out


def amounts(values: Mapping[str, int], path: str, out: list[FieldViolation]) -> None:
    """Every amount is a non-negative integer below the overflow guard; names are not empty.

    Field paths are formatted only for a violation: this runs on every Admit.
    """
    for name, amount in values.items():
        if not name:
            out.append(FieldViolation(f'{path}["{name}"]', "resource name must not be empty"))
        if amount < 0:
            out.append(FieldViolation(f'{path}["{name}"]', f"must not be negative, got {amount}"))
        elif amount > MAX_AMOUNT:
            out.append(
                FieldViolation(f'{path}["{name}"]', f"{amount} is above the maximum {MAX_AMOUNT}")
            )


def node(n: Node, path: str, out: list[FieldViolation]) -> None:
    """A node: id, non-negative capacity, whole GPU devices."""
    _id(n.id, f"{path}.id", out)
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
    _id(s.id, f"{path}.id", out)
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


def workload(
    w: Workload, path: str, scopes: Mapping[str, object], out: list[FieldViolation]
) -> None:
    """A workload: id, known scope, valid amounts and GPU request, sane replicas.

    Field paths are formatted only for a violation: this runs on every Admit. A rule added here
    must be added to ``workloads_plainly_valid`` too (batches are asked that first).
    """
    if not w.id or len(w.id) > MAX_ID_LENGTH:
        _id(w.id, f"{path}.id", out)
    if not w.scope_id:
        out.append(FieldViolation(f"{path}.scope_id", "must not be empty"))
    elif w.scope_id not in scopes:
        out.append(FieldViolation(f"{path}.scope_id", f"unknown scope {w.scope_id!r}"))
    request = w.request
    _request(request, f"{path}.request", out)
    replicas = w.replicas
    if replicas < 1 or replicas > MAX_REPLICAS:
        out.append(
            FieldViolation(f"{path}.replicas", f"must be 1 to {MAX_REPLICAS}, got {replicas}")
        )
    elif replicas > 1:
        for name, amount in request.items():
            if 0 <= amount <= MAX_AMOUNT and amount * replicas > MAX_AMOUNT:
                out.append(
                    FieldViolation(
                        f'{path}.request["{name}"]',
                        "request × replicas overflows the maximum amount",
                    )
                )


def workloads_plainly_valid(
    workloads: Sequence[Workload], scopes: Mapping[str, object], held: Mapping[str, object]
) -> bool:
    """True only when the field-by-field check would find nothing; False sends the batch to it.

    The same rules as ``workload`` (kept beside it: a rule added there must be added here) plus
    the batch's (ids distinct and new to ``held``), asked of the whole batch at once with
    C-level passes (sets, ``map``, ``min``/``max``) instead of a call per workload: a batch of
    10,000 costs well under a microsecond a workload. A Hypothesis property keeps it from
    accepting anything the walk would refuse.
    """
    ids = list(map(_ID, workloads))
    if len(set(ids)) != len(ids) or not held.keys().isdisjoint(ids):
        return False
    lengths = list(map(len, ids))
    if min(lengths) < 1 or max(lengths) > MAX_ID_LENGTH:
        return False
    named = set(map(_SCOPE, workloads))
    if "" in named or not all(s in scopes for s in named):
        return False
    replicas = list(map(_REPLICAS, workloads))
    most = max(replicas)
    if min(replicas) < 1 or most > MAX_REPLICAS:
        return False
    requests = list(map(_REQUEST, workloads))
    if "" in set().union(*requests):
        return False
    quantities = [a for r in requests for a in r.values()]
    if not all(0 <= a <= MAX_AMOUNT for a in quantities):
        return False
    if most > 1 and quantities and max(quantities) * most > MAX_AMOUNT:
        return False  # an overflow is possible: the walk checks each gang
    gpus = {r.get(GPU, 0) for r in requests}
    return all(valid_gpu_request(g) for g in gpus if g > 0)


def placement_options(
    weights: Mapping[str, float], coverage: float, task_types: Sequence[TaskType]
) -> list[FieldViolation]:
    """Placement options a request may set: score weights, FGD coverage and task types.

    Weights are finite numbers from 0 to ``MAX_WEIGHT`` (a NaN or an infinity would make every
    score NaN, and a negative one would reward using up a resource); coverage is a share in
    (0, 1]; task types have valid requests and a finite non-negative weight.
    """
    out: list[FieldViolation] = []
    for name, weight in weights.items():
        if not name:
            out.append(
                FieldViolation(f'resource_weights["{name}"]', "resource name must not be empty")
            )
        _weight(weight, f'resource_weights["{name}"]', out)
    if not (0 < coverage <= 1):  # also refuses NaN
        out.append(
            FieldViolation(
                "fragmentation.coverage", f"must be above 0 and at most 1, got {coverage}"
            )
        )
    for i, t in enumerate(task_types):
        where = f"fragmentation.task_types[{i}]"
        _request({"cpu": t.cpu_milli, "gpu": t.gpu_milli}, f"{where}.request", out)
        _weight(t.weight, f"{where}.weight", out)
    return out


def _request(request: Mapping[str, int], path: str, out: list[FieldViolation]) -> None:
    """Valid amounts, and a GPU request that is a share of one device or whole devices."""
    amounts(request, path, out)
    gpu = request.get(GPU, 0)
    if gpu > 0 and not valid_gpu_request(gpu):
        out.append(
            FieldViolation(
                f'{path}["gpu"]',
                f"{gpu} is neither a share of one device (< 1000) nor whole devices (k × 1000)",
            )
        )


def _weight(value: float, path: str, out: list[FieldViolation]) -> None:
    if not (math.isfinite(value) and 0 <= value <= MAX_WEIGHT):
        out.append(
            FieldViolation(path, f"must be a finite number from 0 to {MAX_WEIGHT:g}, got {value}")
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
