"""Batch orders (DESIGN §2 Fair order): FIFO, PRIORITY and hierarchical weighted DRF.

``batch_order`` yields indexes into the batch, each exactly once. The caller decides each
yielded workload and charges the tree when it admits it; FAIR reads usage lazily, when the next
index is asked for, so every pick sees the admissions before it. A workload that is not admitted
is simply not charged: it does not block the ones behind it.

**FAIR** walks the tree from the virtual root down. At each scope it considers the children whose
subtree still holds a pending workload and picks the one with the lowest weighted dominant share
``max_r(usage[r] / capacity[r]) / weight`` (ties: lowest id), then descends into it; at a leaf it
yields that scope's next workload (higher priority first, then ``queued_at_ms``, then request
order). With two tenants and no guarantees this is the DRF paper's progressive filling.

Interpretations written down:

- **A scope's own workloads** (a scope with children that also holds workloads) compete with its
  child subtrees as one more child: its id is the scope's own id, its share is the scope's own
  usage (charged to it, not to a descendant) with weight 1. The scope's weight applies where the
  scope competes with its siblings, not inside it.
- **Dominant share** counts only resources with capacity > 0 (a resource the cluster does not
  have cannot be shared); a weight ≤ 0 makes the share infinite (served last).
- Pending workloads are only those of the batch; usage is whatever the tree holds, so running
  workloads count towards their tenant's share.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence

from strata_policy.errors import InvalidArgument
from strata_policy.model import Order, Workload
from strata_policy.model.resources import Resources
from strata_policy.quota.tree import QuotaTree


def batch_order(
    tree: QuotaTree, workloads: Sequence[Workload], order: Order, capacity: Resources
) -> Iterator[int]:
    """Indexes into ``workloads`` in the order they are to be decided, each exactly once.

    FIFO: request order. PRIORITY: priority descending, ``queued_at_ms`` ascending, request
    order. FAIR: hierarchical weighted dominant share, re-evaluated after every yield. For FAIR
    an unknown scope raises ``InvalidArgument`` (field ``workloads[i].scope_id``) here, before
    anything is yielded.
    """
    if order is Order.FIFO:
        return iter(range(len(workloads)))
    if order is Order.PRIORITY:
        return iter(sorted(range(len(workloads)), key=lambda i: _within_scope(workloads, i)))
    for i, w in enumerate(workloads):
        if w.scope_id not in tree:
            raise InvalidArgument.one(f"workloads[{i}].scope_id", f"unknown scope {w.scope_id!r}")
    return _fair(tree, workloads, capacity)


def _within_scope(workloads: Sequence[Workload], i: int) -> tuple[int, int, int]:
    """Higher priority first, then earlier ``queued_at_ms``, then request order."""
    return (-workloads[i].priority, workloads[i].queued_at_ms, i)


def _fair(tree: QuotaTree, workloads: Sequence[Workload], capacity: Resources) -> Iterator[int]:
    """The FAIR walk: descend by lowest weighted dominant share, yield the leaf's next workload.

    ``active[x]`` holds the children of ``x`` (``None`` = the virtual root) whose subtree still
    has a pending workload, plus ``x`` itself when it has pending workloads of its own; a pick
    costs O(depth × active siblings × resources).
    """
    queues: dict[str, list[tuple[int, int, int]]] = {}
    pending: dict[str, int] = {}
    active: dict[str | None, set[str]] = {}
    for i, w in enumerate(workloads):
        heapq.heappush(queues.setdefault(w.scope_id, []), _within_scope(workloads, i))
        path = tree.path(w.scope_id)
        active.setdefault(w.scope_id, set()).add(w.scope_id)
        for depth, sid in enumerate(path):
            pending[sid] = pending.get(sid, 0) + 1
            parent = path[depth + 1] if depth + 1 < len(path) else None
            active.setdefault(parent, set()).add(sid)
    cap = {r: a for r, a in capacity.items() if a > 0}
    at: str | None = None
    while active.get(None):
        options = active[at]
        pick = min((_share(tree, at, sid, cap), sid) for sid in options)[1]
        if pick != at:
            at = pick
            continue
        _, _, index = heapq.heappop(queues[at])
        if not queues[at]:
            options.discard(at)
        path = tree.path(at)
        for depth, sid in enumerate(path):
            pending[sid] -= 1
            if not pending[sid]:
                active[path[depth + 1] if depth + 1 < len(path) else None].discard(sid)
        at = None
        yield index


def _share(tree: QuotaTree, parent: str | None, sid: str, cap: Mapping[str, int]) -> float:
    """Weighted dominant share of child ``sid`` of ``parent`` (``sid == parent``: own work)."""
    if sid == parent:
        usage, weight = tree.own_usage(sid), 1.0
    else:
        usage, weight = tree.usage(sid), tree.scopes[sid].weight
    if weight <= 0:
        return float("inf")
    dominant = max((a / cap[r] for r, a in usage.items() if r in cap), default=0.0)
    return dominant / weight
