"""Pod → Strata workload: the effective request exactly as ``PodRequests`` computes it.

``pod_requests`` is a line-by-line reading of ``component-helpers/resource.PodRequests`` (the
function kube-scheduler's NodeResourcesFit and Kueue both call), in exact decimal arithmetic::

    reqs = Σ containers
    for each init container, in order:
        sidecar (restartPolicy Always): reqs += it; sidecars += it; use = sidecars
        otherwise:                      use = it + sidecars (it runs beside earlier sidecars)
        init_max = max(init_max, use)                     # per resource
    reqs = max(reqs, init_max)                            # per resource
    pod-level spec.resources.requests override cpu and memory when set
    reqs += spec.overhead

A container without requests but with limits counts its limits (what the API server defaults
requests to at creation, and what Kueue does for objects that skipped defaulting).

``pod_to_workload`` then converts to Strata units (``conventions.GpuConventions`` says how GPU
resources become milli-GPUs), adds ``pods: 1`` (each pod takes one of the node's pod slots, as
kube-scheduler counts), and reads priority, scope, gang, selector and GPU model.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import ROUND_CEILING, Decimal
from typing import Any

from strata_policy.kube.conventions import (
    DEFAULT_GPU,
    DEVICES_KEY,
    GANG_KEY,
    GATE,
    GPU_MODEL_KEY,
    GPU_PRODUCT,
    NODE_KEY,
    PREEMPTIBLE_KEY,
    WORKLOAD_KEY,
    GpuConventions,
    TranslationError,
)
from strata_policy.kube.quantities import QuantityError, parse_quantity, resource_units

Quantities = dict[str, Decimal]
POD_LEVEL = ("cpu", "memory")


class PodState(enum.Enum):
    """Where a pod stands for Strata."""

    GATED = "gated"  # carries Strata's gate: waiting for a decision
    PINNED = "pinned"  # released by Strata to a node, not yet bound
    BOUND = "bound"  # spec.nodeName set and not finished: holds node resources
    PENDING = "pending"  # not Strata's, not bound: kube-scheduler's business
    FINISHED = "finished"  # Succeeded or Failed: holds nothing


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``: the pod's identity and its default Strata workload id."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def pod_state(pod: Mapping[str, Any]) -> PodState:
    """The pod's state; a finished phase wins over everything else."""
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return PodState.FINISHED
    if spec.get("nodeName"):
        return PodState.BOUND
    if any(g.get("name") == GATE for g in spec.get("schedulingGates") or ()):
        return PodState.GATED
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if annotations.get(NODE_KEY):
        return PodState.PINNED
    return PodState.PENDING


def _requests_of(container: Mapping[str, Any]) -> Quantities:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(requests)
    return {str(k): parse_quantity(v) for k, v in merged.items()}


def _add(into: Quantities, more: Mapping[str, Decimal]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, Decimal(0)) + value


def _max(into: Quantities, more: Mapping[str, Decimal]) -> None:
    for name, value in more.items():
        if value > into.get(name, Decimal(0)):
            into[name] = value


def pod_requests(spec: Mapping[str, Any]) -> Quantities:
    """The effective request of a pod spec (exact quantities, Kubernetes names)."""
    reqs: Quantities = {}
    for container in spec.get("containers") or ():
        _add(reqs, _requests_of(container))
    sidecars: Quantities = {}
    init_max: Quantities = {}
    for container in spec.get("initContainers") or ():
        own = _requests_of(container)
        if container.get("restartPolicy") == "Always":
            _add(reqs, own)
            _add(sidecars, own)
            use = dict(sidecars)
        else:
            use = dict(own)
            _add(use, sidecars)
        _max(init_max, use)
    _max(reqs, init_max)
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for name in POD_LEVEL:
        if name in pod_level:
            reqs[name] = parse_quantity(pod_level[name])
    _add(reqs, {str(k): parse_quantity(v) for k, v in (spec.get("overhead") or {}).items()})
    return reqs


def strata_request(
    reqs: Mapping[str, Decimal], gpu: GpuConventions = DEFAULT_GPU
) -> dict[str, int]:
    """Kubernetes quantities → Strata base units (``gpu`` in milli-GPUs), zeros left out."""
    out: dict[str, int] = {}
    for name, value in reqs.items():
        if name in gpu.consumed:
            continue
        amount = resource_units(name, value)
        if amount:
            out[name] = amount
    milli = _gpu_milli(reqs, gpu)
    if milli:
        out["gpu"] = milli
    return out


