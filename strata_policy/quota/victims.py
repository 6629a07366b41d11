"""Reclaim (DESIGN §2): which running workloads to evict so that a pending workload fits.

Computes targets only; the engine evicts them. ``find_victims`` simulates the evictions on the
tree it is given (refund, re-check) and always restores it before returning, so it is pure.

The walk (candidates and their order: ``quota.candidates``):

1. **Short.** ``S`` is what ``w`` is short of before any victim is chosen: the resources whose
   headroom is missing or whose limit fails somewhere on ``s``'s path (or, when quota is
   satisfied but ``fits_after`` says ``w`` would not be placed, every resource it requests).
2. **Makes room.** A victim set makes room when, with it gone and ``w`` admitted, every limit on
   the path holds, ``w`` fits the headroom, the **claimant rule** holds — for each reclaim
   victim, its ``s'`` is within ``G(s')`` on every resource of ``S``, judged on that final
   state, so the claimant's own lower-priority victims count — and (when asked) ``w`` is placed.
3. **Greedy walk.** Take candidates in order until the set makes room. A candidate is passed
   over when it uses none of the *still-short* resources (taking it cannot help), and a reclaim
   candidate also when it is, at that moment, no longer exposed on a still-short resource it
   uses (its ``t'`` above ``G(t')``, ``quota.candidates``): a lender is never taken below what
   it is guaranteed.
4. **Put back.** Walk the chosen victims from last to first and put back every one without which
   the rest still make room; repeat the walk until it puts none back. So every returned victim
   is needed (**minimal**: putting back any one leaves a set that does not make room).
5. **Complete.** The walk stops as soon as the set makes room and passes over every candidate
   once nothing is short, so whenever the walk over every candidate makes room, Reclaim is
   satisfiable.
6. **Priority candidates alone.** A walk that took reclaim victims can end short because their
   claimant rule cannot be met (a lender inside ``s'`` that the pre-test counted stopped being
   exposed part way), while ``w``'s own lower-priority work alone would make room: no reclaim
   victim, no claimant rule. So when the walk fails, it is run again over the priority
   candidates only (then put back as in 4).
7. **All or nothing.** If neither walk makes room, no victim is returned and the reasons say
   what stays short.

Interpretations written down:

- **Still short** after some victims are taken: the resources on which the set does not yet
  make room — a limit or the headroom still short on ``r``, or the claimant rule failing on
  ``r`` at the level of a reclaim victim taken so far; when none is, and placement is asked for
  and fails, every requested resource. Taking a victim that frees none of them cannot help.
- ``running`` may include ``w`` itself (re-deciding an admitted workload); it is never a victim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from strata_policy.model import Reason, ReasonCode, RunningWorkload, Victim, Workload
from strata_policy.model.resources import Resources
from strata_policy.quota.candidates import (
    Candidate,
    claimant_over,
    exposed,
    ordered_candidates,
)
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
    satisfiable). ``limited`` says a limit on the path failed before any victim was chosen
    (the victims are then priority candidates inside the limiting scope).
    """

    satisfiable: bool
    victims: tuple[Victim, ...] = ()
    reasons: tuple[Reason, ...] = ()
    borrowed: Mapping[str, int] = field(default_factory=dict)
    limited: bool = False


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
    short = walk.still_short()
    if not short:
        return ReclaimPlan(satisfiable=True, borrowed=check.borrowed)
    limited = not check.within_limits
    order = ordered_candidates(
        tree, running, workload, blocking=check.blocking_scope, limited=limited, short=short
    )
    walk.claimed = short
    try:
        found = walk.greedy(order)
        if not found and any(c.reclaim for c in order):
            walk.restore()  # step 6: priority candidates alone
            found = walk.greedy([c for c in order if not c.reclaim])
        if found:
            walk.put_back()
            victims = tuple(_victim(c) for c in walk.taken)
            return ReclaimPlan(True, victims, (), borrowed_part(tree, path, q), limited)
        left = sorted(walk.still_short())
    finally:
        walk.restore()
    reasons = (_no_victims(workload, order, left), *check.limit_reasons, *check.headroom_reasons)
    return ReclaimPlan(satisfiable=False, reasons=reasons, limited=limited)


