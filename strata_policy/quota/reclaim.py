"""Reclaim (DESIGN §2): which running workloads to evict so that a pending workload fits.

Computes targets only; the engine evicts them. ``find_victims`` simulates the evictions on the
tree it is given (refund, re-check) and always restores it before returning, so it is pure.

For a running ``v`` in scope ``t`` and the pending ``w`` in scope ``s``: ``c`` is their lowest
common ancestor (a virtual root above the top level), ``s'``/``t'`` the children of ``c``
towards ``s``/``t``. The walk:

1. **Candidates.** *Reclaim* candidates: ``v`` preemptible, ``s`` and ``t`` in different
   branches below ``c``, and for some resource ``r`` that ``w`` is short of and ``v`` uses
   (``v.total[r] > 0``): ``t'`` is over its guarantee on ``r`` and ``s'`` would stay within its
   own guarantee on ``r`` with ``w`` admitted (``usage(s')[r] + q[r] ≤ guarantee(s')[r]``).
   *Priority* candidates: ``v`` preemptible, in the subtree of the blocking scope (the deepest
   failing limit, or ``s``), priority strictly below ``w``'s.
2. **Order.** Reclaim before priority; then lower priority first; then most recently admitted
   first (``admitted_at_ms`` descending); then id.
3. **Greedy walk.** Take candidates in order until ``w`` would be admitted (and placed, when
   ``fits_after`` is given), re-checking each reclaim candidate at the moment it is reached.
4. **Reverse fill-back.** Walk the chosen victims from last to first and put back each one
   without which ``w`` still fits, leaving a set where every victim is needed.
5. **All or nothing.** If even every candidate does not make room, no victim is returned and
   the reasons say what stays short.

Interpretations written down:

- **"Short"** means: a resource ``q`` asks for whose headroom is missing or whose limit fails
  somewhere on ``s``'s path. When quota is satisfied but ``fits_after`` says ``w`` would not be
  placed, every resource ``w`` requests counts as short (placement needs room on nodes, and
  freeing any requested resource may provide it).
- **The claimant's guarantee** is checked per resource at the level where the branches meet: a
  claimant that would itself be borrowing ``r`` there takes nothing from that branch for ``r``
  (it may still reclaim another resource on which it stays within its guarantee).
- **A workload eligible both ways** is listed in both places of the order; it is taken at most
  once, as a reclaim victim if it is still valid when reached first, otherwise later as a
  priority victim. Its ``Victim.reason`` says which.
- **Candidates that use none of the still-short resources are passed over**: taking one cannot
  change whether ``w`` fits (quota or placement), and fill-back would return it anyway.
- ``running`` may include ``w`` itself (re-deciding an admitted workload); it is never a victim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from strata_policy.model import (
    Reason,
    ReasonCode,
    RunningWorkload,
    Victim,
    VictimReason,
    Workload,
)
from strata_policy.model.resources import Resources
from strata_policy.quota.check import (
    borrowed_part,
    check_admit,
    requested,
    shortfall,
    workload_path,
)
from strata_policy.quota.tree import QuotaTree

FitsAfter = Callable[[Sequence[str]], bool]
"""Would the workload also be placed if these running workload ids were released?"""


@dataclass(frozen=True, slots=True)
class ReclaimPlan:
    """Victims that make room for a workload (all of them needed), or none and why.

    ``borrowed`` is what the workload would borrow once the victims are gone (empty when not
    satisfiable).
    """

    satisfiable: bool
    victims: tuple[Victim, ...] = ()
    reasons: tuple[Reason, ...] = ()
    borrowed: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A running workload in the order, with the branches it was judged on."""

    running: RunningWorkload
    reason: VictimReason
    total: Mapping[str, int]
    claimant: str = ""  # s' (reclaim candidates only)
    lender: str = ""  # t' (reclaim candidates only)


@dataclass(frozen=True, slots=True)
class _Branches:
    """How a running workload's scope relates to the claimant's scope (cached per scope)."""

    claimant: str  # s', "" when t is in s's own branch (no reclaim across branches)
    lender: str  # t'
    in_blocking: bool  # t is in the subtree of the blocking scope
    lendable: frozenset[str] = frozenset()  # short resources s' may reclaim from t' right now


