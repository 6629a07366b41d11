"""The engine layer: the use cases over one cluster's state, and the public in-process API.

``Engine`` (``engine.core``) is assembled from the use cases: each module defines its methods —
``snapshots`` (PushSnapshot, UpdateSnapshot, DeleteCluster, reads, replay), ``admit``,
``place`` (its batch lane; one by one in ``place_one_by_one``), ``release``, ``reclaim``, ``plan``
(PlanCapacity) — and every use case runs under ``commit``'s protocol: the cluster's lock,
idempotent replay of a retried ``request_id``, and journal-first commits. What a request
carries is checked by ``state.request_checks``.
"""

from strata_policy.engine.admit import admit_digest
from strata_policy.engine.core import Engine
from strata_policy.engine.snapshots import NotInPlace

__all__ = ["Engine", "NotInPlace", "admit_digest"]
