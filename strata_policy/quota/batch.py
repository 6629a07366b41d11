"""A batch's quota steps (DESIGN §2), in the order the Place use case takes them: group the
batch by what the steps read (``group``, ``group_tagged``), order it (``batch_order``: FIFO,
PRIORITY, FAIR) and admit a run of it whole when no rule can bind inside it (``admit_all``).
Pure functions of the tree and the batch; the caller decides and charges. Admit and the
one-by-one Place take only the order; the batch lane takes all three.

**Groups.** A batch's workloads grouped by what the batch lane reads of them, so that each
piece of work that depends only on that is done once per group instead of once per workload.
The lane admits a run by summing it per scope and works out each workload's ``borrowed``
(``admit_all``), and turns each workload into the kernel's rows (``placement.inputs``). Both
read only the scope, the request, the replicas, the selector, the GPU model and the spread key;
a big batch has a handful of distinct combinations. Grouping costs one tuple key and one dict
read per workload; everything after it is per group.

A batch decoded from a request's bytes knows more for free: workloads read from one cached
encoding share one fields tuple (``service.place_request_decoder``), which the decoder hands
on as each workload's *tag*: workloads whose tags are the same object are equal in every field
but ``id`` and ``queued_at_ms``. The tags travel beside the workloads, as an explicit argument
(``Engine.place(..., tags=...)``), and ``group_tagged`` keys only one workload per distinct
tag, merging tags whose keys are equal, so the per-workload work is a few C-level passes
(``id``, a dict, ``Counter``).

**Order** (DESIGN §2 Fair order): FIFO, PRIORITY and hierarchical weighted DRF.
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

**A run admitted whole**, when no quota rule can bind inside it. ``decide_admit`` for one
workload costs a path walk, sorted resources and a result built from reasons; a batch of
thousands pays it per workload. ``admit_all`` answers a run of workloads with one pass that
sums the run per scope and checks the sums instead:

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

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from strata_policy.errors import InvalidArgument
from strata_policy.model import Order, Workload
from strata_policy.model.resources import Resources
from strata_policy.quota.tree import QuotaTree

# -- groups ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Groups:
    """``group[i]`` is workload ``i``'s group; ``firsts[g]`` the first workload of group ``g``
    (groups numbered in order of first appearance), ``sizes[g]`` how many workloads it holds.
    Workloads of one group differ at most in id, priority, preemptible and queued_at_ms."""

    group: list[int]
    firsts: list[Workload]
    sizes: list[int]


def group(workloads: Sequence[Workload]) -> Groups:
    """Group ``workloads`` (see the module docstring)."""
    index: dict[tuple[object, ...], int] = {}
    ids: list[int] = []
    firsts: list[Workload] = []
    add = ids.append
    get = index.get
    for w in workloads:
        request = w.request
        selector = w.node_selector
        key = (  # flat: a tuple of tuples would cost a tuple per pair and hash them all
            w.scope_id,
            w.replicas,
            w.gpu_model,
            w.spread_key,
            len(request),
            *request,
            *request.values(),
            *(selector.items() if selector else ()),
        )
        g = get(key)
        if g is None:
            g = index[key] = len(firsts)
            firsts.append(w)
        add(g)
    counts = Counter(ids)
    return Groups(ids, firsts, [counts[g] for g in range(len(firsts))])


def representatives(tags: Sequence[object]) -> list[int]:
    """The index of each distinct tag's (by identity) first workload, ascending."""
    ids = list(map(id, tags))
    return _firsts(ids, dict.fromkeys(ids))


def _firsts(ids: list[int], distinct: Iterable[int]) -> list[int]:
    """Where each of ``distinct`` (``ids``' distinct values in order of first appearance) first
    appears: each is found by a C-level ``index`` from where the one before it first appears,
    so the scans cover ``ids`` once in all."""
    out: list[int] = []
    start = 0
    for tag in distinct:
        start = ids.index(tag, start)
        out.append(start)
    return out


def group_tagged(workloads: Sequence[Workload], tags: Sequence[object]) -> Groups:
    """``group(workloads)`` where ``tags[i]`` is workload ``i``'s tag (the module docstring).

    The tags are counted (a ``Counter`` keeps them in order of first appearance) and only the
    first workload of each distinct tag is keyed, by ``group`` of those in that order, so that
    groups are numbered as ``group`` numbers them and a group's first workload is its first
    tag's; every workload then takes its tag's group, and a group's size is its tags' counts.
    Per workload this is a few C-level passes (``id``, ``Counter``, a dict lookup), no Python
    step; a batch of one tag (the common one) is told by one ``count``."""
    ids = list(map(id, tags))
    if ids and ids.count(ids[0]) == len(ids):
        return Groups([0] * len(ids), [workloads[0]], [len(ids)])
    counts = Counter(ids)
    keyed = group([workloads[i] for i in _firsts(ids, counts)])
    sizes = [0] * len(keyed.firsts)
    for g, n in zip(keyed.group, counts.values(), strict=True):
        sizes[g] += n
    if len(counts) == 1:
        return Groups([0] * len(ids), keyed.firsts, sizes)
    of_tag = dict(zip(counts, keyed.group, strict=True))
    return Groups(list(map(of_tag.__getitem__, ids)), keyed.firsts, sizes)


# -- order ----------------------------------------------------------------------------------------


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


# -- a run admitted whole -------------------------------------------------------------------------


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
    group (``group``), and a group's workloads share its ``borrowed`` dict (values are
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
