"""The per-RPC metrics, ``strata_rpcs_total{method,code}`` and ``strata_rpc_duration_seconds``,
kept as plain counts and exposed at scrape time.

They are what ``Counter.labels(method, code).inc()`` and ``Histogram.labels(method).observe(s)``
export (``_total``/``_created``; ``_bucket``/``_count``/``_sum``/``_created``), but updated by
one call under one lock: the prometheus children take eight Python calls, three locks and a
Python loop over the buckets per RPC, all on the event loop, on every call the server answers.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

RPCS = ("strata_rpcs", "Finished RPCs by method and gRPC status code.")
LATENCY = ("strata_rpc_duration_seconds", "RPC latency by method.")


class RpcCollector(Collector):
    """Counts finished RPCs by (method, code) and their latencies by method, in ``bounds``
    (seconds, ascending; a call of exactly a bound's duration counts in that bound's bucket)."""

    def __init__(self, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(set(bounds)) or not bounds:
            raise ValueError(f"bucket bounds must be distinct and ascending, got {bounds}")
        self._bounds = tuple(float(b) for b in bounds)
        go: Callable[[float], str] = floatToGoString  # untyped; Histogram's "le" text
        self._les = (*(go(b) for b in self._bounds), "+Inf")
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str], int] = {}
        self._calls_created: dict[tuple[str, str], float] = {}
        # Per method: a count per bucket (not cumulative; the last is +Inf), then the sum.
        self._latency: dict[str, list[float]] = {}
        self._latency_created: dict[str, float] = {}

    def start_at_zero(self, methods: Iterable[str], codes: Iterable[str]) -> None:
        """Export every (method, code) count and every method's histogram at 0 already."""
        codes = tuple(codes)
        with self._lock:
            for method in methods:
                for code in codes:
                    self._count(method, code, 0)
                self._row(method)

    def observe(self, method: str, code: str, seconds: float) -> None:
        """Count one finished RPC and its latency."""
        bucket = bisect.bisect_left(self._bounds, seconds)
        with self._lock:
            self._count(method, code, 1)
            row = self._latency.get(method) or self._row(method)
            row[bucket] += 1
            row[-1] += seconds

    def _count(self, method: str, code: str, amount: int) -> None:
        key = (method, code)
        count = self._calls.get(key)
        if count is None:
            self._calls_created[key] = time.time()
            count = 0
        self._calls[key] = count + amount

    def _row(self, method: str) -> list[float]:
        row = self._latency.get(method)
        if row is None:
            self._latency_created[method] = time.time()
            row = self._latency[method] = [0.0] * (len(self._bounds) + 2)
        return row

    def describe(self) -> list[Metric]:
        """Both families without samples (registration checks names against these)."""
        return [
            CounterMetricFamily(*RPCS, labels=("method", "code")),
            HistogramMetricFamily(*LATENCY, labels=("method",)),
        ]

    def collect(self) -> Iterator[Metric]:
        """The counts as a counter family and the latencies as a histogram family."""
        with self._lock:
            # In the order the series were born, as prometheus_client's children are.
            calls = [(k, v, self._calls_created[k]) for k, v in self._calls.items()]
            rows = [(m, list(r), self._latency_created[m]) for m, r in self._latency.items()]
        rpcs = CounterMetricFamily(*RPCS, labels=("method", "code"))
        for labels, count, created in calls:
            rpcs.add_metric(labels, count, created=created)
        yield rpcs
        latency = HistogramMetricFamily(*LATENCY, labels=("method",))
        for method, row, created in rows:
            cumulative, buckets = 0.0, []
            for le, n in zip(self._les, row[:-1], strict=True):
                cumulative += n
                buckets.append((le, cumulative))
            latency.add_metric([method], buckets, row[-1])
            latency.samples.append(Sample(f"{LATENCY[0]}_created", {"method": method}, created))
        yield latency
