"""Prometheus metrics of the kube controllers, read from their stats at scrape time.

``strata_kube_sync_lag_seconds`` is the headline: how old the oldest Kubernetes change in the last
UpdateSnapshot was when it was sent (how far Strata trails the API server). Counters per kind
(lists, events, bookmarks, 410s, dropped streams) say how healthy the watches are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from strata_policy.kube.reflector import Cache
from strata_policy.kube.sync import Syncer


class KubeCollector(Collector):
    """Reads ``Cache.stats`` and ``Syncer.stats``; owns no state of its own."""

    def __init__(self, cache: Cache, syncer: Syncer) -> None:
        self.cache = cache
        self.syncer = syncer

    def collect(self) -> Iterator[Any]:
        """One family per figure."""
        stats = self.syncer.stats
        lag = GaugeMetricFamily(
            "strata_kube_sync_lag_seconds", "Age of the oldest change in the last delta sent"
        )
        lag.add_metric([], stats.lag_s)
        yield lag
        for name, value, doc in (
            ("calls", stats.calls, "UpdateSnapshot calls that committed"),
            ("pushes", stats.pushes, "PushSnapshot calls (cluster created)"),
            ("conflicts", stats.conflicts, "Generation conflicts, each followed by a re-read"),
            ("failures", stats.failures, "Batches that failed and will be retried"),
        ):
            counter = CounterMetricFamily(f"strata_kube_sync_{name}", doc)
            counter.add_metric([], value)
            yield counter
        problems = GaugeMetricFamily(
            "strata_kube_sync_problems", "Objects the last mirror could not represent"
        )
        problems.add_metric([], len(stats.problems))
        yield problems
        watch = CounterMetricFamily(
            "strata_kube_watch", "List/watch activity per kind", labels=["kind", "what"]
        )
        for kind, kind_stats in sorted(self.cache.stats.items()):
            for what in ("lists", "events", "bookmarks", "expired", "broken", "errors"):
                watch.add_metric([kind, what], getattr(kind_stats, what))
        yield watch