def find_victims(
    tree: QuotaTree,
    running: Mapping[str, RunningWorkload],
    workload: Workload,
    capacity: Resources,
    *,
    fits_after: FitsAfter | None = None,
) -> ReclaimPlan:
    """The minimal victim set of DESIGN §2 Reclaim for ``workload``; the tree is unchanged.

    ``running`` maps workload id to every workload holding quota; ``capacity`` is the sum of
    schedulable capacity. When ``workload`` already fits, the plan is satisfiable with no
    victims. Raises ``InvalidArgument`` for an unknown scope.
    """
    path = workload_path(tree, workload)
    q = requested(workload)
    check = check_admit(tree, workload, capacity)
    walk = _Walk(tree, path, q, capacity, fits_after)
    short = walk.short(())
    if not short:
        return ReclaimPlan(satisfiable=True, borrowed=check.borrowed)
    order = _ordered_candidates(tree, running, workload, check.blocking_scope, short)
    try:
        if walk.greedy(order):
            walk.fill_back()
            victims = tuple(_victim(c) for c in walk.taken)
            return ReclaimPlan(True, victims, (), borrowed_part(tree, path, q))
        left = sorted(walk.short(walk.ids()))
    finally:
        walk.restore()
    reasons = (_no_victims(workload, order, left), *check.limit_reasons, *check.headroom_reasons)
    return ReclaimPlan(satisfiable=False, reasons=reasons)


class _Walk:
    """The greedy walk and fill-back, simulated on the tree; ``restore`` undoes it."""

    def __init__(
        self,
        tree: QuotaTree,
        path: tuple[str, ...],
        q: Mapping[str, int],
        capacity: Resources,
        fits_after: FitsAfter | None,
    ) -> None:
        self.tree, self.path, self.q = tree, path, q
        self.capacity, self.fits_after = capacity, fits_after
        self.taken: list[_Candidate] = []

    def short(self, victim_ids: Sequence[str]) -> frozenset[str]:
        """Resources still stopping ``w`` (empty = it would be admitted and, if asked, placed)."""
        quota = shortfall(self.tree, self.path, self.q, self.capacity)
        if quota or self.fits_after is None or self.fits_after(victim_ids):
            return quota
        # Placement-short: every requested resource counts; a workload requesting nothing that
        # still cannot be placed gets a non-resource marker, so no candidate can help it.
        return frozenset(self.q) or frozenset({""})

    def ids(self) -> tuple[str, ...]:
        """The ids of the victims taken so far, in order."""
        return tuple(c.running.workload.id for c in self.taken)

    def greedy(self, order: Sequence[_Candidate]) -> bool:
        """Take candidates in order until ``w`` fits; True when it does."""
        done: set[str] = set()
        short = self.short(())
        for cand in order:
            wid = cand.running.workload.id
            if wid in done or not any(r in short for r in cand.total):
                continue
            if cand.reason is VictimReason.RECLAIM_BORROWED and not self._still_valid(cand, short):
                continue
            self.tree.refund(cand.running.workload.scope_id, cand.total)
            self.taken.append(cand)
            done.add(wid)
            short = self.short(self.ids())
            if not short:
                return True
        return False

    def fill_back(self) -> None:
        """Walk the victims in reverse; put back every one without which ``w`` still fits."""
        for i in range(len(self.taken) - 1, -1, -1):
            cand = self.taken[i]
            self.tree.charge(cand.running.workload.scope_id, cand.total)
            rest = [c.running.workload.id for j, c in enumerate(self.taken) if j != i]
            if self.short(rest):
                self.tree.refund(cand.running.workload.scope_id, cand.total)  # needed
            else:
                del self.taken[i]

    def restore(self) -> None:
        """Charge every simulated victim back: the tree is as it was."""
        for cand in self.taken:
            self.tree.charge(cand.running.workload.scope_id, cand.total)

    def _still_valid(self, cand: _Candidate, short: frozenset[str]) -> bool:
        """The reclaim test again, at the moment the candidate is reached."""
        lendable = _lendable(self.tree, cand.claimant, cand.lender, q=self.q, short=short)
        return any(r in lendable for r in cand.total)


