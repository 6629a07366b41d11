"""Reclaim's candidates (DESIGN §2), in the order the walk takes them.

For a running ``v`` in scope ``t`` and the pending ``w`` in scope ``s``: ``c`` is their lowest
common ancestor (a virtual root above the top level), ``s'``/``t'`` the children of ``c``
towards ``s``/``t``. ``s'`` is always a scope on ``s``'s path, so a reclaim candidate is filed
under the *level* ``k`` with ``s' = path(s)[k]``.

- **Priority candidates**: ``v`` preemptible, in the subtree of the blocking scope (the deepest
  failing limit, or ``s``), priority strictly below ``w``'s.
- **Reclaim candidates** (only when no limit on the path fails): ``v`` preemptible, in another
  branch than ``s`` (``t`` neither in ``s``'s subtree nor on its path), ``v`` *exposed* on a
  resource ``w`` is short of and ``v`` uses, and the claimant rule *could* hold at its
  level: ``usage(s')[r] + q[r] − Σ candidates inside s'[r] ≤ G(s')[r]`` for every short ``r``.
  "Candidates inside ``s'``" are the priority candidates (all inside ``s``) and the reclaim
  candidates of deeper levels, so the levels are judged bottom-up: a level that fails the test
  frees nothing for the levels above it.
- **Exposed** on ``r``: ``t'`` holds more than ``G(t')`` of ``r`` (DESIGN §2), and so does every
  scope ``y`` between ``t'`` and ``t`` (``t`` included) — unless ``y``'s parent is
  oversubscribed on ``r``. A scope within its guarantee protects its whole subtree at every
  level above it: a team guaranteed 64 GPUs under an organisation that others overfill keeps
  them (Kueue likewise only preempts from a ClusterQueue above its nominal quota). Where a
  parent sets a guarantee below its children's sum, its children share less than they were
  promised, so being within their own does not protect them there.

The two kinds are disjoint: with no failing limit the blocking scope is ``s`` and its subtree is
``s``'s own branch; with one, reclaim candidates are not considered. Order: reclaim before
priority; then lower priority first; then most recently admitted first; then id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from strata_policy.model import RunningWorkload, VictimReason, Workload
from strata_policy.quota.tree import QuotaTree


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running workload in the order, with what evicting it frees.

    ``level`` is the index on ``s``'s path of ``s'`` and ``chain`` the path of ``t`` up to
    ``t'`` (reclaim candidates only; -1 and () for priority candidates)."""

    running: RunningWorkload
    reason: VictimReason
    total: Mapping[str, int]
    level: int = -1
    chain: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """The running workload's id."""
        return self.running.workload.id

    @property
    def reclaim(self) -> bool:
        """Whether it is a reclaim candidate (taken back from another branch)."""
        return self.reason is VictimReason.RECLAIM_BORROWED


@dataclass(frozen=True, slots=True)
class _Where:
    """How a running workload's scope ``t`` relates to ``s`` (cached per scope)."""

    in_blocking: bool  # t is in the subtree of the blocking scope
    level: int = -1  # index of s' on s's path; -1 when t is in s's own branch
    chain: tuple[str, ...] = ()  # t's path up to t'


def ordered_candidates(
    tree: QuotaTree,
    running: Mapping[str, RunningWorkload],
    workload: Workload,
    *,
    blocking: str,
    limited: bool,
    short: frozenset[str],
) -> list[Candidate]:
    """Reclaim candidates then priority candidates, each in DESIGN §2 order.

    ``blocking`` is the blocking scope, ``limited`` whether a limit on the path fails (then
    only priority candidates count), ``short`` the resources ``w`` is short of before any
    victim is chosen. O(running + scopes met × depth × resources).
    """
    s_path = tree.path(workload.scope_id)
    s_index = {sid: i for i, sid in enumerate(s_path)}
    q = {r: a * workload.replicas for r, a in workload.request.items() if a > 0}
    where: dict[str, _Where] = {}
    exposed_in: dict[str, frozenset[str]] = {}  # t -> short resources its work is exposed on
    priority: list[Candidate] = []
    reclaim: list[Candidate] = []
    for rw in running.values():  # O(running): per workload only cached per-scope facts
        v = rw.workload
        if not v.preemptible or v.id == workload.id:
            continue
        at = where.get(v.scope_id)
        if at is None:
            at = where[v.scope_id] = _where(tree, s_index, v.scope_id, blocking, limited)
        if at.in_blocking and v.priority < workload.priority:
            total = {r: a * v.replicas for r, a in v.request.items() if a > 0}
            priority.append(Candidate(rw, VictimReason.LOWER_PRIORITY, total))
        elif at.level >= 0:
            lent = exposed_in.get(v.scope_id)
            if lent is None:
                lent = exposed_in[v.scope_id] = exposed(tree, at.chain, short)
            if lent and any(v.request.get(r, 0) > 0 for r in lent):
                total = {r: a * v.replicas for r, a in v.request.items() if a > 0}
                reclaim.append(
                    Candidate(rw, VictimReason.RECLAIM_BORROWED, total, at.level, at.chain)
                )
    if reclaim:
        reclaim = _claimable(tree, s_path, q, short, priority, reclaim)
    reclaim.sort(key=_order_key)
    priority.sort(key=_order_key)
    return reclaim + priority


