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
    placed_devices,
    pod_key,
    pod_node,
    pod_state,
    pod_to_workload,
    workload_id,
)
from strata_policy.kube.scopes import namespace_scope, scope_tree

JSON = dict[str, Any]
Objects = Mapping[str, Mapping[str, JSON]]

OPTIONAL = frozenset({"stratascopes"})  # a cluster without the CRD simply has no StrataScopes
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


def mirror(
    objects: Objects, gpu: GpuConventions = DEFAULT_GPU, memo: TranslationMemo | None = None
) -> Desired:
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
    memo = memo if memo is not None else TranslationMemo()
    _running(out, live, gpu, memo)
    memo.keep_only({pod_key(p) for p, _ in live})
    return out


@dataclass
class TranslationMemo:
    """Pod translations by pod key, reused while the pod's resourceVersion and scope are unchanged.

    Owned by the ``Syncer`` (one per watched cluster, so one set of GPU conventions) and as long
    lived as it: a batch then translates only the pods that changed, not the whole cluster.
    Pods without a resourceVersion (hand-built objects) are never memoized.
    """

    pods: dict[str, tuple[str, str, JSON]] = field(default_factory=dict)

    def workload(
        self, pod: Mapping[str, Any], key: str, scope_id: str, gpu: GpuConventions
    ) -> JSON:
        """``pod_to_workload``, memoized; raises ``TranslationError`` like it."""
        version = str((pod.get("metadata") or {}).get("resourceVersion") or "")
        hit = self.pods.get(key)
        if version and hit is not None and hit[0] == version and hit[1] == scope_id:
            return hit[2]
        workload = pod_to_workload(pod, scope_id, gpu)
        if version:
            self.pods[key] = (version, scope_id, workload)
        return workload

    def keep_only(self, keys: set[str]) -> None:
        """Forget pods that are gone."""
        for key in self.pods.keys() - keys:
            del self.pods[key]


def _running(
    out: Desired, live: list[tuple[JSON, str]], gpu: GpuConventions, memo: TranslationMemo
) -> None:
    ledgers = {node_id: _NodeLedger(node) for node_id, node in out.nodes.items()}
    records: list[tuple[bool, int, str, Mapping[str, Any], str, JSON]] = []
    for pod, scope_id in live:
        if pod_state(pod) not in (PodState.BOUND, PodState.PINNED):
            continue
        node_id = pod_node(pod)
        if node_id not in ledgers:
            continue  # its node is gone (or not listed yet): it holds nothing Strata can see
        key = pod_key(pod)
        try:
            workload = memo.workload(pod, key, scope_id, gpu)
        except TranslationError as exc:
            out.problems.append(str(exc))
            continue
        records.append(
            (placed_devices(pod) is None, workload["queuedAtMs"], key, pod, node_id, workload)
        )
    # Pods whose devices Strata wrote are laid first, so a later pod cannot take their devices;
    # then by creation time and key, the order a node's devices were most likely handed out in.
    records.sort(key=lambda r: r[:3])
    laid: dict[str, list[tuple[str, str, JSON, list[int]]]] = {}
    for _, _, key, member, node_id, workload in records:
        devices = ledgers[node_id].take(workload["request"], placed_devices(member))
        if devices is None:
            out.problems.append(f"pod {key} does not fit what is left of {node_id}")
            continue
        laid.setdefault(workload_id(member), []).append((key, node_id, workload, devices))
    for wid, members in laid.items():
        members.sort(key=lambda m: m[0])
        first = dict(members[0][2])
        request: dict[str, int] = {}
        for _, _, w, _ in members:
            for r, amount in w["request"].items():
                request[r] = max(request.get(r, 0), amount)
        first.update(id=wid, request=request, replicas=len(members))
        out.workloads[wid] = {
            "workload": first,
            "placements": [
                {"nodeId": node_id, "gpuDevices": devices} for _, node_id, _, devices in members
            ],
            "admittedAtMs": min(w["queuedAtMs"] for _, _, w, _ in members),
        }
