"""``kube sync``: keep a Strata cluster equal to what the Kubernetes API server holds.

Reflectors (one per kind) keep a ``Cache``; the ``Syncer`` wakes when it changes, waits one
batch window so a burst of events becomes one call, computes ``mirror(cache)`` and sends the
difference from what the server holds as one ``UpdateSnapshot`` with ``expected_generation``:

* the server's state is known from our own last successful call (``view``); when another client
  committed in between (``kube admit`` does, on every decision) the call is ``ABORTED``; we then
  read the server's snapshot (``GetCluster``), recompute the delta against it and send again
  (bounded; the next batch tries again if a busy admitter keeps winning);
* an unknown cluster is created with ``PushSnapshot``;
* workloads the mirror calls ``held`` (gated pods another controller may have admitted) are never
  removed by the sync; anything else on the server that Kubernetes does not hold is.

Figures for operators: ``lag_s`` (age of the oldest change the last call carried, i.e. how far
Strata trails the API server), calls, conflicts and the mirror's problems.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from google.protobuf import json_format
from strata.policy.v1 import types_pb2 as pb

from strata_policy.kube.conventions import DEFAULT_GPU, GpuConventions
from strata_policy.kube.mirror import Desired, Objects, TranslationMemo, mirror
from strata_policy.kube.reflector import Cache
from strata_policy.service.client import RpcError

JSON = dict[str, Any]


class PolicyClient(Protocol):
    """The one method of ``service.client.Client`` the controllers use."""

    def call(self, method: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request; raise ``RpcError`` on failure."""
        ...


def canonical(message: type[Any], obj: Mapping[str, Any]) -> JSON:
    """``obj`` through the proto message and back: defaults filled, names camelCase.

    ``preemptible`` has presence (absent = true); the server answers it explicitly, so it is
    filled here too, or every running workload would look changed.
    """
    parsed = json_format.ParseDict(dict(obj), message())
    out: JSON = json_format.MessageToDict(parsed, always_print_fields_with_no_presence=True)
    if "workload" in out:
        out["workload"].setdefault("preemptible", True)
    return out


@dataclass
class ServerView:
    """What the Strata server holds for the cluster, canonical, and at which generation."""

    generation: int = 0
    nodes: dict[str, JSON] = field(default_factory=dict)
    scopes: dict[str, JSON] = field(default_factory=dict)
    workloads: dict[str, JSON] = field(default_factory=dict)
    # kind -> id -> the mirror's own JSON for objects the server holds exactly as we sent them,
    # so an unchanged object is recognised without converting it again; empty after a re-read.
    raw: dict[str, dict[str, JSON]] = field(default_factory=dict)

    @classmethod
    def of_snapshot(cls, generation: int, snapshot: Mapping[str, Any]) -> ServerView:
        """From a ``Snapshot`` in the JSON mapping."""
        return cls(
            generation,
            {n["id"]: canonical(pb.Node, n) for n in snapshot.get("nodes", ())},
            {s["id"]: canonical(pb.Scope, s) for s in snapshot.get("scopes", ())},
            {
                w["workload"]["id"]: canonical(pb.RunningWorkload, w)
                for w in snapshot.get("workloads", ())
            },
        )


KINDS = (
    ("nodes", pb.Node, "upsertNodes", "removeNodeIds"),
    ("scopes", pb.Scope, "upsertScopes", "removeScopeIds"),
    ("workloads", pb.RunningWorkload, "upsertWorkloads", "removeWorkloadIds"),
)


def delta(desired: Desired, view: ServerView) -> tuple[JSON, dict[str, dict[str, JSON]]]:
    """The ``UpdateSnapshotRequest`` fields that take ``view`` to ``desired`` (held kept), and
    the mirror's JSON to remember as ``view.raw`` once that call commits.

    An object equal to what we last sent is skipped without a conversion; any other is compared
    in canonical form (the server's answer fills defaults we leave out).
    """
    change: JSON = {}
    raw = {"nodes": desired.nodes, "scopes": desired.scopes, "workloads": desired.workloads}
    for kind, message, upsert, remove in KINDS:
        wanted, current, known = raw[kind], getattr(view, kind), view.raw.get(kind, {})
        upserts = []
        for key in sorted(wanted):
            if known.get(key) == wanted[key]:
                continue
            converted = canonical(message, wanted[key])
            if current.get(key) != converted:
                upserts.append(converted)
        gone = current.keys() - wanted.keys()
        if kind == "workloads":
            gone -= desired.held
        elif kind == "nodes":  # a node a held workload sits on goes once the hold is released
            gone -= {
                p["nodeId"]
                for wid in desired.held & view.workloads.keys()
                for p in view.workloads[wid].get("placements") or ()
            }
        change[upsert] = upserts
        change[remove] = sorted(gone)
    return change, raw