def claimant_over(
    tree: QuotaTree, claimant: str, q: Mapping[str, int], short: frozenset[str]
) -> frozenset[str]:
    """The claimant rule at one level, on the current usage: the resources of ``short`` on
    which ``claimant`` (``s'``) would be above ``G(s')`` with ``w`` admitted."""
    usage = tree.usages[claimant]
    g = tree.effective_guarantees[claimant]
    return frozenset(r for r in short if usage.get(r, 0) + q.get(r, 0) > g.get(r, 0))


def exposed(tree: QuotaTree, chain: tuple[str, ...], short: frozenset[str]) -> frozenset[str]:
    """The resources of ``short`` on which work in ``chain[0]`` is exposed now (see the module
    docstring); ``chain`` is the path from ``t`` up to ``t'``. O(depth × resources)."""
    usages, effective = tree.usages, tree.effective_guarantees
    out: set[str] = set()
    for r in short:
        for i, sid in enumerate(chain):
            if usages[sid].get(r, 0) > effective[sid].get(r, 0):
                continue
            if i + 1 < len(chain) and r in tree.oversubscribed(chain[i + 1]):
                continue
            break  # within G(sid) on r and not shared less: protected
        else:
            out.add(r)
    return frozenset(out)


def _claimable(
    tree: QuotaTree,
    s_path: tuple[str, ...],
    q: Mapping[str, int],
    short: frozenset[str],
    priority: list[Candidate],
    reclaim: list[Candidate],
) -> list[Candidate]:
    """The reclaim candidates whose level passes the claimant pre-test, bottom-up: at each
    level, ``s'`` minus every candidate inside it, plus ``w``, within ``G(s')`` on every short
    resource."""
    inside: dict[str, int] = {}
    for c in priority:  # every priority candidate is inside s, so inside every s'
        _add_short(inside, c.total, short)
    by_level: dict[int, list[Candidate]] = {}
    for c in reclaim:
        by_level.setdefault(c.level, []).append(c)
    out: list[Candidate] = []
    for k in range(len(s_path)):
        here = by_level.get(k)
        if not here:
            continue
        usage = tree.usages[s_path[k]]
        g = tree.effective_guarantees[s_path[k]]
        if all(usage.get(r, 0) + q.get(r, 0) - inside.get(r, 0) <= g.get(r, 0) for r in short):
            out.extend(here)
            for c in here:
                _add_short(inside, c.total, short)
    return out


def _add_short(target: dict[str, int], amounts: Mapping[str, int], short: frozenset[str]) -> None:
    for r, a in amounts.items():
        if r in short:
            target[r] = target.get(r, 0) + a


def _where(
    tree: QuotaTree, s_index: Mapping[str, int], t: str, blocking: str, limited: bool
) -> _Where:
    """Where ``t`` sits relative to ``s``: in the blocking subtree; the level of ``s'``."""
    t_path = tree.path(t)
    in_blocking = blocking in t_path
    if limited:
        return _Where(in_blocking)
    for j, sid in enumerate(t_path):
        i = s_index.get(sid)
        if i is not None:  # sid is the lowest common ancestor c
            if i == 0 or j == 0:  # t below s, or s below t: the same branch
                return _Where(in_blocking)
            return _Where(in_blocking, i - 1, t_path[:j])
    return _Where(in_blocking, len(s_index) - 1, t_path)  # they meet at the virtual root


def _order_key(c: Candidate) -> tuple[int, int, str]:
    """Lower priority first, then most recently admitted first, then id."""
    return (c.running.workload.priority, -c.running.admitted_at_ms, c.running.workload.id)
