"""Platform objects as Strata workloads: CloudNativePG ``Cluster`` and KServe ``InferenceService``.

* A CloudNativePG ``Cluster`` (``postgresql.cnpg.io/v1``) is one workload: ``spec.instances``
  replicas of ``spec.resources`` (every instance, and its bootstrap job, uses the same
  resources), spread by ``spec.affinity.topologyKey`` (default ``kubernetes.io/hostname``) unless
  anti-affinity is disabled, never preemptible (a database instance is bound to its volume and is
  not restarted elsewhere to make room), with ``spec.affinity.nodeSelector``.
* A KServe ``InferenceService`` (``serving.kserve.io/v1beta1``) predictor is two workloads: the
  guaranteed ``minReplicas`` (default 1; none when 0, scale-to-zero) not preemptible, and a
  preemptible burst of ``maxReplicas - minReplicas`` single-replica workloads at a lower
  priority, so the burst is the first thing Reclaim takes back. The per-replica request is the
  predictor pod's effective request (``spec.predictor.model`` is a container inlined into the
  predictor's pod spec).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strata_policy.kube.conventions import DEFAULT_GPU, HOSTNAME, GpuConventions, TranslationError
from strata_policy.kube.pods import created_ms, pod_requests, strata_request
from strata_policy.kube.quantities import QuantityError

BURST_PRIORITY_DROP = 1  # the burst sits just below the guaranteed part


def _request(what: str, spec: Mapping[str, Any], gpu: GpuConventions) -> dict[str, int]:
    try:
        request = strata_request(pod_requests(spec), gpu)
    except (QuantityError, TranslationError) as exc:
        raise TranslationError(what, str(exc)) from None
    request["pods"] = 1
    return request


def cnpg_cluster_to_workload(
    cluster: Mapping[str, Any],
    scope_id: str,
    priority: int = 0,
    gpu: GpuConventions = DEFAULT_GPU,
) -> dict[str, Any]:
    """One non-preemptible workload for a CloudNativePG cluster, id ``ns/cnpg-<name>``."""
    meta = cluster.get("metadata") or {}
    spec = cluster.get("spec") or {}
    name = f"{meta.get('namespace') or 'default'}/cnpg-{meta.get('name')}"
    instances = int(spec.get("instances") or 1)
    if instances < 1:
        raise TranslationError(f"Cluster {name}", f"instances must be >= 1, got {instances}")
    affinity = spec.get("affinity") or {}
    pod_spec = {"containers": [{"name": "postgres", "resources": spec.get("resources") or {}}]}
    out: dict[str, Any] = {
        "id": name,
        "scopeId": scope_id,
        "request": _request(f"Cluster {name}", pod_spec, gpu),
        "replicas": instances,
        "priority": priority,
        "preemptible": False,
        "nodeSelector": {str(k): str(v) for k, v in (affinity.get("nodeSelector") or {}).items()},
        "queuedAtMs": created_ms(meta),
    }
    if affinity.get("enablePodAntiAffinity", True) and instances > 1:
        out["spread"] = {"topologyKey": str(affinity.get("topologyKey") or HOSTNAME)}
    return out


def _predictor_pod_spec(predictor: Mapping[str, Any]) -> dict[str, Any]:
    """The predictor's pod spec: its inlined PodSpec with ``model`` as the first container."""
    spec = {k: v for k, v in predictor.items() if k not in ("model", "minReplicas", "maxReplicas")}
    containers = list(spec.get("containers") or ())
    model = predictor.get("model")
    if model is not None:
        containers.insert(
            0, {"name": "kserve-container", "resources": model.get("resources") or {}}
        )
    spec["containers"] = containers
    return spec


def inference_service_to_workloads(
    isvc: Mapping[str, Any],
    scope_id: str,
    priority: int = 0,
    gpu: GpuConventions = DEFAULT_GPU,
) -> list[dict[str, Any]]:
    """The guaranteed part (``ns/isvc-<name>``) and one workload per burst replica (``…-burst-i``).

    Each burst replica is its own workload so it is admitted, and reclaimed, on its own: the
    autoscaler adds replicas one at a time, and Reclaim should take back only what it needs.
    """
    meta = isvc.get("metadata") or {}
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    name = f"{meta.get('namespace') or 'default'}/isvc-{meta.get('name')}"
    low = int(predictor.get("minReplicas", 1))
    high = int(predictor.get("maxReplicas") or max(low, 1))
    if low < 0 or high < low or high < 1:
        raise TranslationError(f"InferenceService {name}", f"bad replicas min={low} max={high}")
    pod_spec = _predictor_pod_spec(predictor)
    base: dict[str, Any] = {
        "scopeId": scope_id,
        "request": _request(f"InferenceService {name}", pod_spec, gpu),
        "nodeSelector": {str(k): str(v) for k, v in (pod_spec.get("nodeSelector") or {}).items()},
        "queuedAtMs": created_ms(meta),
    }
    out: list[dict[str, Any]] = []
    if low:
        out.append(
            {**base, "id": name, "replicas": low, "priority": priority, "preemptible": False}
        )
    for i in range(1, high - low + 1):
        out.append(
            {
                **base,
                "id": f"{name}-burst-{i}",
                "replicas": 1,
                "priority": priority - BURST_PRIORITY_DROP,
                "preemptible": True,
            }
        )
    return out
