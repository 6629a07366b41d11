"""Node → Strata node, a pure function of the Node object (the JSON the API server sends).

* capacity is ``status.allocatable`` (what kube-scheduler fits against), in Strata base units;
  ``nvidia.com/gpu`` (or the time-slicing ``nvidia.com/gpu.shared``, or gpushare's
  ``aliyun.com/gpu-count``) becomes ``gpu`` = devices × 1000, where devices = allocatable ÷
  ``nvidia.com/gpu.replicas`` (time-slicing and MPS advertise each device that many times),
  capped by GFD's ``nvidia.com/gpu.count`` when present (HAMi advertises vGPUs, not devices);
  every other resource (``pods``, ``ephemeral-storage``, ``hugepages-*``, MIG profiles, RDMA)
  passes through under its own name;
* ``unschedulable`` is ``spec.unschedulable`` or any NoSchedule/NoExecute taint whose key is not
  one the conventions ignore (PreferNoSchedule never counts);
* ``gpu_model`` is GFD's ``nvidia.com/gpu.product`` without the ``-SHARED`` suffix time-slicing
  appends, so a workload asking for ``Tesla-T4`` matches a shared T4;
* labels are copied, and ``kubernetes.io/hostname`` is always the node's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strata_policy.kube.conventions import (
    DEFAULT_GPU,
    GPU_COUNT,
    GPU_PRODUCT,
    GPU_REPLICAS,
    HOSTNAME,
    GpuConventions,
    TranslationError,
)
from strata_policy.kube.quantities import QuantityError, resource_units, to_units

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def node_to_strata(node: Mapping[str, Any], gpu: GpuConventions = DEFAULT_GPU) -> dict[str, Any]:
    """The Strata ``Node`` (proto JSON mapping) for a Kubernetes Node object."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name:
        raise TranslationError("node", "metadata.name is empty")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    labels[HOSTNAME] = name
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    try:
        capacity = _capacity(allocatable, labels, gpu)
    except QuantityError as exc:
        raise TranslationError(f"node {name}", str(exc)) from None
    spec = node.get("spec") or {}
    out: dict[str, Any] = {
        "id": name,
        "capacity": capacity,
        "labels": labels,
        "unschedulable": bool(spec.get("unschedulable")) or _blocked_by_taint(spec, gpu),
        "gpuModel": labels.get(GPU_PRODUCT, "").removesuffix("-SHARED"),
    }
    return out


def _capacity(
    allocatable: Mapping[str, Any], labels: Mapping[str, str], gpu: GpuConventions
) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, amount in allocatable.items():
        if name in gpu.consumed:
            continue
        value = resource_units(name, amount)
        if value:
            out[name] = value
    devices = _devices(allocatable, labels, gpu)
    if devices:
        out["gpu"] = devices * 1000
    return out


def _devices(allocatable: Mapping[str, Any], labels: Mapping[str, str], gpu: GpuConventions) -> int:
    replicas = _int_label(labels, GPU_REPLICAS) or 1
    advertised = 0
    for name in (gpu.resource, gpu.shared_resource):
        if name in allocatable:
            advertised += to_units(allocatable[name]) // replicas
    if gpu.gpushare_count in allocatable:
        advertised = max(advertised, to_units(allocatable[gpu.gpushare_count]))
    count = _int_label(labels, GPU_COUNT)
    return min(advertised, count) if count else advertised


def _int_label(labels: Mapping[str, str], key: str) -> int:
    text = labels.get(key, "")
    return int(text) if text.isdigit() else 0


def _blocked_by_taint(spec: Mapping[str, Any], gpu: GpuConventions) -> bool:
    for taint in spec.get("taints") or ():
        if (
            taint.get("effect") in BLOCKING_EFFECTS
            and taint.get("key") not in gpu.ignore_taint_keys
        ):
            return True
    return False
