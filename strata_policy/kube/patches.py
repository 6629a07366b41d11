"""The objects and patches ``kube admit`` sends, as pure functions of (pod, decision, clock).

* ``release_patch``: one JSON merge patch that pins the pod to Strata's node (a
  ``kubernetes.io/hostname`` node selector, added), writes the chosen GPU devices where the
  configured device plugin reads them, records the Strata workload, and removes Strata's gate —
  in one update, as Kueue's topology ungater does; ``metadata.resourceVersion`` makes it fail
  (409) rather than apply to a pod that changed since we decided;
* ``condition_patch``: the ``StrataAdmission`` pod condition with Strata's reasons (a status
  subresource patch, merged by condition type), which ``kubectl describe pod`` shows;
* ``event``: a core/v1 Event on the pod;
* ``eviction``: a policy/v1 Eviction (the API that honours PodDisruptionBudgets).

Device annotations by ``GpuConventions.device_style``: ``strata`` writes ``strata.dev/gpu-devices``
only; ``hami`` also ``nvidia.com/use-gpuuuid`` with the devices' UUIDs, read from the node's
``hami.io/node-nvidia-register`` annotation (HAMi's own device selector, so HAMi allocates exactly
those devices); ``gpushare`` also ``ALIYUN_COM_GPU_MEM_IDX`` with ``ALIYUN_COM_GPU_MEM_ASSIGNED``
``"false"`` and the assume time, which gpushare's device plugin reads when it allocates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from strata_policy.kube.conventions import (
    CONDITION_TYPE,
    DEVICES_KEY,
    FIELD_MANAGER,
    GATE,
    HOSTNAME,
    NODE_KEY,
    WORKLOAD_KEY,
    GpuConventions,
    TranslationError,
)

JSON = dict[str, Any]
HAMI_REGISTER = "hami.io/node-nvidia-register"
HAMI_USE_UUID = "nvidia.com/use-gpuuuid"
GPUSHARE_IDX = "ALIYUN_COM_GPU_MEM_IDX"
GPUSHARE_ASSIGNED = "ALIYUN_COM_GPU_MEM_ASSIGNED"
GPUSHARE_ASSUME = "ALIYUN_COM_GPU_MEM_ASSUME_TIME"


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def hami_uuids(node: Mapping[str, Any]) -> list[str]:
    """Device UUIDs in index order from HAMi's node registration annotation."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(HAMI_REGISTER, "")
    return [entry.split(",")[0] for entry in str(text).split(":") if entry.strip()]


def device_annotations(
    devices: Sequence[int], gpu: GpuConventions, node: Mapping[str, Any], now: datetime
) -> dict[str, str]:
    """Where the configured device plugin reads the chosen devices."""
    if not devices:
        return {}
    out = {DEVICES_KEY: ",".join(str(d) for d in devices)}
    if gpu.device_style == "hami":
        uuids = hami_uuids(node)
        if any(d >= len(uuids) for d in devices):
            raise TranslationError("devices", f"node has {len(uuids)} HAMi devices registered")
        out[HAMI_USE_UUID] = ",".join(uuids[d] for d in devices)
    elif gpu.device_style == "gpushare":
        if len(devices) != 1:
            raise TranslationError("devices", "gpushare pins one device per pod")
        out[GPUSHARE_IDX] = str(devices[0])
        out[GPUSHARE_ASSIGNED] = "false"
        out[GPUSHARE_ASSUME] = str(int(now.timestamp() * 1e9))
    return out


def release_patch(
    pod: Mapping[str, Any],
    workload_id: str,
    placement: Mapping[str, Any],
    gpu: GpuConventions,
    node: Mapping[str, Any],
    now: datetime,
) -> JSON:
    """The merge patch that pins, annotates and ungates the pod (see the module docstring)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    node_id = str(placement["nodeId"])
    devices = [int(d) for d in placement.get("gpuDevices") or ()]
    remaining = [g for g in spec.get("schedulingGates") or () if g.get("name") != GATE]
    annotations = {WORKLOAD_KEY: workload_id, NODE_KEY: node_id}
    annotations.update(device_annotations(devices, gpu, node, now))
    return {
        "metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": annotations},
        "spec": {"nodeSelector": {HOSTNAME: node_id}, "schedulingGates": remaining or None},
    }


def condition_patch(status: str, reason: str, message: str, now: datetime) -> JSON:
    """A status patch setting the ``StrataAdmission`` condition (merged by type)."""
    return {
        "status": {
            "conditions": [
                {
                    "type": CONDITION_TYPE,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": _stamp(now),
                }
            ]
        }
    }


def event(
    pod: Mapping[str, Any], kind: str, reason: str, message: str, now: datetime, instance: str
) -> JSON:
    """A core/v1 Event about the pod (``kind``: Normal or Warning)."""
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{meta.get('name')}.",
            "namespace": meta.get("namespace") or "default",
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta.get("name"),
            "namespace": meta.get("namespace") or "default",
            "uid": meta.get("uid"),
        },
        "type": kind,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": FIELD_MANAGER},
        "reportingComponent": FIELD_MANAGER,
        "reportingInstance": instance,
        "firstTimestamp": _stamp(now),
        "lastTimestamp": _stamp(now),
        "count": 1,
    }


def eviction(pod: Mapping[str, Any]) -> JSON:
    """A policy/v1 Eviction of the pod."""
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace") or "default"},
    }


def pod_path(pod: Mapping[str, Any], sub: str = "") -> str:
    """``/api/v1/namespaces/<ns>/pods/<name>[/<sub>]``."""
    meta = pod.get("metadata") or {}
    path = f"/api/v1/namespaces/{meta.get('namespace') or 'default'}/pods/{meta.get('name')}"
    return f"{path}/{sub}" if sub else path
