"""The batch Place fast lane (``quota.admit_all`` + ``ClusterState.add_many``) answers and
commits exactly as deciding and placing one workload at a time."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matrix_state import matrix_state

from strata_policy.engine import Engine, place
from strata_policy.errors import InvalidArgument
from strata_policy.model import (
    Decision,
    Order,
    Placement,
    Policy,
    RunningWorkload,
    Scope,
    Snapshot,
    Workload,
)
from strata_policy.placement.place import PlacementOptions
from strata_policy.quota import QuotaTree, admit_all, decide_admit
from strata_policy.state import cluster_core
from strata_policy.state.cluster import ClusterState
from strata_policy.testing import node, scope

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

NODES = tuple(node(f"n{i}", cpu=16 + 8 * (i % 3), gpus=4 + 4 * (i % 2)) for i in range(24))
CAPACITY = {"cpu": 10**6, "gpu": 10**6}
FAST = place.FAST_PATH_MIN
Decided = tuple[Decision, dict[str, int]]  # a decision and its borrowed part


def _tree(scopes: tuple[Scope, ...], usage: dict[str, dict[str, int]]) -> QuotaTree:
    tree = QuotaTree.build(scopes)
    for sid, amounts in usage.items():
        tree.charge(sid, amounts)
    return tree


def _one_by_one(tree: QuotaTree, workloads: list[Workload], admitted: list[bool]) -> list[Decided]:
    """``decide_admit`` per workload, charging only those marked admitted (then refunding)."""
    out = []
    charged = []
    for w, keep in zip(workloads, admitted, strict=True):
        result = decide_admit(tree, {}, w, CAPACITY)
        out.append((result.decision, dict(result.borrowed)))
        if keep and result.decision is Decision.ADMITTED:
            tree.charge(w.scope_id, w.total)
            charged.append(w)
    for w in reversed(charged):
        tree.refund(w.scope_id, w.total)
    return out


TEAMS = (
    scope("org", guarantee={"gpu": 6000}, limit={"gpu": 8000}),
    scope("a", "org", guarantee={"gpu": 4000}),
    scope("b", "org"),
)


@pytest.mark.parametrize(
    ("scopes", "usage", "workloads", "expected"),
    [
        pytest.param(
            (scope("org"),),
            {},
            [Workload("w1", "org", {"gpu": 1000, "cpu": 0}), Workload("w2", "org", {"cpu": 5})],
            [{"gpu": 1000}, {"cpu": 5}],
            id="lane: nothing guaranteed, everything borrowed, zero amounts left out",
        ),
        pytest.param(
            TEAMS,
            {},
            [Workload(f"w{i}", "a", {"gpu": 1000}) for i in range(4)],
            [{}, {}, {}, {}],
            id="lane: the run fits in the idle guarantee, nothing borrowed",
        ),
        pytest.param(
            TEAMS,
            {"a": {"gpu": 4000}},
            [Workload(f"w{i}", "a", {"gpu": 1000}) for i in range(4)],
            [{"gpu": 1000}] * 4,
            id="lane: the guarantee is used up before the run, all borrowed",
        ),
        pytest.param(
            TEAMS,
            {"a": {"gpu": 2000}},
            [Workload(f"w{i}", "a", {"gpu": 1000}) for i in range(4)],
            None,
            id="no lane: the run crosses a guarantee part way",
        ),
        pytest.param(
            TEAMS,
            {},
            [Workload(f"w{i}", "b", {"gpu": 1000}) for i in range(9)],
            None,
            id="no lane: a limit on the path binds in the run",
        ),
        pytest.param(
            (scope("org"),),
            {"org": {"gpu": 10**6 - 1000}},
            [Workload(f"w{i}", "org", {"gpu": 1000}) for i in range(2)],
            None,
            id="no lane: the headroom binds in the run",
        ),
        pytest.param(
            TEAMS,
            {"org": {"cpu": 10}},
            [Workload("w1", "b", {"cpu": 5}, replicas=3)],
            [{"cpu": 15}],
            id="lane: a limit on another resource does not bind",
        ),
    ],
)
def test_admit_all_cases(
    scopes: tuple[Scope, ...],
    usage: dict[str, dict[str, int]],
    workloads: list[Workload],
    expected: list[dict[str, int]] | None,
) -> None:
    """admit_all answers a run only when no rule can bind, with decide_admit's borrowed."""
    tree = _tree(scopes, usage)
    lane = admit_all(tree, workloads, CAPACITY)
    assert (lane.borrowed if lane else None) == expected
    if expected is not None:
        decided = _one_by_one(tree, workloads, [True] * len(workloads))
        assert decided == [(Decision.ADMITTED, b) for b in expected]