def _ordered_candidates(
    tree: QuotaTree,
    running: Mapping[str, RunningWorkload],
    workload: Workload,
    blocking: str,
    short: frozenset[str],
) -> list[_Candidate]:
    """Reclaim candidates then priority candidates, each in DESIGN §2 order."""
    s_path = tree.path(workload.scope_id)
    q = requested(workload)
    s_index = {sid: i for i, sid in enumerate(s_path)}
    branches: dict[str, _Branches] = {}
    reclaim: list[_Candidate] = []
    priority: list[_Candidate] = []
    for rw in running.values():  # O(running): per workload only cached per-scope facts
        v = rw.workload
        if not v.preemptible or v.id == workload.id:
            continue
        b = branches.get(v.scope_id)
        if b is None:
            b = _branches(tree, s_path, s_index, v.scope_id, blocking)
            if b.claimant:
                lendable = _lendable(tree, b.claimant, b.lender, q=q, short=short)
                b = _Branches(b.claimant, b.lender, b.in_blocking, lendable)
            branches[v.scope_id] = b
        lower = b.in_blocking and v.priority < workload.priority
        if not lower and not b.lendable:
            continue
        total = {r: a * v.replicas for r, a in v.request.items() if a > 0}
        if any(r in b.lendable for r in total):
            reclaim.append(
                _Candidate(rw, VictimReason.RECLAIM_BORROWED, total, b.claimant, b.lender)
            )
        if lower:
            priority.append(_Candidate(rw, VictimReason.LOWER_PRIORITY, total))
    reclaim.sort(key=_order_key)
    priority.sort(key=_order_key)
    return reclaim + priority


def _branches(
    tree: QuotaTree,
    s_path: tuple[str, ...],
    s_index: Mapping[str, int],
    t: str,
    blocking: str,
) -> _Branches:
    """``s'`` and ``t'`` below the lowest common ancestor of ``s`` and ``t``."""
    t_path = tree.path(t)
    in_blocking = blocking in t_path
    for j, sid in enumerate(t_path):
        i = s_index.get(sid)
        if i is not None:  # sid is the lowest common ancestor c
            if i == 0 or j == 0:  # t below s, or s below t: the same branch
                return _Branches("", "", in_blocking)
            return _Branches(s_path[i - 1], t_path[j - 1], in_blocking)
    return _Branches(s_path[-1], t_path[-1], in_blocking)  # they meet at the virtual root


def _lendable(
    tree: QuotaTree,
    claimant: str,
    lender: str,
    *,
    q: Mapping[str, int],
    short: frozenset[str],
) -> frozenset[str]:
    """The reclaim-candidate test of DESIGN §2 on the current usage, per resource.

    The still-short resources ``r`` on which the lender branch ``t'`` holds more than its
    guarantee while the claimant branch ``s'`` stays within its own guarantee with ``w``
    admitted (absent guarantees count as 0). A running workload in ``t'`` is a reclaim
    candidate when it uses one of them.
    """
    lent, own = tree.usage(lender), tree.usage(claimant)
    lender_g, claimant_g = tree.scopes[lender].guarantee, tree.scopes[claimant].guarantee
    return frozenset(
        r
        for r in short
        if lent.get(r, 0) > lender_g.get(r, 0)
        and own.get(r, 0) + q.get(r, 0) <= claimant_g.get(r, 0)
    )


def _order_key(c: _Candidate) -> tuple[int, int, str]:
    """Lower priority first, then most recently admitted first, then id."""
    return (c.running.workload.priority, -c.running.admitted_at_ms, c.running.workload.id)


def _victim(c: _Candidate) -> Victim:
    v = c.running.workload
    return Victim(
        workload_id=v.id,
        scope_id=v.scope_id,
        reason=c.reason,
        freed=dict(c.total),
        priority=v.priority,
    )


def _no_victims(workload: Workload, order: Sequence[_Candidate], left: Sequence[str]) -> Reason:
    reclaim = sum(c.reason is VictimReason.RECLAIM_BORROWED for c in order)
    lower = len(order) - reclaim
    what = ", ".join(r for r in left if r) or "placement"
    return Reason(
        code=ReasonCode.NO_VICTIMS,
        message=(
            f"no set of victims makes room for {workload.id!r}: evicting all {reclaim} "
            f"reclaim and {lower} lower-priority candidates still leaves {what} short"
        ),
        scope_id=workload.scope_id,
        resource=next((r for r in left if r), ""),
    )
