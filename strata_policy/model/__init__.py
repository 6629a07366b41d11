"""Value types: resources, nodes, scopes, workloads, decisions. Pure Python, no I/O."""

from strata_policy.model.decisions import (
    BatchResult,
    ClusterInfo,
    Decision,
    Order,
    Policy,
    Reason,
    ReasonCode,
    ReclaimResult,
    ReleaseResult,
    ScopeStatus,
    Victim,
    VictimReason,
    WorkloadResult,
)
from strata_policy.model.objects import (
    HOSTNAME_KEY,
    Node,
    Placement,
    RunningWorkload,
    Scope,
    Snapshot,
    Workload,
)

__all__ = [
    "HOSTNAME_KEY",
    "BatchResult",
    "ClusterInfo",
    "Decision",
    "Node",
    "Order",
    "Placement",
    "Policy",
    "Reason",
    "ReasonCode",
    "ReclaimResult",
    "ReleaseResult",
    "RunningWorkload",
    "Scope",
    "ScopeStatus",
    "Snapshot",
    "Victim",
    "VictimReason",
    "Workload",
    "WorkloadResult",
]