SCOPE_IDS = ("a", "b", "a1")


@st.composite
def quota_scopes(draw: st.DrawFn) -> tuple[Scope, ...]:
    """org > a > a1 and org > b, each with a random limit and a guarantee within it."""

    def amounts() -> st.SearchStrategy[dict[str, int]]:
        some = st.dictionaries(
            st.sampled_from(["cpu", "gpu"]),
            st.sampled_from([0, 6000, 20000, 60000, 10**6]),
            max_size=2,
        )
        return st.one_of(st.just({}), some)  # half the scopes set nothing: runs go fast

    out = []
    for sid, parent in (("org", ""), ("a", "org"), ("b", "org"), ("a1", "a")):
        limit = draw(amounts())
        guarantee = {r: min(a, limit.get(r, a)) for r, a in draw(amounts()).items()}
        out.append(scope(sid, parent, guarantee=guarantee, limit=limit))
    return tuple(out)


workload_lists = st.lists(
    st.tuples(
        st.sampled_from(SCOPE_IDS),
        st.sampled_from([0, 1000, 2000]),
        st.sampled_from([0, 500, 1000, 2000]),
        st.integers(1, 3),
        st.integers(0, 2),
        st.booleans(),
    ),
    min_size=FAST,
    max_size=FAST * 2 + 8,
)


def _workloads(shapes: list[tuple[str, int, int, int, int, bool]]) -> list[Workload]:
    return [
        Workload(
            f"w{i}",
            s,
            {"cpu": cpu, "gpu": gpu},
            replicas=r,
            priority=p,
            spread_key="kubernetes.io/hostname" if spread else "",
            queued_at_ms=i % 5,
        )
        for i, (s, cpu, gpu, r, p, spread) in enumerate(shapes)
    ]


@settings(max_examples=60)
@given(
    scopes=quota_scopes(),
    usage=st.dictionaries(
        st.sampled_from(["org", *SCOPE_IDS]),
        st.fixed_dictionaries({"cpu": st.integers(0, 8000), "gpu": st.integers(0, 8000)}),
    ),
    shapes=workload_lists,
    admitted=st.lists(st.booleans(), min_size=FAST * 2 + 8, max_size=FAST * 2 + 8),
)
def test_admit_all_equals_one_by_one_for_any_admitted_subset(
    scopes: tuple[Scope, ...],
    usage: dict[str, dict[str, int]],
    shapes: list[tuple[str, int, int, int, int, bool]],
    admitted: list[bool],
) -> None:
    """When the lane answers, every workload is ADMITTED with the same borrowed one by one,
    whichever of the ones before it were charged; the tree is only read."""
    workloads = _workloads(shapes)
    tree = _tree(scopes, usage)
    before = {sid: dict(tree.usage(sid)) for sid in tree.scopes}
    lane = admit_all(tree, workloads, CAPACITY)
    assert {sid: dict(tree.usage(sid)) for sid in tree.scopes} == before
    if lane is not None:
        decided = _one_by_one(tree, workloads, admitted[: len(workloads)])
        assert decided == [(Decision.ADMITTED, b) for b in lane.borrowed]
        sums: dict[str, dict[str, int]] = {}
        for w in workloads:
            for r, a in w.total.items():
                if a > 0:
                    sums.setdefault(w.scope_id, {})[r] = sums.get(w.scope_id, {}).get(r, 0) + a
        assert lane.totals == {sid: sums.get(sid, {}) for sid in {w.scope_id for w in workloads}}


