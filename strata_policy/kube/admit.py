"""``kube admit``: pods held by the gate ``strata.dev/admission`` are admitted and placed by Strata.

Per batch, gated pods are grouped into workloads (a pod alone, or a gang: the pods sharing a
``strata.dev/gang`` label or a controlling Job, waiting until ``strata.dev/gang-size`` pods or the
Job's parallelism are there),
and each group is decided with one ``Place`` (admit and place in one step):

* PLACED: every pod gets, in one update, a ``kubernetes.io/hostname`` node selector, the GPU
  device annotation and its gate removed (``patches.release_patch``), after the update passed
  the gated-pod rules (``gated.update_violations``). A gang is released together: every member is
  re-read first, and if one is gone the whole gang's quota is released instead;
* DENIED or not placeable: the pods stay gated; a Warning Event and the ``StrataAdmission``
  condition carry Strata's reasons (once per distinct message, not every batch);
* NEEDS_RECLAIM: ``Reclaim`` is committed (victims released and the pod placed atomically in
  Strata), then every victim pod is evicted through the Eviction API; a 429 (a
  PodDisruptionBudget) is retried with back-off and reported on the waiting pod. Only when every
  victim is gone is the pod released; if an eviction stays blocked, the pod's hold is released in
  Strata and it stays gated, to be decided again;
* a workload Strata holds for pods that were deleted while gated is released;
* a decision committed before a restart (Strata already holds the workload, the pods are still
  gated) is adopted: its placements are released to the pods instead of deciding again.

Compute, then effect: decisions come from the server; this module only turns them into API calls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from strata_policy.kube.api import ApiError, KubeApi, StreamBroken
from strata_policy.kube.conventions import (
    DEFAULT_GPU,
    GANG_SIZE_KEY,
    GpuConventions,
    TranslationError,
)
from strata_policy.kube.evictions import evict_pods, victim_pods
from strata_policy.kube.gated import update_violations
from strata_policy.kube.mirror import Objects
from strata_policy.kube.patches import (
    condition_patch,
    event,
    pod_path,
    release_patch,
)
from strata_policy.kube.pods import (
    PodState,
    gang_of,
    owner_job,
    pod_key,
    pod_state,
    pod_to_workload,
    workload_id,
)
from strata_policy.kube.scopes import namespace_scope
from strata_policy.kube.sync import PolicyClient
from strata_policy.service.client import RpcError

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
Checker = Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]]


@dataclass
class Outcome:
    """What happened to one group of gated pods in one batch."""

    workload_id: str
    decision: str
    pods: list[str]
    reasons: list[str] = field(default_factory=list)
    victims: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AdmitConfig:
    """Which cluster, which placement policy, how hard to push evictions."""

    cluster_id: str
    gpu: GpuConventions = DEFAULT_GPU
    policy: str = "POLICY_UNSPECIFIED"
    eviction_attempts: int = 5
    eviction_backoff_s: float = 1.0
    instance: str = "strata-policy-kube"


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch, to know the pod the server will hold after ours."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


def _signature(pods: list[JSON]) -> str:
    """What of a group's pods can change a decision: spec, labels, annotations (not status)."""
    parts = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        parts.append(
            [meta.get("name"), meta.get("labels"), meta.get("annotations"), pod.get("spec")]
        )
    return json.dumps(parts, sort_keys=True)


def reasons_text(result: Mapping[str, Any]) -> list[str]:
    """Strata's reasons as lines: ``CODE: message``."""
    return [f"{r.get('code', '')}: {r.get('message', '')}" for r in result.get("reasons") or ()]


