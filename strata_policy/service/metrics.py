"""Prometheus metrics: RPCs, latency, decisions, reclaims, and per-scope quota gauges.

Everything lives in the ``Metrics`` object's own ``CollectorRegistry`` (never the process-wide
default), so several servers in one process (tests, embedders) do not collide and a scrape shows
exactly this server. Exported series (``deploy/prometheus/alerts.yaml`` relies on these names;
a test checks that every name a rule uses is exported):

==========================================  =========================================
``strata_rpcs_total{method,code}``           finished RPCs by gRPC status code
``strata_rpc_duration_seconds{method}``      latency histogram
``strata_decisions_total{method,outcome,reason}``  per-workload outcomes (first reason code)
``strata_reclaims_total{satisfiable}``       Reclaim answers, ``"true"``/``"false"``
``strata_reclaim_victims_total{reason}``     victims named, by ``VictimReason``
``strata_scope_usage{cluster,scope,resource}``       usage of the scope's subtree
``strata_scope_guarantee{cluster,scope,resource}``   guarantee as set
``strata_scope_effective_guarantee{...}``            ``G``: as set, else the children's sum
``strata_scope_limit{cluster,scope,resource}``       limit (absent = unlimited: no series)
``strata_scope_borrowed{cluster,scope,resource}``    usage above the effective guarantee
``strata_scope_at_limit{cluster,scope,resource}``    1 when usage ≥ limit, else 0
``strata_cluster_generation{cluster}``       generation; also ``_nodes``, ``_workloads``
==========================================  =========================================

Per-scope gauges are not kept up to date on every change: a custom collector asks the engine for
``(cluster_id, ClusterInfo)`` pairs when Prometheus scrapes, so the hot path pays nothing and a
scrape never shows a half-applied change (each cluster is read under its lock).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from wsgiref.simple_server import WSGIServer

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata_policy.model import ClusterInfo, Decision, ReclaimResult, WorkloadResult

log = structlog.get_logger("strata.metrics")

ClusterSource = Callable[[], Iterable[tuple[str, ClusterInfo]]]
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
)  # fmt: skip
SCOPE_LABELS = ("cluster", "scope", "resource")


def split_address(address: str) -> tuple[str, int]:
    """``host:port``, ``:port`` or ``[v6]:port`` → (host, port); an empty host means all."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"metrics address must be host:port, got {address!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class ScopeCollector(Collector):
    """Builds per-scope and per-cluster gauges from the engine at scrape time."""

    def __init__(self) -> None:
        self.source: ClusterSource | None = None

    def describe(self) -> list[Metric]:
        """Nothing up front: the series depend on the clusters present at scrape time."""
        return []

    def collect(self) -> Iterator[Metric]:
        """One family per gauge, filled from every cluster's scope statuses."""
        families = {
            name: GaugeMetricFamily(f"strata_scope_{name}", doc, labels=SCOPE_LABELS)
            for name, doc in (
                ("usage", "Usage of the scope's subtree, in base units."),
                ("guarantee", "The scope's guarantee as set, in base units."),
                (
                    "effective_guarantee",
                    "The guarantee the rules use: as set, else the children's sum, else 0.",
                ),
                ("limit", "The scope's limit, in base units (no series = unlimited)."),
                ("borrowed", "Usage above the scope's effective guarantee."),
                ("at_limit", "1 when the scope's usage has reached its limit, else 0."),
            )
        }
        clusters = {
            name: GaugeMetricFamily(f"strata_cluster_{name}", doc, labels=("cluster",))
            for name, doc in (
                ("generation", "The cluster's generation."),
                ("nodes", "Nodes in the cluster."),
                ("workloads", "Admitted or placed workloads in the cluster."),
            )
        }
        for cluster_id, info in self._pairs():
            clusters["generation"].add_metric([cluster_id], info.generation)
            clusters["nodes"].add_metric([cluster_id], info.node_count)
            clusters["workloads"].add_metric([cluster_id], info.workload_count)
            for s in info.scopes:
                for name in ("usage", "guarantee", "effective_guarantee", "limit", "borrowed"):
                    for resource, amount in getattr(s, name).items():
                        families[name].add_metric([cluster_id, s.id, resource], amount)
                for resource, limit in s.limit.items():
                    full = s.usage.get(resource, 0) >= limit
                    families["at_limit"].add_metric([cluster_id, s.id, resource], int(full))
        yield from families.values()
        yield from clusters.values()

    def _pairs(self) -> list[tuple[str, ClusterInfo]]:
        if self.source is None:
            return []
        try:
            return list(self.source())
        except Exception:  # a scrape must never fail the server; it shows no scope series instead
            log.exception("cluster source failed during a scrape")
            return []


class CountsCollector(Collector):
    """A counter family kept as counts by label values, exposed at scrape time.

    What ``Counter.labels(...).inc()`` exposes (``<name>_total`` and ``<name>_created`` per label
    set), for a counter incremented on every decision: an increment is one locked dict update,
    where a labelled child's ``inc`` takes four Python calls (checks, then its own lock), as
    much as a tenth of a one-workload Admit's engine work.
    """

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...]) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, labelnames
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, ...], int] = {}
        self._created: dict[tuple[str, ...], float] = {}

    def inc(self, labels: tuple[str, ...], amount: int = 1) -> None:
        """Add ``amount`` to the count of ``labels`` (one value per label name, in order)."""
        with self._lock:
            count = self._counts.get(labels)
            if count is None:
                self._created[labels] = time.time()
                count = 0
            self._counts[labels] = count + amount

    def describe(self) -> list[Metric]:
        """The family without samples (registration checks names against this)."""
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> Iterator[Metric]:
        """The counts as one counter family, label sets in sorted order."""
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            rows = sorted((k, v, self._created[k]) for k, v in self._counts.items())
        for labels, count, created in rows:
            family.add_metric(labels, count, created=created)
        yield family


