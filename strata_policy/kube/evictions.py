"""Evicting Reclaim's victims through the Eviction API, which honours PodDisruptionBudgets.

A ``429 Too Many Requests`` means a PodDisruptionBudget does not allow the eviction now: it is
retried with exponential back-off, and reported as blocked after the last attempt. A ``404``
means the pod is already gone, which is what we wanted. Any other failure is reported as
blocked at once (the caller releases its hold and decides again later).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from strata_policy.kube.api import ApiError, KubeApi, StreamBroken
from strata_policy.kube.mirror import Objects
from strata_policy.kube.patches import eviction, pod_path
from strata_policy.kube.pods import PodState, pod_key, pod_state, workload_id


def victim_pods(victims: Iterable[str], objects: Objects) -> list[Mapping[str, Any]]:
    """The running pods of the victim workloads, by key."""
    wanted = set(victims)
    pods = [
        p
        for p in objects.get("pods", {}).values()
        if workload_id(p) in wanted and pod_state(p) in (PodState.BOUND, PodState.PINNED)
    ]
    return sorted(pods, key=pod_key)


def evict_pods(
    api: KubeApi,
    pods: Iterable[Mapping[str, Any]],
    attempts: int,
    backoff_s: float,
    sleep: Callable[[float], None],
) -> list[str]:
    """Evict each pod; the keys of those still blocked after ``attempts`` tries."""
    blocked: list[str] = []
    for pod in pods:
        delay = backoff_s
        for attempt in range(attempts):
            try:
                api.request("POST", pod_path(pod, "eviction"), eviction(pod), "application/json")
                break
            except ApiError as exc:
                if exc.status == 404:
                    break  # already gone
                if exc.status != 429 or attempt == attempts - 1:
                    blocked.append(pod_key(pod))
                    break
            except StreamBroken:
                blocked.append(pod_key(pod))
                break
            sleep(delay)
            delay *= 2
    return blocked
