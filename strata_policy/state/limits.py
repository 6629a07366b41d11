"""Size limits of one server; light to import (the CLI reads the defaults for its flags)."""

from __future__ import annotations

from dataclasses import dataclass

from strata_policy.errors import SizeLimitExceeded


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits; exceeding one is RESOURCE_EXHAUSTED naming the limit."""

    max_clusters: int = 1_000
    max_nodes: int = 200_000
    max_scopes: int = 100_000
    max_workloads: int = 2_000_000
    max_batch: int = 10_000
    max_batch_replicas: int = 100_000
    idempotency_entries: int = 10_000
    idempotency_results: int = 1_000_000  # results held by remembered answers, all clusters

    def check_sizes(self, nodes: int, scopes: int, workloads: int) -> None:
        """Raise ``SizeLimitExceeded`` for the first size above its limit."""
        for name, value, maximum in (
            ("max_nodes", nodes, self.max_nodes),
            ("max_scopes", scopes, self.max_scopes),
            ("max_workloads", workloads, self.max_workloads),
        ):
            if value > maximum:
                raise SizeLimitExceeded(name, value, maximum)

    def check_batch(self, size: int, replicas: int = 0) -> None:
        """Raise ``SizeLimitExceeded`` when a batch has too many workloads or replicas."""
        if size > self.max_batch:
            raise SizeLimitExceeded("max_batch", size, self.max_batch)
        if replicas > self.max_batch_replicas:
            raise SizeLimitExceeded("max_batch_replicas", replicas, self.max_batch_replicas)
