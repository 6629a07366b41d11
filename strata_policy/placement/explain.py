"""Why a workload was not placed: per-node first failing reasons, aggregated Kubernetes style.

Each node counts once, under the first reason it fails in this fixed order: ``unschedulable``,
``node_selector mismatch``, ``gpu_model mismatch``, ``insufficient <resource>`` (the first short
resource in column order; a device-level GPU shortfall is ``insufficient gpu``; a resource no
node has comes after the columns), ``spread conflict``. The message lists the counts descending,
then by text: ``0/1213 nodes fit: 900 insufficient gpu, 300 gpu_model mismatch, 13
unschedulable``. A gang that placed some replicas before failing says so first: ``only 2/3
replicas fit; 0/5 nodes fit: ...``.
"""

from __future__ import annotations

from collections.abc import Mapping

from strata_policy.model.decisions import Reason, ReasonCode

UNSCHEDULABLE = "unschedulable"
SELECTOR_MISMATCH = "node_selector mismatch"
MODEL_MISMATCH = "gpu_model mismatch"
SPREAD_CONFLICT = "spread conflict"


def insufficient(resource: str) -> str:
    """The reason text for a resource short on a node."""
    return f"insufficient {resource}"


def explanation(node_count: int, counts: Mapping[str, int], fit: int, replicas: int) -> str:
    """The aggregated message for an unplaced workload."""
    ranked = sorted(((c, t) for t, c in counts.items() if c), key=lambda ct: (-ct[0], ct[1]))
    head = f"0/{node_count} nodes fit"
    text = head + (": " + ", ".join(f"{c} {t}" for c, t in ranked) if ranked else "")
    if fit:
        return f"only {fit}/{replicas} replicas fit; {text}"
    return text


def unfit_reason(node_count: int, counts: Mapping[str, int], fit: int, replicas: int) -> Reason:
    """The ``NODES_UNFIT`` reason carrying the message and the per-reason node counts."""
    return Reason(
        code=ReasonCode.NODES_UNFIT,
        message=explanation(node_count, counts, fit, replicas),
        node_counts={t: c for t, c in counts.items() if c},
    )
