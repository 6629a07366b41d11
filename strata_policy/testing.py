"""Builders for tests, notebooks and embedders: terse constructors in human units.

``node("n1", cpu=64, memory_gi=256, gpus=8, model="A100")`` builds a ``Node`` with base-unit
capacity; ``workload("w1", "team-a", cpu=4, gpu_milli=500)`` a ``Workload``. Shipped in the
package (as structlog ships ``structlog.testing``) so that users' own tests can build snapshots the
same way ours do.
"""

from __future__ import annotations

from collections.abc import Mapping

from strata_policy.capacity import GROUP_LABEL, NodeGroup
from strata_policy.model import Node, Placement, RunningWorkload, Scope, Snapshot, Workload
from strata_policy.model.resources import CPU, GPU, MEMORY

GI = 1024**3


def resources(
    cpu: float = 0,
    memory_gi: float = 0,
    gpu_milli: int = 0,
    extra: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Base-unit amounts from CPUs, GiB and milli-GPUs; zero entries left out."""
    out = {CPU: round(cpu * 1000), MEMORY: round(memory_gi * GI), GPU: gpu_milli}
    out.update(extra or {})
    return {k: v for k, v in out.items() if v}


def node(
    node_id: str,
    cpu: float = 64,
    memory_gi: float = 256,
    gpus: int = 0,
    model: str = "",
    labels: Mapping[str, str] | None = None,
    unschedulable: bool = False,
    extra: Mapping[str, int] | None = None,
) -> Node:
    """A node with ``gpus`` whole devices of ``model``."""
    return Node(
        id=node_id,
        capacity=resources(cpu, memory_gi, gpus * 1000, extra),
        labels=dict(labels or {}),
        unschedulable=unschedulable,
        gpu_model=model,
    )


def scope(
    scope_id: str,
    parent: str = "",
    guarantee: Mapping[str, int] | None = None,
    limit: Mapping[str, int] | None = None,
    weight: float = 1.0,
    kind: str = "",
) -> Scope:
    """A scope; ``guarantee``/``limit`` in base units (use ``resources(...)``)."""
    return Scope(
        id=scope_id,
        parent_id=parent,
        kind=kind,
        guarantee=dict(guarantee or {}),
        limit=dict(limit or {}),
        weight=weight,
    )


def workload(
    workload_id: str,
    scope_id: str,
    cpu: float = 0,
    memory_gi: float = 0,
    gpu_milli: int = 0,
    replicas: int = 1,
    priority: int = 0,
    preemptible: bool = True,
    node_selector: Mapping[str, str] | None = None,
    gpu_model: str = "",
    spread_key: str = "",
    queued_at_ms: int = 0,
    extra: Mapping[str, int] | None = None,
) -> Workload:
    """A workload asking, per replica, for CPUs, GiB and milli-GPUs."""
    return Workload(
        id=workload_id,
        scope_id=scope_id,
        request=resources(cpu, memory_gi, gpu_milli, extra),
        replicas=replicas,
        priority=priority,
        preemptible=preemptible,
        node_selector=dict(node_selector or {}),
        gpu_model=gpu_model,
        spread_key=spread_key,
        queued_at_ms=queued_at_ms,
    )


def running(
    wl: Workload,
    *nodes_and_devices: tuple[str, tuple[int, ...]] | str,
    admitted_at_ms: int = 0,
) -> RunningWorkload:
    """A running workload; each placement is ``"node"`` or ``("node", (device, ...))``."""
    placements = tuple(
        Placement(p) if isinstance(p, str) else Placement(p[0], tuple(p[1]))
        for p in nodes_and_devices
    )
    return RunningWorkload(workload=wl, placements=placements, admitted_at_ms=admitted_at_ms)


def snapshot(
    nodes: list[Node] | None = None,
    scopes: list[Scope] | None = None,
    workloads: list[RunningWorkload] | None = None,
) -> Snapshot:
    """A snapshot from lists."""
    return Snapshot(tuple(nodes or ()), tuple(scopes or ()), tuple(workloads or ()))


def node_group(
    group_id: str,
    price: float,
    cpu: float = 64,
    memory_gi: float = 256,
    gpus: int = 0,
    model: str = "",
    min_count: int = 0,
    max_count: int = 100,
    labels: Mapping[str, str] | None = None,
    current_count: int | None = None,
) -> NodeGroup:
    """A catalog group whose template is ``node(f"{group_id}-", ...)`` at ``price`` per hour."""
    template = node(f"{group_id}-", cpu, memory_gi, gpus, model, labels)
    return NodeGroup(group_id, template, price, min_count, max_count, current_count)


def group_node(
    node_id: str,
    group_id: str,
    cpu: float = 64,
    memory_gi: float = 256,
    gpus: int = 0,
    model: str = "",
    labels: Mapping[str, str] | None = None,
    unschedulable: bool = False,
) -> Node:
    """A snapshot node that belongs to catalog group ``group_id`` (its label set)."""
    tagged = {**(labels or {}), GROUP_LABEL: group_id}
    return node(node_id, cpu, memory_gi, gpus, model, tagged, unschedulable)