def _general(engine: Engine, workloads: list[Workload], **kwargs: object) -> object:
    """Engine.place through the one-by-one loop (no runs, no chunks)."""
    with mock.patch.object(place, "FAST_PATH_MIN", 10**9):
        return engine.place("c", workloads, **kwargs)  # type: ignore[arg-type]


def _consistent(engine: Engine) -> None:
    """Usage, allocations and limits equal those of the same workloads built afresh."""
    generation, snap = engine.snapshot("c")
    with engine.store.slot("c") as slot:
        state = slot.require("c")
        fresh = ClusterState.build("c", snap, generation)
        for sid in state.tree.scopes:
            assert state.tree.usage(sid) == fresh.tree.usage(sid)
            limit = state.tree.scopes[sid].limit
            assert all(state.tree.usage(sid).get(r, 0) <= a for r, a in limit.items())
        assert (state.matrix.free == fresh.matrix.free).all()
        assert (state.matrix.gpu_free == fresh.matrix.gpu_free).all()


@settings(max_examples=60, deadline=None)
@given(
    scopes=quota_scopes(),
    shapes=workload_lists,
    order=st.sampled_from([Order.FIFO, Order.PRIORITY, Order.FAIR]),
    policy=st.sampled_from(list(Policy)),
    dry_run=st.booleans(),
)
def test_batch_place_equals_the_general_path(
    scopes: tuple[Scope, ...],
    shapes: list[tuple[str, int, int, int, int, bool]],
    order: Order,
    policy: Policy,
    dry_run: bool,
) -> None:
    """Same results and the same state as the one-by-one loop, limits and guarantees binding
    mid-batch, gangs and spread included; a dry run changes nothing."""
    workloads = _workloads(shapes)
    options = PlacementOptions(policy=policy)
    fast, general = Engine(clock=lambda: 1), Engine(clock=lambda: 1)
    for e in (fast, general):
        e.push_snapshot("c", Snapshot(NODES, scopes))
        e.place("c", [Workload("running", "b", {"cpu": 4000, "gpu": 1000})])
    before = fast.snapshot("c")
    kwargs = {"order": order, "options": options, "dry_run": dry_run}
    epochs = _epochs(fast), _epochs(general)
    got = fast.place("c", workloads, **kwargs)  # type: ignore[arg-type]
    want = _general(general, workloads, **kwargs)
    assert got == want
    fast_matrix, general_matrix = _matrix(fast, epochs[0]), _matrix(general, epochs[1])
    if dry_run:  # rolled back: the same nodes journaled (an undo walks its own order)
        assert fast.snapshot("c") == before
        fast_matrix, general_matrix = _unordered(fast_matrix), _unordered(general_matrix)
    else:
        assert fast.snapshot("c") == general.snapshot("c")
    assert fast_matrix == general_matrix
    _consistent(fast)


def _unordered(matrix: tuple[object, ...]) -> tuple[object, ...]:
    """The journal as a multiset; once it has wrapped (a new epoch), what it kept depends on
    the order, so only its length is compared."""
    journal = matrix[4]
    assert isinstance(journal, list)
    kept = sorted(journal) if matrix[-1] else len(journal)
    return (*matrix[:4], kept, *matrix[5:])


def _epochs(engine: Engine) -> int:
    with engine.store.slot("c") as slot:
        return slot.require("c").matrix.epoch


def _matrix(engine: Engine, epoch: int) -> tuple[object, ...]:
    """The node matrix's arrays, versions and journal (and whether a new journal was begun)."""
    with engine.store.slot("c") as slot:
        m = slot.require("c").matrix
        return (*matrix_state(m), m.epoch == epoch)


