"""Builders of upstream-shaped Kubernetes objects for tests: the official client's models, as JSON.

Each builder constructs the object with ``kubernetes.client`` models (which reject unknown
fields) and returns ``ApiClient.sanitize_for_serialization`` of it: exactly the camelCase JSON
the API server sends and the translators read. ``container("main", cpu="1", memory="1Gi")``;
``pod("p", containers=[...], init=[...], overhead={"cpu": "250m"})``;
``node("n1", cpu="64", memory="256Gi", gpus=8, product="A100-SXM4-80GB")``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kubernetes import client as k8s

from strata_policy.kube.conventions import GATE, GPU_PRODUCT

_API = k8s.ApiClient()
CREATED = "2026-01-01T00:00:00Z"


def as_json(model: object) -> dict[str, Any]:
    """A client model as the API server's JSON."""
    out = _API.sanitize_for_serialization(model)  # type: ignore[no-untyped-call]  # untyped client
    assert isinstance(out, dict)
    return out


def container(
    name: str = "main",
    *,
    limits: Mapping[str, str] | None = None,
    restart_policy: str | None = None,
    **requests: str,
) -> k8s.V1Container:
    """A container requesting ``requests`` (``nvidia_com_gpu`` style keys are not needed:
    pass odd names through ``**{"nvidia.com/gpu": "1"}``)."""
    resources = k8s.V1ResourceRequirements(
        requests=dict(requests) or None, limits=dict(limits) if limits else None
    )
    return k8s.V1Container(
        name=name, image="busybox", resources=resources, restart_policy=restart_policy
    )


def sidecar(name: str = "sidecar", **requests: str) -> k8s.V1Container:
    """A restartable init container (``restartPolicy: Always``): a sidecar."""
    resources = k8s.V1ResourceRequirements(requests=dict(requests) or None)
    return k8s.V1Container(name=name, image="busybox", resources=resources, restart_policy="Always")


def pod(
    name: str,
    namespace: str = "default",
    *,
    containers: Sequence[k8s.V1Container] = (),
    init: Sequence[k8s.V1Container] = (),
    overhead: Mapping[str, str] | None = None,
    pod_requests: Mapping[str, str] | None = None,
    priority: int | None = None,
    gated: bool = False,
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_job: str | None = None,
    phase: str | None = None,
    created: str = CREATED,
    uid: str | None = None,
) -> dict[str, Any]:
    """A Pod; ``gated`` adds Strata's scheduling gate."""
    owners = None
    if owner_job:
        owners = [
            k8s.V1OwnerReference(
                api_version="batch/v1",
                kind="Job",
                name=owner_job,
                uid=f"uid-{owner_job}",
                controller=True,
            )
        ]
    spec = k8s.V1PodSpec(
        containers=list(containers) or [container()],
        init_containers=list(init) or None,
        overhead=dict(overhead) if overhead else None,
        resources=k8s.V1ResourceRequirements(requests=dict(pod_requests)) if pod_requests else None,
        priority=priority,
        scheduling_gates=[k8s.V1PodSchedulingGate(name=GATE)] if gated else None,
        node_name=node_name,
        node_selector=dict(node_selector) if node_selector else None,
    )
    meta = k8s.V1ObjectMeta(
        name=name,
        namespace=namespace,
        uid=uid or f"uid-{namespace}-{name}",
        labels=dict(labels) if labels else None,
        annotations=dict(annotations) if annotations else None,
        owner_references=owners,
        creation_timestamp=datetime.fromisoformat(created.replace("Z", "+00:00")),
    )
    status = k8s.V1PodStatus(phase=phase) if phase else None
    return as_json(k8s.V1Pod(api_version="v1", kind="Pod", metadata=meta, spec=spec, status=status))


def node(
    name: str,
    *,
    cpu: str = "64",
    memory: str = "256Gi",
    gpus: int = 0,
    product: str = "",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[tuple[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node with ``status.allocatable``; ``taints`` as (key, effect) pairs."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    allocatable.update(extra or {})
    all_labels = dict(labels or {})
    if product:
        all_labels[GPU_PRODUCT] = product
    meta = k8s.V1ObjectMeta(name=name, labels=all_labels or None)
    spec = k8s.V1NodeSpec(
        unschedulable=unschedulable or None,
        taints=[k8s.V1Taint(key=k, effect=e) for k, e in taints] or None,
    )
    status = k8s.V1NodeStatus(allocatable=allocatable, capacity=allocatable)
    return as_json(
        k8s.V1Node(api_version="v1", kind="Node", metadata=meta, spec=spec, status=status)
    )


def namespace(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Namespace."""
    meta = k8s.V1ObjectMeta(
        name=name,
        labels=dict(labels) if labels else None,
        annotations=dict(annotations) if annotations else None,
    )
    return as_json(k8s.V1Namespace(api_version="v1", kind="Namespace", metadata=meta))


def strata_scope(
    name: str,
    *,
    parent: str = "",
    kind: str = "",
    guarantee: Mapping[str, str] | None = None,
    limit: Mapping[str, str] | None = None,
    weight: float | None = None,
) -> dict[str, Any]:
    """A ``StrataScope`` custom resource (``strata.dev/v1alpha1``)."""
    spec: dict[str, Any] = {}
    if parent:
        spec["parent"] = parent
    if kind:
        spec["kind"] = kind
    if guarantee:
        spec["guarantee"] = dict(guarantee)
    if limit:
        spec["limit"] = dict(limit)
    if weight is not None:
        spec["weight"] = weight
    return {
        "apiVersion": "strata.dev/v1alpha1",
        "kind": "StrataScope",
        "metadata": {"name": name},
        "spec": spec,
    }
