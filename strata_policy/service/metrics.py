"""Prometheus metrics: RPCs, latency, decisions, reclaims, and per-scope quota gauges.

Everything lives in the ``Metrics`` object's own ``CollectorRegistry`` (never the process-wide
default), so several servers in one process (tests, embedders) do not collide and a scrape shows
exactly this server. Exported series (``deploy/prometheus/alerts.yaml`` relies on these names;
a test checks that every name a rule uses is exported):

=================================================  ================================================
``strata_rpcs_total{method,code}``                  finished RPCs by gRPC status code
``strata_rpc_duration_seconds{method}``             latency histogram
``strata_decisions_total{method,outcome,reason}``   per-workload outcomes (first reason code)
``strata_reclaims_total{satisfiable}``              Reclaim answers, ``"true"``/``"false"``
``strata_reclaim_victims_total{reason}``            victims named, by ``VictimReason``
``strata_scope_usage_<unit>{cluster,scope,resource}``  usage of the scope's subtree
``strata_scope_guarantee_<unit>{...}``              guarantee as set
``strata_scope_effective_guarantee_<unit>{...}``    ``G``: as set, else the children's sum
``strata_scope_limit_<unit>{...}``                  limit (absent = unlimited: no series)
``strata_scope_borrowed_<unit>{...}``               usage above the effective guarantee
``strata_scope_at_limit{cluster,scope,resource}``   1 when usage ≥ limit, else 0
``strata_cluster_capacity_<unit>{cluster,resource}``  schedulable capacity; also ``_allocated``
``strata_cluster_generation{cluster}``              generation; also ``_nodes``, ``_workloads``
``process_*``                                       the server process (start time, memory, CPU)
=================================================  ================================================

Units are Prometheus base units named by the family's suffix: ``_cores`` (the engine's
millicores ÷ 1000), ``_bytes`` (memory), ``_gpus`` (milli-GPUs ÷ 1000); a resource without a
known unit keeps the bare name (``strata_scope_usage{resource="licenses"}``).

Every labelled counter whose label values are known up front starts at 0 (each PolicyService
method × every status code; Admit/Place outcomes × reason codes; both reclaim answers; every
victim reason): ``increase()`` and the alerts built on it then see the first error too, where a
series born at its first increment would hide it.

Per-scope gauges are not kept up to date on every change: a custom collector asks the engine for
``(cluster_id, ClusterInfo)`` pairs when Prometheus scrapes, so the hot path pays nothing and a
scrape never shows a half-applied change (each cluster is read under its lock).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import grpc
import structlog
from prometheus_client import CollectorRegistry, Counter, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from strata_policy.model import (
    ClusterInfo,
    Decision,
    ReasonCode,
    ReclaimResult,
    VictimReason,
    WorkloadResult,
)
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU
from strata_policy.service.metrics_http import MetricsListener, split_address
from strata_policy.service.metrics_rpc import RpcCollector

if TYPE_CHECKING:
    from strata_policy.service.auth import TokenTable
    from strata_policy.service.config import ServerConfig

__all__ = ["CountsCollector", "Metrics", "ScopeCollector", "base_unit", "split_address"]

log = structlog.get_logger("strata.metrics")

ClusterSource = Callable[[], Iterable[tuple[str, ClusterInfo]]]
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
)  # fmt: skip
SCOPE_LABELS = ("cluster", "scope", "resource")
BASE_UNITS: dict[str, tuple[str, float]] = {
    CPU: ("cores", 1000.0),
    MEMORY: ("bytes", 1.0),
    GPU: ("gpus", float(MILLI_PER_GPU)),
}
SCOPE_GAUGES = (
    ("usage", "Usage of the scope's subtree"),
    ("guarantee", "The scope's guarantee as set"),
    ("effective_guarantee", "The guarantee the rules use: as set, else the children's sum"),
    ("limit", "The scope's limit (no series = unlimited)"),
    ("borrowed", "Usage above the scope's effective guarantee"),
)
CLUSTER_GAUGES = (
    ("capacity", "Schedulable capacity of the cluster's nodes"),
    ("allocated", "Capacity held by the cluster's placed workloads"),
)
# Outcomes that come with a reason code; the others (ADMITTED, PLACED) never carry one.
REFUSALS = (Decision.DENIED, Decision.UNPLACED, Decision.NEEDS_RECLAIM)
DECIDING_METHODS = ("Admit", "Place")


def policy_methods() -> tuple[str, ...]:
    """The PolicyService method names, as the interceptors label them (``"Admit"``)."""
    from strata.policy.v1 import policy_service_pb2 as svc  # noqa: PLC0415  # generated code

    service = svc.DESCRIPTOR.services_by_name["PolicyService"]
    return tuple(m.name for m in service.methods)


def base_unit(resource: str) -> tuple[str, float]:
    """(family suffix, divisor) that turn a resource's engine amount into its Prometheus base unit.

    The engine counts CPU in millicores and GPUs in milli-GPUs (integers, exact); Prometheus
    wants base units named by a suffix: ``_cores``, ``_bytes``, ``_gpus``. Any other resource is
    a plain count with no unit, so its family has no suffix.
    """
    return BASE_UNITS.get(resource, ("", 1.0))


class ScopeCollector(Collector):
    """Builds per-scope and per-cluster gauges from the engine at scrape time."""

    def __init__(self) -> None:
        self.source: ClusterSource | None = None

    def describe(self) -> list[Metric]:
        """Nothing up front: the series depend on the clusters present at scrape time."""
        return []

    def collect(self) -> Iterator[Metric]:
        """One family per gauge and unit, filled from every cluster's scope statuses."""
        families: dict[str, GaugeMetricFamily] = {}

        def add(prefix: str, doc: str, labels: list[str], resource: str, amount: int) -> None:
            suffix, divisor = base_unit(resource)
            name = f"{prefix}_{suffix}" if suffix else prefix
            family = families.get(name)
            if family is None:
                unit = f" ({suffix})" if suffix else ""
                labelnames = SCOPE_LABELS if len(labels) == 3 else ("cluster", "resource")
                family = families[name] = GaugeMetricFamily(name, doc + unit, labels=labelnames)
            family.add_metric(labels, amount / divisor)

        at_limit = GaugeMetricFamily(
            "strata_scope_at_limit", "1 when the scope's usage has reached its limit, else 0.",
            labels=SCOPE_LABELS,
        )  # fmt: skip
        counts = {
            name: GaugeMetricFamily(f"strata_cluster_{name}", doc, labels=("cluster",))
            for name, doc in (
                ("generation", "The cluster's generation."),
                ("nodes", "Nodes in the cluster."),
                ("workloads", "Admitted or placed workloads in the cluster."),
            )
        }
        for cluster_id, info in self._pairs():
            counts["generation"].add_metric([cluster_id], info.generation)
            counts["nodes"].add_metric([cluster_id], info.node_count)
            counts["workloads"].add_metric([cluster_id], info.workload_count)
            for field, doc in CLUSTER_GAUGES:
                for resource, amount in getattr(info, field).items():
                    add(f"strata_cluster_{field}", doc, [cluster_id, resource], resource, amount)
            for s in info.scopes:
                for field, doc in SCOPE_GAUGES:
                    for resource, amount in getattr(s, field).items():
                        labels = [cluster_id, s.id, resource]
                        add(f"strata_scope_{field}", doc, labels, resource, amount)
                for resource, limit in s.limit.items():
                    full = s.usage.get(resource, 0) >= limit
                    at_limit.add_metric([cluster_id, s.id, resource], int(full))
        yield from families.values()
        yield at_limit
        yield from counts.values()

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
    """The server's metrics; the servicer and interceptors call the ``observe_*`` methods.

    ``methods`` are the RPC names whose counters start at 0 (PolicyService's by default);
    ``tokens``, when given, guard ``/metrics`` (see ``metrics_http``).
    """

    def __init__(
        self, methods: Sequence[str] | None = None, tokens: TokenTable | None = None
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.tokens = tokens
        self.rpcs = RpcCollector(LATENCY_BUCKETS)  # strata_rpcs_total, ..._duration_seconds
        self.registry.register(self.rpcs)
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
        # process_start_time_seconds tells restarts apart (alerts.yaml: StrataRestarting).
        ProcessCollector(registry=self.registry)
        self._http: MetricsListener | None = None
        self._start_at_zero(policy_methods() if methods is None else methods)

    @classmethod
    def from_config(cls, config: ServerConfig) -> Metrics:
        """The server's metrics; ``/metrics`` takes the token file's bearer tokens when
        ``config.metrics_auth`` is ``token``, or ``auto`` with a token file."""
        from strata_policy.service.metrics_http import metrics_tokens  # noqa: PLC0415

        return cls(tokens=metrics_tokens(config.metrics_auth, config.token_file))

    def _start_at_zero(self, methods: Sequence[str]) -> None:
        """Create every labelled series whose label values are known, at 0."""
        self.rpcs.start_at_zero(methods, (code.name for code in grpc.StatusCode))
        for method in DECIDING_METHODS:
            for decision in Decision:
                self.decisions.inc((method, decision._value_, ""), 0)
            for decision in REFUSALS:
                for reason in ReasonCode:
                    self.decisions.inc((method, decision._value_, reason.value), 0)
        for satisfiable in ("true", "false"):
            self.reclaims.labels(satisfiable)
        for victim in VictimReason:
            self.victims.labels(victim.value)

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        """Count one finished RPC (``code`` is the status name, e.g. ``"OK"``)."""
        self.rpcs.observe(method, code, seconds)

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

    @property
    def port(self) -> int:
        """The port ``/metrics`` listens on (0 when not started)."""
        return self._http.port if self._http is not None else 0

    def start_http(self, address: str) -> None:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread (bearer tokens if set)."""
        self._http = MetricsListener(address, self.registry, self.tokens)

    def stop_http(self) -> None:
        """Stop the ``/metrics`` endpoint (tests; the process exit does it otherwise)."""
        if self._http is not None:
            self._http.close()
        self._http = None