def test_a_failure_after_a_committed_run_changes_nothing() -> None:
    """A batch failing after its first run was committed leaves the cluster as it was."""
    engine = Engine(clock=lambda: 1)
    engine.push_snapshot("c", Snapshot(NODES, (scope("org"),)))
    before = engine.snapshot("c")
    workloads = [Workload(f"w{i}", "org", {"cpu": 1000}) for i in range(FAST * 4)]
    real = place.place_columns
    calls = []

    def fail_second(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("kernel failure")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    with (
        mock.patch.object(place, "place_columns", fail_second),
        mock.patch.object(place, "FAST_PATH_MAX", FAST),
        pytest.raises(RuntimeError),
    ):
        engine.place("c", workloads)
    assert len(calls) == 2
    assert engine.snapshot("c") == before
    _consistent(engine)


@pytest.mark.parametrize(
    "held",
    [
        pytest.param(["w0", "w0"], id="add_many: an id repeated in the batch"),
        pytest.param(["running", "w1"], id="add_many: an id the cluster holds"),
    ],
)
def test_add_many_refuses_known_ids_before_changing_anything(held: list[str]) -> None:
    """add_many raises on a duplicate id and leaves the state untouched."""
    engine = Engine(clock=lambda: 1)
    engine.push_snapshot("c", Snapshot(NODES, (scope("org"),)))
    engine.place("c", [Workload("running", "org", {"cpu": 1000})])
    before = engine.snapshot("c")
    rws = [RunningWorkload(Workload(wid, "org", {"cpu": 1000}), (Placement("n1"),)) for wid in held]
    with engine.store.slot("c") as slot:
        state = slot.require("c")
        with pytest.raises(InvalidArgument):
            state.add_many(rws)
    assert engine.snapshot("c") == before
    _consistent(engine)


@pytest.mark.parametrize(
    "fraction",
    [
        pytest.param(1, id="add_many: replica by replica"),
        pytest.param(10**9, id="add_many: in bulk"),
    ],
)
def test_add_many_refuses_a_replica_that_does_not_fit(fraction: int) -> None:
    """A replica over its node's capacity raises ValueError; nodes and tree stay as they were."""
    engine = Engine(clock=lambda: 1)
    engine.push_snapshot("c", Snapshot(NODES, (scope("org"),)))
    before = engine.snapshot("c")
    rws = [
        RunningWorkload(Workload(f"w{i}", "org", {"cpu": 10_000}), (Placement("n1"),))
        for i in range(3)
    ]  # n1 has 24 CPUs: the third does not fit
    with (
        engine.store.slot("c") as slot,
        mock.patch.object(cluster_core, "BULK_ALLOCATE_FRACTION", fraction),
    ):
        state = slot.require("c")
        with pytest.raises(ValueError, match="insufficient cpu"):
            state.add_many(rws)
    assert engine.snapshot("c") == before
    _consistent(engine)


@settings(max_examples=100)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["add", "add_many", "remove", "place"]), st.integers(0, 7)),
        max_size=20,
    )
)
def test_changes_are_the_touched_workloads_in_admission_order(
    steps: list[tuple[str, int]],
) -> None:
    """changes() lists what a transaction touched and still holds in admission order, and what
    it removed that was held before, whatever mix of adds, re-adds, removals and placements."""
    held = tuple(RunningWorkload(Workload(f"w{i}", "org", {"cpu": 1})) for i in range(4))
    state = ClusterState.build("c", Snapshot(NODES, (scope("org"),), held), 1)
    with state.transaction():
        for op, k in steps:
            ids = [f"w{k}", f"w{k}b"][: 1 + k % 2] if op == "add_many" else [f"w{k}"]
            new = all(wid not in state.workloads for wid in ids)
            if op == "add" and new:
                state.add(RunningWorkload(Workload(ids[0], "org", {"cpu": 1})))
            elif op == "add_many" and new:
                state.add_many([RunningWorkload(Workload(wid, "org", {"cpu": 1})) for wid in ids])
            elif op == "remove" and not new:
                state.remove(ids[0])
            elif op == "place" and not new:
                state.set_placements(ids[0], (Placement("n0"),) if k % 2 else ())
        upserts, removed = state.changes()
        in_order = [rw.workload.id for rw in state.snapshot().workloads]
        assert [rw.workload.id for rw in upserts] == [w for w in in_order if w in state.touched]
        gone = state.touched - state.created
        assert removed == sorted(w for w in gone if w not in state.workloads)
