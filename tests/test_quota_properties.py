"""Hypothesis properties of the quota math over random trees, quotas and call sequences."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from naive_reclaim import World

from strata_policy.model import Decision, Order, RunningWorkload, Scope, VictimReason, Workload
from strata_policy.model.resources import Resources
from strata_policy.quota import QuotaTree, batch_order, check_admit, decide_admit, find_victims
from strata_policy.quota.check import admissible, borrowed_part, requested

RESOURCES = ("cpu", "gpu")
SETTINGS = settings(max_examples=120, deadline=None)


def amounts(max_value: int) -> st.SearchStrategy[dict[str, int]]:
    """A sparse resource map over cpu/gpu."""
    return st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, max_value), max_size=2)


def capacities() -> st.SearchStrategy[dict[str, int]]:
    """A cluster capacity with both resources, small enough to run out."""
    return st.fixed_dictionaries({r: st.integers(0, 16) for r in RESOURCES})


@st.composite
def scopes(draw: st.DrawFn) -> list[Scope]:
    """A random forest of 1-7 scopes, each parent drawn before its children."""
    out: list[Scope] = []
    for i in range(draw(st.integers(1, 7))):
        parent = draw(st.sampled_from(["", *(s.id for s in out)]))
        guarantee = draw(st.one_of(amounts(12), st.fixed_dictionaries({"gpu": st.integers(0, 8)})))
        limit = draw(st.one_of(st.just({}), amounts(20)))
        weight = draw(st.sampled_from([1.0, 2.0, 0.5]))
        out.append(Scope(f"s{i}", parent, "", guarantee, limit, weight))
    return out


@dataclass
class Sim:
    """The engine in miniature: a tree, the running workloads, the capacity."""

    tree: QuotaTree
    capacity: Resources
    running: dict[str, RunningWorkload] = field(default_factory=dict)
    clock: int = 0

    def commit(self, w: Workload) -> None:
        """Admit ``w``: charge its scope and hold it as running."""
        self.clock += 1
        self.tree.charge(w.scope_id, w.total)
        self.running[w.id] = RunningWorkload(w, admitted_at_ms=self.clock)

    def release(self, wid: str) -> None:
        """Release ``wid``: refund it."""
        rw = self.running.pop(wid)
        self.tree.refund(rw.workload.scope_id, rw.workload.total)


def pending(data: st.DataObject, tree: QuotaTree, n: int) -> Workload:
    """A random workload in a random scope of ``tree``."""
    return Workload(
        id=f"w{n}",
        scope_id=data.draw(st.sampled_from(sorted(tree.scopes))),
        request=data.draw(amounts(6)),
        replicas=data.draw(st.integers(1, 2)),
        priority=data.draw(st.integers(0, 3)),
        # most workloads preemptible, as in a real cluster
        preemptible=data.draw(st.sampled_from([True, True, True, False])),
    )


def usages(tree: QuotaTree) -> dict[str, dict[str, int]]:
    """Every scope's usage plus the root's, copied."""
    out = {sid: dict(tree.usage(sid)) for sid in tree.scopes}
    out[""] = dict(tree.total_usage())
    return out


def naive_usage(sim: Sim) -> dict[str, dict[str, int]]:
    """Usage recomputed from the running workloads, walking parents one by one."""
    out: dict[str, dict[str, int]] = {sid: {} for sid in sim.tree.scopes}
    out[""] = {}
    for rw in sim.running.values():
        sid = rw.workload.scope_id
        while True:
            for r, a in rw.workload.total.items():
                if a:
                    out[sid][r] = out[sid].get(r, 0) + a
            if not sid:
                break
            sid = sim.tree.scopes[sid].parent_id
    return out


def limits_respected(tree: QuotaTree) -> bool:
    """No scope's usage is above its limit."""
    return all(
        tree.usage(sid).get(r, 0) <= lim
        for sid, s in tree.scopes.items()
        for r, lim in s.limit.items()
    )


def lender(tree: QuotaTree, s: str, t: str) -> str:
    """``t'``: the child, towards ``t``, of the lowest common ancestor of ``s`` and ``t``."""
    s_path = tree.path(s)
    t_path = tree.path(t)
    for j, sid in enumerate(t_path):
        if sid in s_path:
            return t_path[j - 1]
    return t_path[-1]


@SETTINGS
@given(tree_scopes=scopes(), data=st.data())
def test_engine_loop_keeps_every_invariant(tree_scopes: list[Scope], data: st.DataObject) -> None:
    """Random admits/reclaims/releases: usage = Σ workloads, limits hold, dry runs are pure."""
    sim = Sim(QuotaTree.build(tree_scopes), data.draw(capacities(), label="capacity"))
    for n in range(data.draw(st.integers(1, 20), label="steps")):
        if sim.running and data.draw(st.integers(0, 5)) == 0:
            sim.release(data.draw(st.sampled_from(sorted(sim.running))))
            continue
        w = pending(data, sim.tree, n)
        before = usages(sim.tree)
        result = decide_admit(sim.tree, sim.running, w, sim.capacity)
        assert usages(sim.tree) == before
        if result.decision is Decision.ADMITTED:
            sim.commit(w)
        elif result.decision is Decision.NEEDS_RECLAIM:
            assert apply_plan(sim, w)
        else:  # the Reclaim RPC may still find victims for a limit (priority candidates)
            apply_plan(sim, w)
        assert usages(sim.tree) == naive_usage(sim)
        assert limits_respected(sim.tree)