class _Walk:
    """The greedy walk and the put-back walks, simulated on the tree; ``restore`` undoes them.

    ``taken`` holds the victims chosen so far (refunded from the tree); ``claimed`` is ``S``,
    the resources the claimant rule is judged on; ``levels`` counts the reclaim victims taken
    per level (index of ``s'`` on the path), so the claimant rule costs O(levels), not
    O(victims), per check.
    """

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
        self.taken: list[Candidate] = []
        self.claimed: frozenset[str] = frozenset()
        self.levels: dict[int, int] = {}

    def still_short(self) -> frozenset[str]:
        """Resources on which the taken set does not yet make room (empty: it makes room)."""
        quota = shortfall(self.tree, self.path, self.q, self.capacity)
        claim = self._claimant_short()
        if quota or claim:
            return quota | claim
        if self.fits_after is None or self.fits_after(self.ids()):
            return frozenset()
        # Placement-short: every requested resource counts; a workload requesting nothing that
        # still cannot be placed gets a non-resource marker, so no candidate can help it.
        return frozenset(self.q) or frozenset({""})

    def ids(self) -> tuple[str, ...]:
        """The ids of the victims taken so far, in order."""
        return tuple(c.id for c in self.taken)

    def greedy(self, order: Sequence[Candidate]) -> bool:
        """Take candidates in order until the set makes room; True when it does."""
        short = self.still_short()
        for cand in order:
            if not any(r in short for r in cand.total):
                continue
            if cand.reclaim and not any(
                r in cand.total for r in exposed(self.tree, cand.chain, short)
            ):
                continue
            self._take(cand)
            self.taken.append(cand)
            short = self.still_short()
            if not short:
                return True
        return False

    def put_back(self) -> None:
        """Walk the victims in reverse, putting back every one without which the rest still
        make room; repeat until a walk puts none back.

        Putting a victim back only adds usage, which can make no other victim unneeded, unless
        it was the last reclaim victim of its level (that level's claimant rule goes) or
        placement decides (not monotone); only then is the walk repeated: a walk that would
        put none back is not run."""
        again = True
        while again:
            again = False
            for i in range(len(self.taken) - 1, -1, -1):
                cand = self.taken.pop(i)
                self._give_back(cand)
                if self.still_short():
                    self._take(cand)  # needed
                    self.taken.insert(i, cand)
                elif self.fits_after is not None or (
                    cand.reclaim and cand.level not in self.levels
                ):
                    again = True

    def restore(self) -> None:
        """Charge every simulated victim back and forget them: the tree is as it was."""
        for cand in self.taken:
            self._give_back(cand)
        self.taken.clear()

    def _take(self, cand: Candidate) -> None:
        self.tree.refund(cand.running.workload.scope_id, cand.total)
        if cand.reclaim:
            self.levels[cand.level] = self.levels.get(cand.level, 0) + 1

    def _give_back(self, cand: Candidate) -> None:
        self.tree.charge(cand.running.workload.scope_id, cand.total)
        if cand.reclaim:
            left = self.levels[cand.level] - 1
            if left:
                self.levels[cand.level] = left
            else:
                del self.levels[cand.level]

    def _claimant_short(self) -> frozenset[str]:
        """The claimant rule on the current state, at every level a reclaim victim was taken
        from: the resources of ``S`` on which that level's ``s'`` would be above ``G(s')``."""
        out: frozenset[str] = frozenset()
        for level in self.levels:
            out |= claimant_over(self.tree, self.path[level], self.q, self.claimed)
        return out


def _victim(c: Candidate) -> Victim:
    v = c.running.workload
    return Victim(
        workload_id=v.id,
        scope_id=v.scope_id,
        reason=c.reason,
        freed=dict(c.total),
        priority=v.priority,
    )


def _no_victims(workload: Workload, order: Sequence[Candidate], left: Sequence[str]) -> Reason:
    reclaim = sum(c.reclaim for c in order)
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