class Admitter:
    """Turns Strata's decisions on gated pods into pod updates, Events and Evictions."""

    def __init__(
        self,
        api: KubeApi,
        client: PolicyClient,
        config: AdmitConfig,
        check: Checker = update_violations,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api = api
        self.client = client
        self.config = config
        self.check = check
        self.now = now
        self.sleep = sleep
        self.held: dict[str, list[JSON]] = {}  # workload id -> placements Strata holds for it
        self.reported: dict[str, str] = {}  # pod key -> the last message we reported
        # workload id -> (its pods' signature, the generation) when it last stayed gated
        self.settled: dict[str, tuple[str, int | None]] = {}

    # -- grouping ---------------------------------------------------------------------------

    def groups(self, objects: Objects) -> dict[str, list[JSON]]:
        """Gated pods by the workload they form, members sorted by key."""
        out: dict[str, list[JSON]] = {}
        for pod in objects.get("pods", {}).values():
            if pod_state(pod) is PodState.GATED:
                out.setdefault(workload_id(pod), []).append(pod)
        for members in out.values():
            members.sort(key=pod_key)
        return out

    def step(self, objects: Objects) -> list[Outcome]:
        """Decide every gated group that may decide differently now; release orphaned holds.

        A group that stayed gated (denied, waiting, eviction blocked) is decided again only when
        its pods changed (spec, labels or annotations) or the Strata cluster did (a new
        generation), so a held pod costs one ``GetCluster`` per batch, not a ``Place``.
        """
        groups = self.groups(objects)
        for wid in sorted(self.held.keys() - groups.keys()):
            self._release_hold(wid)
        for wid in self.settled.keys() - groups.keys():
            del self.settled[wid]
        generation = self._generation()
        out: list[Outcome] = []
        for wid, pods in sorted(groups.items()):
            signature = (_signature(pods), generation)
            if generation is not None and self.settled.get(wid) == signature:
                continue
            outcome = self._decide(wid, pods, objects)
            if outcome.decision in ("DENIED", "WAITING"):
                self.settled[wid] = (signature[0], self._generation())
            else:
                self.settled.pop(wid, None)
            out.append(outcome)
        return out

    def _generation(self) -> int | None:
        try:
            reply = self.client.call("GetCluster", {"clusterId": self.config.cluster_id})
        except RpcError:
            return None
        return int(reply["generation"])

    # -- deciding ---------------------------------------------------------------------------

    def _workload(self, wid: str, pods: list[JSON], objects: Objects) -> JSON:
        ns = (pods[0].get("metadata") or {}).get("namespace") or "default"
        scope_id = namespace_scope(objects.get("namespaces", {}).get(ns), ns)
        members = [pod_to_workload(p, scope_id, self.config.gpu) for p in pods]
        if any(m["request"] != members[0]["request"] for m in members):
            raise TranslationError(f"gang {wid}", "members ask for different resources")
        out = dict(members[0])
        out.update(
            id=wid,
            replicas=len(pods),
            priority=max(m["priority"] for m in members),
            queuedAtMs=min(m["queuedAtMs"] for m in members),
        )
        return out

    def _decide(self, wid: str, pods: list[JSON], objects: Objects) -> Outcome:
        keys = [pod_key(p) for p in pods]
        wanted = self._gang_size(pods)
        if gang_of(pods[0]) and len(pods) < wanted:
            return Outcome(wid, "WAITING", keys, [f"gang has {len(pods)} of {wanted} pods"])
        if wid in self.held:
            return self._release(wid, pods, self.held[wid], objects)
        try:
            workload = self._workload(wid, pods, objects)
        except TranslationError as exc:
            return self._deny(wid, pods, [f"UNTRANSLATABLE: {exc}"])
        request = {
            "clusterId": self.config.cluster_id,
            "workloads": [workload],
            "order": "ORDER_PRIORITY",
            "policy": self.config.policy,
        }
        try:
            result = self.client.call("Place", request)["results"][0]
        except RpcError as exc:
            adopted = self._adopt(wid) if exc.code == "INVALID_ARGUMENT" else None
            if adopted:
                self.held[wid] = adopted
                return self._release(wid, pods, adopted, objects)
            return Outcome(wid, "ERROR", keys, [str(exc)])
        decision = str(result.get("decision", ""))
        if decision == "DECISION_PLACED":
            self.held[wid] = list(result["placements"])
            return self._release(wid, pods, result["placements"], objects)
        if decision == "DECISION_NEEDS_RECLAIM":
            return self._reclaim(wid, pods, workload, objects)
        return self._deny(wid, pods, reasons_text(result) or [decision])

    def _adopt(self, wid: str) -> list[JSON] | None:
        """The placements Strata already holds for ``wid`` (a decision committed before a
        restart, whose pod update never happened), or None."""
        try:
            reply = self.client.call(
                "GetCluster", {"clusterId": self.config.cluster_id, "includeSnapshot": True}
            )
        except RpcError:
            return None
        for running in (reply.get("snapshot") or {}).get("workloads") or ():
            if running["workload"]["id"] == wid and running.get("placements"):
                return list(running["placements"])
        return None

    def _gang_size(self, pods: list[JSON]) -> int:
        """``strata.dev/gang-size``, else the owning Job's parallelism (capped by completions),
        else the pods there are."""
        for pod in pods:
            text = str(
                ((pod.get("metadata") or {}).get("annotations") or {}).get(GANG_SIZE_KEY, "")
            )
            if text.isdigit():
                return int(text)
        job = owner_job(pods[0])
        if job:
            ns = (pods[0].get("metadata") or {}).get("namespace") or "default"
            try:
                found = self.api.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")
            except (ApiError, StreamBroken):
                return len(pods)
            spec = found.get("spec") or {}
            parallelism = int(spec.get("parallelism") or 1)
            completions = spec.get("completions")
            return min(parallelism, int(completions)) if completions else parallelism
        return len(pods)

    # -- effects ----------------------------------------------------------------------------

    def _send(self, method: str, path: str, body: JSON, content_type: str) -> JSON:
        return self.api.request(method, path, body, content_type)

    def _report(self, pod: JSON, kind: str, reason: str, message: str, status: str) -> None:
        """An Event and the condition, once per distinct message per pod."""
        key = pod_key(pod)
        if self.reported.get(key) == f"{reason}:{message}":
            return
        now = self.now()
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        try:
            self._send(
                "POST",
                f"/api/v1/namespaces/{ns}/events",
                event(pod, kind, reason, message, now, self.config.instance),
                "application/json",
            )
            self._send(
                "PATCH",
                pod_path(pod, "status"),
                condition_patch(status, reason, message, now),
                STRATEGIC_PATCH,
            )
        except (ApiError, StreamBroken):
            return  # best effort: reported again next batch
        self.reported[key] = f"{reason}:{message}"

    def _deny(self, wid: str, pods: list[JSON], reasons: list[str]) -> Outcome:
        message = "; ".join(reasons)
        for pod in pods:
            self._report(pod, "Warning", "StrataDenied", message, "False")
        return Outcome(wid, "DENIED", [pod_key(p) for p in pods], reasons)

    def _release_hold(self, wid: str) -> None:
        try:
            self.client.call("Release", {"clusterId": self.config.cluster_id, "workloadIds": [wid]})
        except RpcError:
            return  # kept: tried again next batch
        self.held.pop(wid, None)

    def _release(
        self, wid: str, pods: list[JSON], placements: list[JSON], objects: Objects
    ) -> Outcome:
        """Pin and ungate every pod of the group, or none (then Strata's hold is released)."""
        keys = [pod_key(p) for p in pods]
        if len(placements) != len(pods):
            self._release_hold(wid)
            return Outcome(wid, "ERROR", keys, [f"{len(placements)} placements for {len(pods)}"])
        nodes = objects.get("nodes", {})
        missing = sorted({str(p["nodeId"]) for p in placements} - nodes.keys())
        if missing:  # the node went away after Strata chose it: decide again
            self._release_hold(wid)
            return Outcome(wid, "ERROR", keys, [f"chosen node gone: {', '.join(missing)}"])
        patches: list[tuple[JSON, JSON]] = []
        try:
            for pod, placement in zip(pods, placements, strict=True):
                fresh = self.api.request("GET", pod_path(pod))
                node = nodes.get(str(placement["nodeId"]), {})
                patch = release_patch(fresh, wid, placement, self.config.gpu, node, self.now())
                problems = self.check(fresh, _merge(fresh, patch))
                if problems:
                    raise TranslationError(f"pod {pod_key(pod)}", "; ".join(problems))
                patches.append((fresh, patch))
        except ApiError as exc:
            if exc.status == 404:
                self._release_hold(wid)
                return Outcome(wid, "GONE", keys, [str(exc)])
            return Outcome(wid, "ERROR", keys, [str(exc)])
        except TranslationError as exc:
            self._release_hold(wid)
            return self._deny(wid, pods, [f"UNRELEASABLE: {exc}"])
        except StreamBroken as exc:
            return Outcome(wid, "ERROR", keys, [str(exc)])
        for fresh, patch in patches:
            try:
                self._send("PATCH", pod_path(fresh), patch, MERGE_PATCH)
            except (ApiError, StreamBroken) as exc:
                return Outcome(wid, "ERROR", keys, [f"{pod_key(fresh)}: {exc}"])
        self.held.pop(wid, None)
        for pod in pods:
            self.reported.pop(pod_key(pod), None)
        return Outcome(wid, "PLACED", keys)

    def _reclaim(self, wid: str, pods: list[JSON], workload: JSON, objects: Objects) -> Outcome:
        keys = [pod_key(p) for p in pods]
        request = {
            "clusterId": self.config.cluster_id,
            "workload": workload,
            "requirePlacement": True,
            "policy": self.config.policy,
        }
        try:
            reply = self.client.call("Reclaim", request)
        except RpcError as exc:
            return Outcome(wid, "ERROR", keys, [str(exc)])
        if not reply.get("satisfiable"):
            return self._deny(wid, pods, reasons_text(reply) or ["RECLAIM_UNSATISFIABLE"])
        placements = list((reply.get("result") or {}).get("placements") or ())
        self.held[wid] = placements
        victims = [str(v["workloadId"]) for v in reply.get("victims") or ()]
        blocked = self._evict(victims, objects)
        if blocked:
            self._release_hold(wid)
            message = "eviction blocked (PodDisruptionBudget): " + ", ".join(blocked)
            for pod in pods:
                self._report(pod, "Warning", "StrataEvictionBlocked", message, "False")
            return Outcome(wid, "EVICTION_BLOCKED", keys, [message], victims)
        outcome = self._release(wid, pods, placements, objects)
        outcome.victims = victims
        return outcome

    def _evict(self, victims: list[str], objects: Objects) -> list[str]:
        """Evict every pod of every victim workload; the pods still blocked after retries."""
        return evict_pods(
            self.api,
            victim_pods(victims, objects),
            self.config.eviction_attempts,
            self.config.eviction_backoff_s,
            self.sleep,
        )
