"""Admit a whole run of workloads at once, when no quota rule can bind inside it (DESIGN §2).

``decide_admit`` for one workload costs a path walk, sorted resources and a result built from
reasons; a batch of thousands pays it per workload. ``admit_all`` answers a run of workloads
with one pass that sums the run per scope and checks the sums instead:

- **Headroom.** When the whole run fits in the free capacity at the root, every workload of it
  does, at its turn, whatever part of the run before it has been admitted (amounts are never
  negative, so a prefix never asks for more than the whole run).
- **Limits.** The same for every scope on a path that limits a requested resource: usage plus
  the run's total in that scope's subtree within the limit means no workload of the run hits it.
- **Borrowed.** For a workload in ``s`` and a requested ``r``, DESIGN's borrowed part is ``q[r]``
  minus what the idle effective guarantee ``G`` of every scope on the path covers. Per (scope
  on the path, resource), the answer is the same for the whole run when either the scope's
  ``G`` is already used up (idle ≤ 0: nothing covered, all of ``q[r]`` borrowed, whatever is
  admitted before) or the run's total fits in what is idle (everything covered at every turn).
  When every scope on the path is in the second case, nothing of ``r`` is borrowed; when one is
  in the first, all of it is.

When any sum could bind (a limit, the headroom, a guarantee the run would cross part way), the
answer depends on the order and on which workloads are admitted, so ``admit_all`` returns
``None`` and the caller decides one by one. When it answers, each workload is ADMITTED with the
``borrowed`` that ``decide_admit`` would give it at its turn — whichever subset of the workloads
before it was admitted and charged, since every test above holds for any subset of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strata_policy.model import Workload
from strata_policy.model.resources import Resources
from strata_policy.quota.groups import Groups, group
from strata_policy.quota.tree import QuotaTree


@dataclass(frozen=True, slots=True)
class RunAdmitted:
    """``admit_all``'s answer: every workload of the run is ADMITTED.

    ``borrowed[i]`` is workload ``i``'s borrowed part; ``totals`` maps each scope that holds a
    workload of the run to the sum of their ``request × replicas`` (positive amounts): what
    charging all of them to the tree adds up to.
    """

    borrowed: list[dict[str, int]]
    totals: dict[str, dict[str, int]]


def admit_all(
    tree: QuotaTree,
    workloads: Sequence[Workload],
    capacity: Resources,
    groups: Groups | None = None,
) -> RunAdmitted | None:
    """Each workload's ``borrowed`` when all of them are ADMITTED in any admitted subset and
    order (see the module docstring), else ``None``. Reads the tree only.

    Scopes must be known and amounts non-negative (the request was validated). ``groups`` is
    ``group(workloads)`` when the caller has it. Sums and borrowed parts are worked out per
    group (``quota.groups``), and a group's workloads share its ``borrowed`` dict (values are
    immutable by contract): O(workloads + groups × (resources + depth × resources)).
    """
    if groups is None:
        groups = group(workloads)
    by_scope = _sum_by_scope(groups)
    subtree: dict[str, dict[str, int]] = {}
    whole: dict[str, int] = {}
    for sid, amounts in by_scope.items():
        for ancestor in tree.path(sid):
            _add_into(subtree.setdefault(ancestor, {}), amounts)
        _add_into(whole, amounts)
    root = tree.total_usage()
    for r, amount in whole.items():
        if root.get(r, 0) + amount > capacity.get(r, 0):
            return None
    for sid, amounts in subtree.items():
        limit = tree.scopes[sid].limit
        if limit and not _within(tree.usage(sid), amounts, limit):
            return None
    borrowing: dict[str, frozenset[str]] = {}
    for sid, amounts in by_scope.items():
        full = _borrowed_resources(tree, sid, amounts, subtree)
        if full is None:
            return None
        borrowing[sid] = full
    parts: list[dict[str, int]] = []
    for w in groups.firsts:
        full = borrowing[w.scope_id]
        request, replicas = w.request, w.replicas
        parts.append(
            {r: request[r] * replicas for r in sorted(request) if r in full and request[r] > 0}
        )
    out = [parts[g] for g in groups.group]
    return RunAdmitted(out, by_scope)


def _sum_by_scope(groups: Groups) -> dict[str, dict[str, int]]:
    """``request × replicas`` summed per scope, positive amounts only."""
    by_scope: dict[str, dict[str, int]] = {}
    for w, size in zip(groups.firsts, groups.sizes, strict=True):
        acc = by_scope.get(w.scope_id)
        if acc is None:
            acc = by_scope[w.scope_id] = {}
        times = w.replicas * size
        for r, a in w.request.items():
            if a > 0:
                acc[r] = acc.get(r, 0) + a * times
    return by_scope


def _add_into(target: dict[str, int], amounts: Resources) -> None:
    for r, a in amounts.items():
        target[r] = target.get(r, 0) + a


def _within(usage: Resources, amounts: Resources, limit: Resources) -> bool:
    """Usage plus ``amounts`` stays within ``limit`` on every limited resource asked for."""
    return all(r not in limit or usage.get(r, 0) + a <= limit[r] for r, a in amounts.items())


def _borrowed_resources(
    tree: QuotaTree,
    scope_id: str,
    amounts: Resources,
    subtree: dict[str, dict[str, int]],
) -> frozenset[str] | None:
    """Of the resources ``scope_id``'s workloads ask for, those borrowed in full; ``None``
    when a guarantee on the path could be crossed part way through the run."""
    full: list[str] = []
    path = tree.path(scope_id)
    effective, usages = tree.effective_guarantees, tree.usages
    for r in amounts:
        borrowed = False
        crossed = False
        for sid in path:
            idle = effective[sid].get(r, 0) - usages[sid].get(r, 0)
            if idle <= 0:
                borrowed = True
                break
            if subtree[sid][r] > idle:
                crossed = True
        if borrowed:
            full.append(r)
        elif crossed:
            return None
    return frozenset(full)
