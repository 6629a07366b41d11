"""Quota math as pure functions over a ``QuotaTree`` (DESIGN §2).

``tree`` holds scopes and rolled-up usage; ``admission`` checks and decides an Admit;
``reclaim`` finds victims; ``fair`` orders a batch. Imports only ``strata_policy.model`` and
``strata_policy.errors``: quota sits below state in the import order.
"""

from strata_policy.quota.tree import QuotaTree

__all__ = ["QuotaTree"]
