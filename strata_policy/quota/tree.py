"""The quota tree: scopes, their ancestor paths, and usage rolled up to every ancestor.

``usage(s)`` is the sum of ``request × replicas`` of every admitted workload in the subtree of
``s`` (DESIGN §2). The tree keeps that sum per scope and one more for the virtual root above the
top-level scopes, so every read is O(1) and a ``charge``/``refund`` is O(depth × resources): the
amounts are added to the scope and to each ancestor on its cached path. Zero entries are dropped,
so a ``refund`` is the exact inverse of a ``charge`` (the dicts compare equal afterwards).

The tree also keeps each scope's *own* usage (workloads charged to the scope itself, not to a
descendant); the FAIR batch order needs it for inner scopes that hold workloads of their own.

Input is validated by the caller (unique ids, parents exist, no cycles, amounts ≥ 0); an
unknown scope id passed to any method raises ``InvalidArgument`` rather than ``KeyError``, because
it reaches here from a request (a workload's ``scope_id``).

The tree also holds every scope's **effective guarantee** ``G`` (DESIGN §2), the guarantee
every quota rule uses: ``guarantee(s)[r]`` where set; where absent, 0 for a scope without
children and the sum of the children's ``G`` for a scope with children. So an organisation that
sets nothing still protects what its teams are guaranteed, and a team guaranteed 64 GPUs keeps
them whatever its parent sets. ``G`` depends on the scopes only, so it is worked out once per
tree structure (``recompute_guarantees``, bottom-up, O(scopes × resources)) and read in O(1)
by every decision; copies share it.

Interpretations written down:

- ``borrowed(s)`` is usage above ``G(s)``: what the scope holds beyond what it is guaranteed.
- ``oversubscribed(s)`` lists the resources whose *set* guarantee is below the sum of the
  children's ``G`` (the children were promised more than the scope holds for them); an absent
  guarantee is never oversubscribed (it is the sum).
- ``at_limit(s)`` lists the resources ``s`` limits whose usage is at or above the limit, sorted
  by name (a limit of 0 with no usage counts: nothing more of it can be admitted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from strata_policy.errors import InvalidArgument
from strata_policy.model import Scope, ScopeStatus
from strata_policy.model.resources import Resources

_EMPTY: Mapping[str, int] = MappingProxyType({})


class QuotaTree:
    """Scopes with rolled-up usage; the cluster store keeps one and charges/refunds it.

    Structure (scopes, paths, children) is immutable after ``build`` and shared between copies;
    only the usage dicts are per instance, so ``copy`` costs O(scopes × resources).
    """

    __slots__ = (
        "_children",
        "_effective",
        "_oversubscribed",
        "_own",
        "_path",
        "_root",
        "_usage",
        "scopes",
    )

    scopes: Mapping[str, Scope]
    _effective: Mapping[str, Mapping[str, int]]
    _oversubscribed: Mapping[str, tuple[str, ...]]

    def __init__(
        self,
        *,
        scopes: Mapping[str, Scope],
        paths: Mapping[str, tuple[str, ...]],
        children: Mapping[str | None, tuple[str, ...]],
        usage: dict[str, dict[str, int]],
        own: dict[str, dict[str, int]],
        root: dict[str, int],
        effective: tuple[Mapping[str, Mapping[str, int]], Mapping[str, tuple[str, ...]]]
        | None = None,
    ) -> None:
        """Internal: use ``QuotaTree.build`` or ``copy``."""
        self.scopes = scopes
        self._path = paths
        self._children = children
        self._usage = usage
        self._own = own
        self._root = root
        if effective is None:
            self.recompute_guarantees()
        else:
            self._effective, self._oversubscribed = effective

    @classmethod
    def build(cls, scopes: Sequence[Scope]) -> QuotaTree:
        """A tree with zero usage from validated scopes (any order, any depth)."""
        by_id = {s.id: s for s in scopes}
        children: dict[str | None, list[str]] = {None: []}
        for s in scopes:
            children.setdefault(s.id, [])
            children.setdefault(s.parent_id or None, []).append(s.id)
        paths: dict[str, tuple[str, ...]] = {}
        for s in scopes:
            paths[s.id] = _path_of(s.id, by_id, paths)
        return cls(
            scopes=MappingProxyType(by_id),
            paths=MappingProxyType(paths),
            children=MappingProxyType({k: tuple(sorted(v)) for k, v in children.items()}),
            usage={s.id: {} for s in scopes},
            own={s.id: {} for s in scopes},
            root={},
        )

    def copy(self) -> QuotaTree:
        """An independent tree with the same usage (structure shared, usage copied)."""
        return QuotaTree(
            scopes=self.scopes,
            paths=self._path,
            children=self._children,
            usage={k: dict(v) for k, v in self._usage.items()},
            own={k: dict(v) for k, v in self._own.items()},
            root=dict(self._root),
            effective=(self._effective, self._oversubscribed),
        )

    def recompute_guarantees(self) -> None:
        """Work out every scope's effective guarantee ``G`` and oversubscribed resources from
        ``scopes`` and the children, bottom-up (see the module docstring).

        ``build`` calls it; whoever changes the scopes of a tree (their guarantees or their
        parents) calls it again, so that no decision reads a stale ``G``. O(scopes × resources).
        """
        effective: dict[str, Mapping[str, int]] = {}
        oversubscribed: dict[str, tuple[str, ...]] = {}
        order: list[str] = []  # parents before children
        stack = list(self._children[None])
        while stack:
            sid = stack.pop()
            order.append(sid)
            stack.extend(self._children[sid])
        for sid in reversed(order):  # children before parents
            kids = self._children[sid]
            summed: dict[str, int] = {}
            for kid in kids:
                for r, a in effective[kid].items():
                    summed[r] = summed.get(r, 0) + a
            guarantee = self.scopes[sid].guarantee
            g = {**summed, **guarantee}
            effective[sid] = MappingProxyType({r: a for r, a in sorted(g.items()) if a})
            oversubscribed[sid] = tuple(
                r for r in sorted(guarantee) if kids and guarantee[r] < summed.get(r, 0)
            )
        self._effective = MappingProxyType(effective)
        self._oversubscribed = MappingProxyType(oversubscribed)

    def with_scopes(self, replaced: Mapping[str, Scope]) -> QuotaTree:
        """This tree with some scopes' fields replaced (same ids, same parents: the shape and
        the usage stay). The usage tables are shared, not copied: the result takes this tree's
        place (UpdateSnapshot), and this one is kept only to be put back on a rollback, which
        undoes every charge made in between first. O(scopes) for the new id map."""
        scopes = dict(self.scopes)
        scopes.update(replaced)
        return QuotaTree(
            scopes=MappingProxyType(scopes),
            paths=self._path,
            children=self._children,
            usage=self._usage,
            own=self._own,
            root=self._root,
        )

    def reshaped(self, scopes: Sequence[Scope]) -> QuotaTree:
        """A tree of ``scopes`` (validated) charged with this tree's own usage of every scope
        it keeps: the tree ``build`` and charging every held workload would give, when the
        scopes this one loses hold nothing. O(scopes × depth × resources)."""
        tree = QuotaTree.build(scopes)
        for scope_id, amounts in self._own.items():
            if amounts and scope_id in tree.scopes:
                tree.charge(scope_id, amounts)
        return tree

    def __contains__(self, scope_id: object) -> bool:
        """Whether the tree knows ``scope_id``."""
        return scope_id in self.scopes

    def path(self, scope_id: str) -> tuple[str, ...]:
        """The scope first, then each ancestor, the top-level scope last. O(1), cached."""
        try:
            return self._path[scope_id]
        except KeyError:
            raise _unknown(scope_id) from None

    def children(self, scope_id: str | None) -> tuple[str, ...]:
        """Direct children sorted by id; ``None`` = the top-level scopes."""
        try:
            return self._children[scope_id]
        except KeyError:
            raise _unknown(scope_id or "") from None

    def usage(self, scope_id: str) -> Mapping[str, int]:
        """Subtree usage of ``scope_id`` as a live read-only view (copy it to keep it)."""
        try:
            return MappingProxyType(self._usage[scope_id])
        except KeyError:
            raise _unknown(scope_id) from None

    def own_usage(self, scope_id: str) -> Mapping[str, int]:
        """Usage charged to ``scope_id`` itself, not to its descendants (live read-only view)."""
        try:
            return MappingProxyType(self._own[scope_id])
        except KeyError:
            raise _unknown(scope_id) from None

    def total_usage(self) -> Mapping[str, int]:
        """Usage of all admitted work (the virtual root), as a live read-only view."""
        return MappingProxyType(self._root)

    def effective_guarantee(self, scope_id: str) -> Mapping[str, int]:
        """``G(scope_id)``, positive entries only (absent = 0), read-only. O(1)."""
        try:
            return self._effective[scope_id]
        except KeyError:
            raise _unknown(scope_id) from None

    @property
    def effective_guarantees(self) -> Mapping[str, Mapping[str, int]]:
        """Every scope's ``G`` by scope id, for the per-decision loops (read-only)."""
        return self._effective

    def oversubscribed(self, scope_id: str) -> tuple[str, ...]:
        """Resources whose set guarantee is below the children's summed ``G``, by name."""
        try:
            return self._oversubscribed[scope_id]
        except KeyError:
            raise _unknown(scope_id) from None

    @property
    def usages(self) -> Mapping[str, Mapping[str, int]]:
        """Every scope's subtree usage, live, by scope id: what ``usage`` gives one at a time,
        for the per-decision loops that would otherwise wrap each scope's table in a view.
        Read-only by contract: only ``charge`` and ``refund`` change usage."""
        return self._usage

    def charge(self, scope_id: str, amounts: Resources) -> None:
        """Add ``amounts`` to ``scope_id``, every ancestor and the root. O(depth × resources).

        Amounts are never negative (validated), so no entry reaches zero here: ``_add`` written
        out without that case, as this runs once per admitted workload.
        """
        try:
            path = self._path[scope_id]  # ``path``, without a call
        except KeyError:
            raise _unknown(scope_id) from None
        live = amounts if 0 not in amounts.values() else {r: a for r, a in amounts.items() if a}
        if not live:
            return
        items = tuple(live.items())
        for target in (self._own[scope_id], *map(self._usage.__getitem__, path), self._root):
            for r, a in items:
                target[r] = target.get(r, 0) + a

    def refund(self, scope_id: str, amounts: Resources) -> None:
        """The exact inverse of ``charge``.

        Raises ``ValueError`` (a bug in the caller, nothing changed) when it would take the
        scope's own usage below zero: usage must always equal the sum of charged workloads.
        """
        path = self.path(scope_id)
        live = {r: a for r, a in amounts.items() if a}
        own = self._own[scope_id]
        for r, a in live.items():
            if own.get(r, 0) < a:
                raise ValueError(
                    f"refund of {r}={a} to scope {scope_id!r} exceeds its usage {own.get(r, 0)}"
                )
        if not live:
            return
        _add(own, live, -1)
        for sid in path:
            _add(self._usage[sid], live, -1)
        _add(self._root, live, -1)

    def borrowed(self, scope_id: str) -> dict[str, int]:
        """Usage above the effective guarantee ``G`` per resource, positive entries only."""
        guarantee = self.effective_guarantee(scope_id)
        return {
            r: u - guarantee.get(r, 0)
            for r, u in sorted(self._usage[scope_id].items())
            if u > guarantee.get(r, 0)
        }

    def at_limit(self, scope_id: str) -> tuple[str, ...]:
        """Resources the scope limits whose usage has reached the limit, sorted by name."""
        usage = self._usage[self._scope(scope_id).id]
        limit = self.scopes[scope_id].limit
        return tuple(r for r in sorted(limit) if usage.get(r, 0) >= limit[r])

    def status(self, scope_id: str, workload_count: int) -> ScopeStatus:
        """The scope's status for GetCluster and the CLI (usage copied, not a live view)."""
        s = self._scope(scope_id)
        return ScopeStatus(
            id=s.id,
            parent_id=s.parent_id,
            kind=s.kind,
            usage=dict(sorted(self._usage[scope_id].items())),
            guarantee=dict(s.guarantee),
            limit=dict(s.limit),
            borrowed=self.borrowed(scope_id),
            weight=s.weight,
            at_limit=self.at_limit(scope_id),
            workload_count=workload_count,
            effective_guarantee=dict(self._effective[scope_id]),
            oversubscribed=self._oversubscribed[scope_id],
        )

    def statuses(self, workload_counts: Mapping[str, int]) -> tuple[ScopeStatus, ...]:
        """Every scope depth-first, parents before children, siblings by id.

        ``workload_counts`` maps a scope id to the number of workloads charged to it directly;
        absent = 0.
        """
        out: list[ScopeStatus] = []
        stack = list(reversed(self._children[None]))
        while stack:
            sid = stack.pop()
            out.append(self.status(sid, workload_counts.get(sid, 0)))
            stack.extend(reversed(self._children[sid]))
        return tuple(out)

    def _scope(self, scope_id: str) -> Scope:
        try:
            return self.scopes[scope_id]
        except KeyError:
            raise _unknown(scope_id) from None


def _path_of(
    scope_id: str, by_id: Mapping[str, Scope], memo: dict[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """The path of ``scope_id``, reusing the memoised path of the nearest ancestor."""
    chain: list[str] = []
    cur: str = scope_id
    while cur and cur not in memo:
        chain.append(cur)
        cur = by_id[cur].parent_id
    tail = memo[cur] if cur else ()
    for i in range(len(chain) - 1, -1, -1):
        tail = (chain[i], *tail)
        memo[chain[i]] = tail
    return tail


def _add(target: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    """``target += sign × amounts`` in place, dropping entries that reach zero."""
    for r, a in amounts.items():
        value = target.get(r, 0) + sign * a
        if value:
            target[r] = value
        else:
            target.pop(r, None)


def _unknown(scope_id: str) -> InvalidArgument:
    return InvalidArgument.one("scope_id", f"unknown scope {scope_id!r}")
