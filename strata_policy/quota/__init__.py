"""Quota math as pure functions over a ``QuotaTree`` (DESIGN §2).

``tree`` holds scopes and rolled-up usage; ``check`` and ``admission`` check and decide an
Admit; ``batch`` holds a batch's steps: its groups, its order (FIFO, PRIORITY, FAIR) and a run
admitted at once when no rule can bind inside it; ``victims`` and ``candidates`` find victims.
Imports only ``strata_policy.model`` and ``strata_policy.errors``: quota sits below state in
the import order.
"""

from strata_policy.quota.admission import decide_admit
from strata_policy.quota.batch import RunAdmitted, admit_all, batch_order
from strata_policy.quota.check import AdmitCheck, check_admit
from strata_policy.quota.tree import QuotaTree
from strata_policy.quota.victims import FitsAfter, ReclaimPlan, find_victims

__all__ = [
    "AdmitCheck",
    "FitsAfter",
    "QuotaTree",
    "ReclaimPlan",
    "RunAdmitted",
    "admit_all",
    "batch_order",
    "check_admit",
    "decide_admit",
    "find_victims",
]