def apply_plan(sim: Sim, w: Workload) -> bool:
    """Apply a plan if satisfiable; check ``w`` then fits and no lender sinks too far."""
    before = usages(sim.tree)
    plan = find_victims(sim.tree, sim.running, w, sim.capacity)
    assert usages(sim.tree) == before
    if not plan.satisfiable:
        assert not plan.victims
        return False
    for victim in plan.victims:
        sim.release(victim.workload_id)
    assert check_admit(sim.tree, w, sim.capacity).fits
    for victim in plan.victims:
        if victim.reason is VictimReason.RECLAIM_BORROWED:
            branch = lender(sim.tree, w.scope_id, victim.scope_id)
            guarantee = sim.tree.scopes[branch].guarantee
            below = {r: guarantee.get(r, 0) - sim.tree.usage(branch).get(r, 0) for r in RESOURCES}
            assert any(below[r] <= victim.freed.get(r, 0) for r in victim.freed)
    sim.commit(w)
    return True


@SETTINGS
@given(tree_scopes=scopes(), data=st.data())
def test_refund_undoes_charge(tree_scopes: list[Scope], data: st.DataObject) -> None:
    """Charging then refunding any amounts anywhere leaves every usage dict equal."""
    tree = QuotaTree.build(tree_scopes)
    tree.charge(tree_scopes[0].id, data.draw(amounts(5)))
    before = usages(tree)
    sid = data.draw(st.sampled_from(sorted(tree.scopes)))
    amount = data.draw(amounts(9))
    tree.charge(sid, amount)
    tree.refund(sid, amount)
    assert usages(tree) == before


@SETTINGS
@given(tree_scopes=scopes(), data=st.data(), order=st.sampled_from(list(Order)))
def test_batch_order_yields_each_index_once(
    tree_scopes: list[Scope], data: st.DataObject, order: Order
) -> None:
    """Every order yields a permutation of the batch, whatever the caller charges between."""
    tree = QuotaTree.build(tree_scopes)
    batch = [pending(data, tree, n) for n in range(data.draw(st.integers(0, 12)))]
    capacity = data.draw(amounts(30))
    seen = []
    for i in batch_order(tree, batch, order, capacity):
        seen.append(i)
        if check_admit(tree, batch[i], capacity).fits:
            tree.charge(batch[i].scope_id, batch[i].total)
    assert sorted(seen) == list(range(len(batch)))


@SETTINGS
@given(tree_scopes=scopes(), data=st.data(), capacity=capacities())
def test_admissible_is_check_admit_pass_case(
    tree_scopes: list[Scope], data: st.DataObject, capacity: dict[str, int]
) -> None:
    """``admissible`` answers exactly when ``check_admit`` fits, with the same borrowed part."""
    tree = QuotaTree.build(tree_scopes)
    for n in range(data.draw(st.integers(0, 4))):
        w = pending(data, tree, n)
        tree.charge(w.scope_id, w.total)
    w = pending(data, tree, 99)
    check = check_admit(tree, w, capacity)
    fast = admissible(tree, tree.path(w.scope_id), requested(w), capacity)
    assert (fast is not None) == check.fits
    if fast is not None:
        assert fast == dict(check.borrowed)


@SETTINGS
@given(tree_scopes=scopes(), data=st.data())
def test_effective_guarantee_is_its_definition(
    tree_scopes: list[Scope], data: st.DataObject
) -> None:
    """G (cached once per tree) equals its recursive definition on every scope and resource;
    GetCluster's borrowed is usage above it; oversubscribed is a set value below the sum."""
    tree = QuotaTree.build(tree_scopes)
    for n in range(data.draw(st.integers(0, 4))):
        w = pending(data, tree, n)
        tree.charge(w.scope_id, w.total)
    naive = World({s.id: s for s in tree_scopes}, [], {})
    for sid in tree.scopes:
        g = {r: naive.g(sid, r) for r in RESOURCES}
        assert dict(tree.effective_guarantee(sid)) == {r: a for r, a in g.items() if a}
        usage = tree.usage(sid)
        over = {r: usage.get(r, 0) - g[r] for r in RESOURCES if usage.get(r, 0) > g[r]}
        assert tree.borrowed(sid) == over
        flagged = tuple(r for r in RESOURCES if naive.oversubscribed(sid, r))
        assert tree.oversubscribed(sid) == flagged


def naive_borrowed(tree: QuotaTree, w: Workload) -> dict[str, int]:
    """The borrowed part by its definition: what no scope's idle guarantee on the path covers
    (``min`` over the path of ``max(G - usage, 0)``), per positive resource."""
    out = {}
    for r, asked in w.request.items():
        want = asked * w.replicas
        if want <= 0:
            continue
        idle = [
            max(tree.effective_guarantee(sid).get(r, 0) - tree.usage(sid).get(r, 0), 0)
            for sid in tree.path(w.scope_id)
        ]
        covered = min([want, *idle])
        if want > covered:
            out[r] = want - covered
    return out


@SETTINGS
@given(tree_scopes=scopes(), data=st.data())
def test_borrowed_part_is_its_definition(tree_scopes: list[Scope], data: st.DataObject) -> None:
    """``borrowed_part`` (which stops at the first scope without a guarantee) and ``requested``
    (which copies a one-replica request without a loop) give the plain formulas' answers."""
    tree = QuotaTree.build(tree_scopes)
    for n in range(data.draw(st.integers(0, 4))):
        w = pending(data, tree, n)
        tree.charge(w.scope_id, w.total)
    w = pending(data, tree, 99)
    q = requested(w)
    assert q == {r: a * w.replicas for r, a in w.request.items() if a > 0}
    assert q is not w.request  # a copy: the caller may keep it
    assert borrowed_part(tree, tree.path(w.scope_id), q) == naive_borrowed(tree, w)