def _apply(
    view: ServerView, change: Mapping[str, Any], generation: int, raw: dict[str, dict[str, JSON]]
) -> ServerView:
    out = ServerView(generation, dict(view.nodes), dict(view.scopes), dict(view.workloads), raw)
    for key in change["removeNodeIds"]:
        out.nodes.pop(key, None)
    for key in change["removeScopeIds"]:
        out.scopes.pop(key, None)
    for key in change["removeWorkloadIds"]:
        out.workloads.pop(key, None)
    out.nodes.update((n["id"], n) for n in change["upsertNodes"])
    out.scopes.update((s["id"], s) for s in change["upsertScopes"])
    out.workloads.update((w["workload"]["id"], w) for w in change["upsertWorkloads"])
    return out


@dataclass
class SyncStats:
    """What the syncer did (metrics read these)."""

    calls: int = 0
    pushes: int = 0
    conflicts: int = 0
    failures: int = 0
    lag_s: float = 0.0
    problems: list[str] = field(default_factory=list)


class Syncer:
    """Pushes ``mirror(cache)`` to one Strata cluster as batched deltas."""

    def __init__(
        self,
        client: PolicyClient,
        cluster_id: str,
        cache: Cache,
        gpu: GpuConventions = DEFAULT_GPU,
        batch_window_s: float = 0.2,
        max_conflicts: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.cluster_id = cluster_id
        self.cache = cache
        self.gpu = gpu
        self.batch_window_s = batch_window_s
        self.max_conflicts = max_conflicts
        self.clock = clock
        self.view: ServerView | None = None
        self.memo = TranslationMemo()
        self.stats = SyncStats()
        self.synced = threading.Event()

    def refresh(self) -> None:
        """Read what the server holds (or learn that the cluster does not exist yet)."""
        try:
            reply = self.client.call(
                "GetCluster", {"clusterId": self.cluster_id, "includeSnapshot": True}
            )
        except RpcError as exc:
            if exc.code != "NOT_FOUND":
                raise
            self.view = None
            return
        self.view = ServerView.of_snapshot(int(reply["generation"]), reply.get("snapshot") or {})

    def push(self, objects: Objects) -> None:
        """Make the server hold ``mirror(objects)``; retries on generation conflicts."""
        desired = mirror(objects, self.gpu, self.memo)
        self.stats.problems = desired.problems
        reread = False
        for _ in range(self.max_conflicts + 1):
            if self.view is None:
                reread = True
                self.refresh()
            if self.view is None:
                reply = self.client.call(
                    "PushSnapshot", {"clusterId": self.cluster_id, "snapshot": desired.snapshot()}
                )
                self.stats.pushes += 1
                self.view = ServerView.of_snapshot(int(reply["generation"]), desired.snapshot())
                self.view.raw = {
                    "nodes": desired.nodes,
                    "scopes": desired.scopes,
                    "workloads": desired.workloads,
                }
                return
            change, raw = delta(desired, self.view)
            if not any(change.values()) and not reread and self.view.nodes.keys() - desired.nodes:
                # A node is kept only for a hold our view may no longer hold: an empty delta
                # would never tell us, so read the server once and decide again.
                self.view = None
                continue
            if not any(change.values()):
                self.view.raw = raw
                return
            request = {
                "clusterId": self.cluster_id,
                "expectedGeneration": self.view.generation,
                **change,
            }
            try:
                reply = self.client.call("UpdateSnapshot", request)
            except RpcError as exc:
                if exc.code not in ("ABORTED", "NOT_FOUND"):
                    self.view = None  # re-read before trying again: never trust a failed call
                    raise
                self.stats.conflicts += 1
                self.view = None
                continue
            self.stats.calls += 1
            self.view = _apply(self.view, change, int(reply["generation"]), raw)
            return
        raise RuntimeError(f"gave up after {self.max_conflicts} generation conflicts")

    def step(self) -> None:
        """One batch: copy the cache, push, record the lag."""
        objects, since = self.cache.copy()
        self.push(objects)
        if since is not None:
            self.stats.lag_s = max(0.0, self.clock() - since)

    def run(self, stop: threading.Event, kinds: tuple[str, ...]) -> None:
        """Until ``stop``: wait for the first full list of every kind, then batch and push."""
        while not stop.is_set() and not self.cache.ready(kinds):
            stop.wait(0.05)
        while not stop.is_set():
            if not self.cache.changed.wait(0.5):
                continue
            if stop.wait(self.batch_window_s):
                return
            try:
                self.step()
                self.synced.set()
            except Exception as exc:  # the sync thread reports and retries; it never dies
                self.stats.failures += 1
                self.stats.problems = [*self.stats.problems, f"sync failed: {exc}"]
                self.cache.changed.set()  # try again next round
                stop.wait(1.0)