class Metrics:
    """The server's metrics; the servicer and interceptors call the ``observe_*`` methods."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.rpcs = Counter(
            "strata_rpcs", "Finished RPCs by method and gRPC status code.",
            ("method", "code"), registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "strata_rpc_duration_seconds", "RPC latency by method.", ("method",),
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.decisions = CountsCollector(
            "strata_decisions", "Per-workload decisions by method, outcome and first reason code.",
            ("method", "outcome", "reason"),
        )  # fmt: skip
        self.registry.register(self.decisions)
        self.reclaims = Counter(
            "strata_reclaims", "Reclaim answers by whether victims were found.",
            ("satisfiable",), registry=self.registry,
        )  # fmt: skip
        self.victims = Counter(
            "strata_reclaim_victims", "Victims named by Reclaim, by reason.",
            ("reason",), registry=self.registry,
        )  # fmt: skip
        self.scopes = ScopeCollector()
        self.registry.register(self.scopes)
        self._http: tuple[WSGIServer, threading.Thread] | None = None
        # Labelled children by label values: ``labels()`` validates and locks on every call,
        # about as much as the rest of a one-workload Admit's bookkeeping. A child is the same
        # object for the same values for the metric's lifetime (nothing here removes one).
        self._children: dict[tuple[object, ...], Any] = {}

    def _child(self, metric: Counter | Histogram, *values: str) -> Any:
        key = (metric, *values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        """Count one finished RPC (``code`` is the status name, e.g. ``"OK"``)."""
        self._child(self.rpcs, method, code).inc()
        self._child(self.latency, method).observe(seconds)

    def observe_results(
        self, method: str, results: Sequence[WorkloadResult], placed: int = 0
    ) -> None:
        """Count the outcome of every workload of an Admit or Place batch: ``results`` and
        ``placed`` more PLACED ones without reasons (a batch's results held in columns).

        Counted locally first, then one ``inc`` per label set: a 10,000-workload batch has a
        handful of distinct outcomes (a one-workload batch skips the local count).
        """
        if placed:
            self.decisions.inc((method, Decision.PLACED._value_, ""), placed)
        if not results:
            return
        if len(results) == 1:
            r = results[0]
            reason = r.reasons[0].code if r.reasons else ""
            self.decisions.inc((method, r.decision._value_, reason))
            return
        counts = collections.Counter(
            (r.decision._value_, r.reasons[0].code if r.reasons else "") for r in results
        )
        for (decision, reason), n in counts.items():
            self.decisions.inc((method, decision, reason), n)

    def observe_reclaim(self, result: ReclaimResult) -> None:
        """Count a Reclaim answer and the victims it named."""
        self.reclaims.labels("true" if result.satisfiable else "false").inc()
        for v in result.victims:
            self.victims.labels(v.reason.value).inc()

    def set_cluster_source(self, fn: ClusterSource) -> None:
        """Where per-scope gauges come from at scrape time (``Engine.clusters``)."""
        self.scopes.source = fn

    def start_http(self, address: str) -> None:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread."""
        host, port = split_address(address)
        self._http = start_http_server(port, host, registry=self.registry)

    def stop_http(self) -> None:
        """Stop the ``/metrics`` endpoint (tests; the process exit does it otherwise)."""
        if self._http is not None:
            server, thread = self._http
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        self._http = None
