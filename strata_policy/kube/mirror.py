"""What the Strata cluster should hold, as a pure function of the Kubernetes objects.

``mirror(objects)`` turns the cached Nodes, Pods, Namespaces and StrataScopes into Strata nodes,
scopes and running workloads (proto JSON mapping):

* every Node that translates is a node;
* the scope tree comes from ``scopes.scope_tree``, with every scope a live pod names (gated ones
  included, so ``kube admit`` finds them) created when nothing defines it;
* a bound pod, or one Strata pinned to a node, runs there; pods sharing a workload id (a gang
  admitted together) are one workload with one replica each; a finished pod holds nothing.
  GPU devices are the ones Strata wrote on the pod when they are free, otherwise the lowest free
  ones (the stock device plugin does not report which it chose); a pod whose request does not fit
  what is left of its node is left out and reported, so one odd pod never makes the whole delta
  invalid;
* gated pods' workload ids are ``held``: Strata may already hold them (``kube admit`` decided,
  the pod update is in flight), so the sync never removes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strata_policy.kube.conventions import DEFAULT_GPU, GpuConventions, TranslationError
from strata_policy.kube.nodes import node_to_strata
from strata_policy.kube.pods import (
    PodState,
    created_ms,
    placed_devices,
    pod_key,
    pod_node,
    pod_state,
    pod_to_workload,
    sorted_pods,
    workload_id,
)
from strata_policy.kube.scopes import namespace_scope, scope_tree

JSON = dict[str, Any]
Objects = Mapping[str, Mapping[str, JSON]]

PATHS = {
    "nodes": "/api/v1/nodes",
    "namespaces": "/api/v1/namespaces",
    "pods": "/api/v1/pods",
    "stratascopes": "/apis/strata.dev/v1alpha1/stratascopes",
}


@dataclass
class Desired:
    """The Strata cluster the Kubernetes objects describe."""

    nodes: dict[str, JSON] = field(default_factory=dict)
    scopes: dict[str, JSON] = field(default_factory=dict)
    workloads: dict[str, JSON] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)

    def snapshot(self) -> JSON:
        """As a ``Snapshot`` message (PushSnapshot's body)."""
        return {
            "nodes": [self.nodes[k] for k in sorted(self.nodes)],
            "scopes": [self.scopes[k] for k in sorted(self.scopes)],
            "workloads": [self.workloads[k] for k in sorted(self.workloads)],
        }


class _NodeLedger:
    """What is left on one node while running pods are laid on it, device by device."""

    def __init__(self, node: JSON) -> None:
        self.free = dict(node["capacity"])
        self.devices = [1000] * (self.free.get("gpu", 0) // 1000)

    def take(self, request: Mapping[str, int], wanted: tuple[int, ...] | None) -> list[int] | None:
        """The devices used if the request fits (and is taken), else None (nothing taken)."""
        if any(self.free.get(r, 0) < amount for r, amount in request.items()):
            return None
        gpu = request.get("gpu", 0)
        share = gpu if 0 < gpu < 1000 else 1000
        count = 0 if gpu == 0 else 1 if gpu < 1000 else gpu // 1000
        fits = [d for d in range(len(self.devices)) if self.devices[d] >= share]
        if wanted is not None and len(wanted) == count and set(wanted) <= set(fits):
            chosen = list(wanted)
        elif len(fits) >= count:
            chosen = fits[:count]
        else:
            return None
        for r, amount in request.items():
            self.free[r] -= amount
        for d in chosen:
            self.devices[d] -= share
        return chosen


def mirror(objects: Objects, gpu: GpuConventions = DEFAULT_GPU) -> Desired:
    """The desired Strata cluster (see the module docstring for the rules)."""
    out = Desired()
    for node in objects.get("nodes", {}).values():
        try:
            translated = node_to_strata(node, gpu)
        except TranslationError as exc:
            out.problems.append(str(exc))
            continue
        out.nodes[translated["id"]] = translated
    namespaces = objects.get("namespaces", {})
    live: list[tuple[JSON, str]] = []
    for pod in objects.get("pods", {}).values():
        state = pod_state(pod)
        if state is PodState.FINISHED:
            continue
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        scope_id = namespace_scope(namespaces.get(ns), ns)
        live.append((pod, scope_id))
        if state is PodState.GATED:
            out.held.add(workload_id(pod))
    scopes, problems = scope_tree(
        objects.get("stratascopes", {}).values(),
        namespaces.values(),
        referenced={scope_id for _, scope_id in live},
        gpu=gpu,
    )
    out.problems += problems
    out.scopes = {s["id"]: s for s in scopes}
    _running(out, live, gpu)
    return out


def _running(out: Desired, live: list[tuple[JSON, str]], gpu: GpuConventions) -> None:
    ledgers = {node_id: _NodeLedger(node) for node_id, node in out.nodes.items()}
    scope_of = {pod_key(p): s for p, s in live}
    running: list[Mapping[str, Any]] = [
        p for p, _ in live if pod_state(p) in (PodState.BOUND, PodState.PINNED)
    ]
    laid: dict[str, list[tuple[Mapping[str, Any], JSON, list[int]]]] = {}
    # Pods whose devices Strata wrote are laid first, so a later pod cannot take their devices.
    ordered = sorted_pods(running)
    ordered.sort(key=lambda p: placed_devices(p) is None)
    for pod in ordered:
        node_id = pod_node(pod)
        if node_id not in ledgers:
            continue  # its node is gone (or not listed yet): it holds nothing Strata can see
        try:
            workload = pod_to_workload(pod, scope_of[pod_key(pod)], gpu)
        except TranslationError as exc:
            out.problems.append(str(exc))
            continue
        devices = ledgers[node_id].take(workload["request"], placed_devices(pod))
        if devices is None:
            out.problems.append(f"pod {pod_key(pod)} does not fit what is left of {node_id}")
            continue
        laid.setdefault(workload_id(pod), []).append((pod, workload, devices))
    for wid, members in laid.items():
        members.sort(key=lambda m: pod_key(m[0]))
        first = dict(members[0][1])
        request: dict[str, int] = {}
        for _, w, _ in members:
            for r, amount in w["request"].items():
                request[r] = max(request.get(r, 0), amount)
        first.update(id=wid, request=request, replicas=len(members))
        out.workloads[wid] = {
            "workload": first,
            "placements": [
                {"nodeId": pod_node(p), "gpuDevices": devices} for p, _, devices in members
            ],
            "admittedAtMs": min(created_ms(p.get("metadata") or {}) for p, _, _ in members),
        }
