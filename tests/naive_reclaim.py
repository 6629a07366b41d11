"""The slow, obviously-correct twin of DESIGN §2 Reclaim, in plain Python.

It reads nothing but the scopes, the running workloads and the capacity: every usage is summed
again from the running workloads, every effective guarantee worked out again by recursion, and
the rules are written out from DESIGN §2 (and the interpretations in docs/semantics.md) one by
one, with no caching and no simulation on a tree. Quantities are small, so cost is no concern.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from strata_policy.model import RunningWorkload, Scope, Workload

RECLAIM, LOWER = "RECLAIM_BORROWED", "LOWER_PRIORITY"


@dataclass(frozen=True)
class World:
    """A cluster's quota state as plain data."""

    scopes: Mapping[str, Scope]
    running: Sequence[RunningWorkload]
    capacity: Mapping[str, int]

    def path(self, sid: str) -> list[str]:
        """``sid`` then each ancestor."""
        out = []
        while sid:
            out.append(sid)
            sid = self.scopes[sid].parent_id
        return out

    def children(self, sid: str) -> list[str]:
        """Direct children of ``sid``."""
        return [c for c, s in self.scopes.items() if s.parent_id == sid]

    def g(self, sid: str, r: str) -> int:
        """The effective guarantee G(sid)[r], by its definition."""
        own = self.scopes[sid].guarantee
        if r in own:
            return own[r]
        return sum(self.g(c, r) for c in self.children(sid))

    def oversubscribed(self, sid: str, r: str) -> bool:
        """A set guarantee below the children's summed G."""
        own = self.scopes[sid].guarantee
        kids = self.children(sid)
        return bool(kids) and r in own and own[r] < sum(self.g(c, r) for c in kids)

    def usage(self, sid: str, r: str, gone: set[str]) -> int:
        """Subtree usage of ``sid`` on ``r`` without the ``gone`` workloads."""
        return sum(
            total(rw.workload).get(r, 0)
            for rw in self.running
            if rw.workload.id not in gone and sid in self.path(rw.workload.scope_id)
        )

    def root_usage(self, r: str, gone: set[str]) -> int:
        """Usage of everything on ``r`` without the ``gone`` workloads."""
        return sum(
            total(rw.workload).get(r, 0) for rw in self.running if rw.workload.id not in gone
        )


def total(w: Workload) -> dict[str, int]:
    """``request × replicas``, positive amounts only."""
    return {r: a * w.replicas for r, a in w.request.items() if a > 0}


def failing_limits(world: World, w: Workload, gone: set[str]) -> list[tuple[str, str]]:
    """(scope, resource) pairs whose limit fails with ``w`` admitted, ``s`` first."""
    q = total(w)
    return [
        (a, r)
        for a in world.path(w.scope_id)
        for r in sorted(q)
        if r in world.scopes[a].limit and world.usage(a, r, gone) + q[r] > world.scopes[a].limit[r]
    ]


def quota_short(world: World, w: Workload, gone: set[str]) -> set[str]:
    """Resources short of headroom or of a limit on the path."""
    q = total(w)
    out = {r for r in q if q[r] > world.capacity.get(r, 0) - world.root_usage(r, gone)}
    return out | {r for _, r in failing_limits(world, w, gone)}


def split(world: World, s: str, t: str) -> tuple[int, list[str]] | None:
    """(index of s' on s's path, t's path up to t'), or None in s's own branch."""
    s_path, t_path = world.path(s), world.path(t)
    for j, c in enumerate(t_path):
        if c in s_path:
            i = s_path.index(c)
            return None if i == 0 or j == 0 else (i - 1, t_path[:j])
    return len(s_path) - 1, t_path


def exposed(world: World, chain: list[str], r: str, gone: set[str]) -> bool:
    """t' above G on r, and every scope below it on the chain too unless its parent is
    oversubscribed on r."""
    for i, sid in enumerate(chain):
        over = world.usage(sid, r, gone) > world.g(sid, r)
        shared = i + 1 < len(chain) and world.oversubscribed(chain[i + 1], r)
        if not over and not shared:
            return False
    return True


@dataclass(frozen=True)
class Cand:
    """A candidate: the running workload, its reason, and (reclaim) its level and chain."""

    rw: RunningWorkload
    reason: str
    level: int = -1
    chain: tuple[str, ...] = ()


def candidates(world: World, w: Workload) -> tuple[set[str], list[Cand]]:
    """S and the candidates in DESIGN §2 order."""
    short = quota_short(world, w, set())
    failing = failing_limits(world, w, set())
    blocking = failing[0][0] if failing else w.scope_id
    s_path = world.path(w.scope_id)
    q = total(w)
    prio: list[Cand] = []
    maybe: list[Cand] = []
    for rw in world.running:
        v = rw.workload
        if not v.preemptible or v.id == w.id:
            continue
        if blocking in world.path(v.scope_id) and v.priority < w.priority:
            prio.append(Cand(rw, LOWER))
            continue
        where = None if failing else split(world, w.scope_id, v.scope_id)
        if where is None:
            continue
        level, chain = where
        if any(r in total(v) and exposed(world, chain, r, set()) for r in short):
            maybe.append(Cand(rw, RECLAIM, level, tuple(chain)))
    kept: list[Cand] = []
    for k in range(len(s_path)):  # bottom-up: inner levels' candidates count for outer ones
        inside = [c.rw.workload for c in prio + kept]
        sid = s_path[k]
        ok = all(
            world.usage(sid, r, set()) + q.get(r, 0) - sum(total(v).get(r, 0) for v in inside)
            <= world.g(sid, r)
            for r in short
        )
        if ok:
            kept += [c for c in maybe if c.level == k]

    def key(c: Cand) -> tuple[int, int, str]:
        return (c.rw.workload.priority, -c.rw.admitted_at_ms, c.rw.workload.id)

    return short, sorted(kept, key=key) + sorted(prio, key=key)


def still_short(world: World, w: Workload, short: set[str], taken: list[Cand]) -> set[str]:
    """What the taken set does not yet make room on (empty: it makes room)."""
    gone = {c.rw.workload.id for c in taken}
    out = quota_short(world, w, gone)
    q = total(w)
    s_path = world.path(w.scope_id)
    for c in taken:
        if c.reason == RECLAIM:
            sid = s_path[c.level]
            out |= {r for r in short if world.usage(sid, r, gone) + q.get(r, 0) > world.g(sid, r)}
    return out


def makes_room(world: World, w: Workload, short: set[str], taken: list[Cand]) -> bool:
    """DESIGN §2's "makes room", without placement."""
    return not still_short(world, w, short, taken)


def walk(world: World, w: Workload) -> tuple[set[str], list[Cand] | None]:
    """S and the greedy walk's victims after the put-back walks (None: not satisfiable)."""
    short, order = candidates(world, w)
    if not short:
        return short, []
    taken: list[Cand] = []
    left = set(short)
    for c in order:
        v = total(c.rw.workload)
        if not any(r in left for r in v):
            continue
        gone = {x.rw.workload.id for x in taken}
        if c.reason == RECLAIM and not any(
            r in v and exposed(world, list(c.chain), r, gone) for r in left
        ):
            continue
        taken.append(c)
        left = still_short(world, w, short, taken)
        if not left:
            break
    if left:
        return short, None
    again = True
    while again:
        again = False
        for i in range(len(taken) - 1, -1, -1):
            rest = taken[:i] + taken[i + 1 :]
            if makes_room(world, w, short, rest):
                taken = rest
                again = True
    return short, taken