def _gpu_milli(reqs: Mapping[str, Decimal], gpu: GpuConventions) -> int:
    """One of: whole devices, a time-slicing replica, a HAMi or gpushare share of one device."""
    whole = reqs.get(gpu.resource, Decimal(0))
    cores = reqs.get(gpu.hami_cores, Decimal(0))
    hami_mem = reqs.get(gpu.hami_memory, Decimal(0))
    if whole and (cores or hami_mem):
        if whole != 1:
            raise TranslationError("gpu", "a HAMi share of more than one device is not supported")
        milli = _ceil(cores * 10) if cores else _memory_share(hami_mem, gpu)
        return min(milli, 1000)
    if whole:
        if whole != whole.to_integral_value():
            raise TranslationError("gpu", f"{gpu.resource} must be whole, got {whole}")
        return int(whole) * 1000
    shared = reqs.get(gpu.shared_resource, Decimal(0))
    if shared:
        if shared != 1:
            raise TranslationError(
                "gpu", f"ask for one {gpu.shared_resource} replica, not {shared}"
            )
        return max(1, 1000 // gpu.shared_replicas)
    count = reqs.get(gpu.gpushare_count, Decimal(0))
    gib = reqs.get(gpu.gpushare_memory, Decimal(0))
    if gib and not count:
        milli = _memory_share(gib * 1024, gpu)
        if milli > 1000:
            raise TranslationError("gpu", f"{gpu.gpushare_memory}={gib} exceeds one device")
        return milli
    return int(count) * 1000


def _memory_share(mib: Decimal, gpu: GpuConventions) -> int:
    if not gpu.device_memory_mib:
        raise TranslationError("gpu", "a memory share needs the device memory (device_memory_mib)")
    return max(1, _ceil(mib * 1000 / gpu.device_memory_mib))


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def created_ms(meta: Mapping[str, Any]) -> int:
    """``metadata.creationTimestamp`` in Unix milliseconds (0 when absent)."""
    text = meta.get("creationTimestamp")
    if not text:
        return 0
    return int(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() * 1000)


def owner_job(pod: Mapping[str, Any]) -> str:
    """The name of the Job controlling the pod, or ""."""
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if owner.get("kind") == "Job" and owner.get("controller"):
            return str(owner.get("name") or "")
    return ""


def gang_of(pod: Mapping[str, Any]) -> str:
    """The gang a pod belongs to: its ``strata.dev/gang`` label, else its owning Job; or ""."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    label = (meta.get("labels") or {}).get(GANG_KEY)
    if label:
        return f"{ns}/gang-{label}"
    job = owner_job(pod)
    return f"{ns}/job-{job}" if job else ""


def workload_id(pod: Mapping[str, Any]) -> str:
    """The Strata workload a pod is part of: written on admission, else its gang, else itself."""
    meta = pod.get("metadata") or {}
    written = (meta.get("annotations") or {}).get(WORKLOAD_KEY)
    return str(written) if written else (gang_of(pod) or pod_key(pod))


def pod_to_workload(
    pod: Mapping[str, Any], scope_id: str, gpu: GpuConventions = DEFAULT_GPU
) -> dict[str, Any]:
    """One replica of the pod as a Strata ``Workload`` (proto JSON mapping), id ``ns/name``."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    try:
        request = strata_request(pod_requests(spec), gpu)
    except (QuantityError, TranslationError) as exc:
        raise TranslationError(f"pod {pod_key(pod)}", str(exc)) from None
    request["pods"] = 1
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    model = str(annotations.get(GPU_MODEL_KEY) or selector.pop(GPU_PRODUCT, ""))
    out: dict[str, Any] = {
        "id": pod_key(pod),
        "scopeId": scope_id,
        "request": request,
        "replicas": 1,
        "priority": int(spec.get("priority") or 0),
        "nodeSelector": selector,
        "gpuModel": model,
        "queuedAtMs": created_ms(meta),
    }
    if str(annotations.get(PREEMPTIBLE_KEY, "")).lower() == "false":
        out["preemptible"] = False
    return out


def placed_devices(pod: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The GPU devices Strata wrote on the pod, or None when it carries none (or garbage)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEVICES_KEY)
    if text is None:
        return None
    parts = [p for p in str(text).split(",") if p.strip()]
    if not all(p.strip().isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def pod_node(pod: Mapping[str, Any]) -> str:
    """The node a pod is on (bound) or pinned to by Strata; "" otherwise."""
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    if node:
        return str(node)
    return str(((pod.get("metadata") or {}).get("annotations") or {}).get(NODE_KEY) or "")


def sorted_pods(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods by creation time, then key: the order a node's devices are handed out in."""
    return sorted(pods, key=lambda p: (created_ms(p.get("metadata") or {}), pod_key(p)))
