"""Engine invariants under random call sequences (Hypothesis): the store never lies.

After every call, committed or failed: no node is over capacity, no GPU device is over-committed,
usage at every scope equals the sum of its subtree's workloads, and no limit is exceeded by a
workload the engine admitted itself. A failed or dry-run call changes nothing; release undoes
admit exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.engine import Engine
from strata_policy.errors import StrataError
from strata_policy.model import Order, Policy, Scope, Snapshot, Workload
from strata_policy.model.resources import add
from strata_policy.placement.place import PlacementOptions
from strata_policy.state.changes import Delta
from strata_policy.testing import node

SCOPES = (
    Scope("org", limit={"gpu": 12000, "cpu": 40000}),
    Scope("team-a", "org", guarantee={"gpu": 6000}),
    Scope("team-b", "org", guarantee={"gpu": 2000}, limit={"gpu": 8000}),
    Scope("lab", "", guarantee={"cpu": 8000}),
)
NODES = (
    node("n0", cpu=16, gpus=4, model="A100", labels={"zone": "a"}),
    node("n1", cpu=16, gpus=4, model="A100", labels={"zone": "b"}),
    node("n2", cpu=8, gpus=2, model="T4", labels={"zone": "a"}),
    node("n3", cpu=32, gpus=0, labels={"zone": "b"}),
)

workloads = st.builds(
    Workload,
    id=st.sampled_from([f"w{i}" for i in range(12)]),
    scope_id=st.sampled_from(["org", "team-a", "team-b", "lab", "ghost"]),
    request=st.fixed_dictionaries(
        {
            "cpu": st.sampled_from([0, 500, 2000, 8000]),
            "gpu": st.sampled_from([0, 250, 500, 1000, 2000, 1500]),
        }
    ),
    replicas=st.integers(1, 3),
    priority=st.integers(0, 3),
    preemptible=st.booleans(),
    gpu_model=st.sampled_from(["", "A100", "T4|A100"]),
    spread_key=st.sampled_from(["", "kubernetes.io/hostname", "zone"]),
)
calls = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), st.lists(workloads, max_size=3), st.sampled_from(list(Order))),
        st.tuples(st.just("place"), st.lists(workloads, max_size=3), st.sampled_from(list(Policy))),
        st.tuples(
            st.just("release"), st.lists(st.sampled_from([f"w{i}" for i in range(12)]), max_size=3)
        ),
        st.tuples(st.just("reclaim"), workloads, st.booleans()),
    ),
    max_size=12,
)


def check_invariants(engine: Engine) -> None:
    """Nodes within capacity, devices within 1000 milli, usage = Σ workloads, limits hold."""
    _, snap = engine.snapshot("c")
    state = engine.store._slots["c"].state
    assert state is not None
    m = state.matrix
    assert (m.allocated <= m.capacity).all()
    assert (m.allocated >= 0).all()
    assert ((m.gpu_free >= -1) & (m.gpu_free <= 1000)).all()
    used_devices: dict[tuple[str, int], int] = {}
    by_node: dict[str, dict[str, int]] = {}
    for rw in snap.workloads:
        for p in rw.placements:
            by_node[p.node_id] = add(by_node.get(p.node_id, {}), rw.workload.request)
            gpu = rw.workload.request.get("gpu", 0)
            for d in p.gpu_devices:
                used_devices[(p.node_id, d)] = used_devices.get((p.node_id, d), 0) + (
                    gpu if gpu < 1000 else 1000
                )
    assert all(v <= 1000 for v in used_devices.values())
    for n in snap.nodes:
        for r, amount in by_node.get(n.id, {}).items():
            assert amount <= n.capacity.get(r, 0)
    info = engine.get_cluster("c")
    parents = {s.id: s.parent_id for s in snap.scopes}
    expected: dict[str, dict[str, int]] = {s.id: {} for s in snap.scopes}
    for rw in snap.workloads:
        scope: str = rw.workload.scope_id
        while scope:
            expected[scope] = add(expected[scope], rw.workload.total)
            scope = parents[scope]
    for status in info.scopes:
        assert {k: v for k, v in status.usage.items() if v} == {
            k: v for k, v in expected[status.id].items() if v
        }
        for r, limit in status.limit.items():
            assert status.usage.get(r, 0) <= limit


def fingerprint(engine: Engine) -> tuple[object, ...]:
    """Everything observable about the cluster, for "changed nothing" checks."""
    generation, snap = engine.snapshot("c")
    state = engine.store._slots["c"].state
    assert state is not None
    return (
        generation,
        snap,
        engine.get_cluster("c"),
        state.matrix.allocated.tobytes(),
        state.matrix.gpu_free.tobytes(),
    )


def run_call(engine: Engine, call: tuple[object, ...], dry_run: bool) -> None:
    """Apply one generated call."""
    kind = call[0]
    if kind == "admit":
        engine.admit("c", call[1], order=call[2], dry_run=dry_run)  # type: ignore[arg-type]
    elif kind == "place":
        opts = PlacementOptions(policy=call[2], seed=7)  # type: ignore[arg-type]
        engine.place("c", call[1], options=opts, dry_run=dry_run)  # type: ignore[arg-type]
    elif kind == "release":
        engine.release("c", call[1], dry_run=dry_run)  # type: ignore[arg-type]
    else:
        engine.reclaim("c", call[1], require_placement=bool(call[2]), dry_run=dry_run)  # type: ignore[arg-type]


@settings(max_examples=120)
@given(calls=calls, dry_mask=st.lists(st.booleans(), min_size=12, max_size=12))
def test_invariants_hold_and_failed_or_dry_calls_change_nothing(
    calls: list[tuple[object, ...]], dry_mask: list[bool]
) -> None:
    """Random Admit/Place/Release/Reclaim sequences keep every invariant; errors change nothing."""
    engine = Engine(clock=lambda: 5)
    engine.push_snapshot("c", Snapshot(NODES, SCOPES))
    for call, dry in zip(calls, dry_mask, strict=False):
        before = fingerprint(engine)
        try:
            run_call(engine, call, dry)
        except StrataError:
            assert fingerprint(engine) == before
            continue
        if dry:
            assert fingerprint(engine) == before
        check_invariants(engine)


@settings(max_examples=80)
@given(batch=st.lists(workloads, max_size=4, unique_by=lambda w: w.id))
def test_release_undoes_admit_and_place(batch: list[Workload]) -> None:
    """Releasing what a committed Place admitted restores usage and node allocation exactly."""
    engine = Engine(clock=lambda: 5)
    engine.push_snapshot("c", Snapshot(NODES, SCOPES))
    before = fingerprint(engine)
    try:
        result = engine.place("c", batch)
    except StrataError:
        return
    placed = [r.workload_id for r in result.results if r.placements]
    if not placed:
        return
    engine.release("c", placed)
    after = fingerprint(engine)
    assert after[1] == before[1]  # the snapshot: same nodes, scopes, no workloads
    assert after[3:] == before[3:]  # node allocation and per-device GPU free, exactly
    assert engine.get_cluster("c").scopes == before[2].scopes  # type: ignore[attr-defined]


def test_place_matches_expected_gpu_devices_after_release() -> None:
    """A fractional GPU released returns its milli to the exact device it held."""
    engine = Engine(clock=lambda: 5)
    engine.push_snapshot("c", Snapshot(NODES, SCOPES))
    w = Workload("frac", "team-a", {"gpu": 250}, gpu_model="T4")
    (r,) = engine.place("c", [w]).results
    state = engine.store._slots["c"].state
    assert state is not None
    n = state.matrix.index[r.placements[0].node_id]
    d = r.placements[0].gpu_devices[0]
    assert state.matrix.gpu_free[n, d] == 750
    engine.release("c", ["frac"])
    assert np.all(state.matrix.gpu_free[n, :2] == 1000)


@settings(max_examples=80)
@given(calls=calls, w=workloads)
def test_one_workload_dry_run_admit_answers_as_its_commit(
    calls: list[tuple[object, ...]], w: Workload
) -> None:
    """A one-workload dry-run Admit (which writes nothing) answers exactly as committing it does."""
    engine = _engine_after(calls)
    before = fingerprint(engine)
    try:
        dry = engine.admit("c", [w], dry_run=True)
    except StrataError as exc:
        assert fingerprint(engine) == before
        with pytest.raises(type(exc)):
            engine.admit("c", [w])
        return
    assert fingerprint(engine) == before
    assert engine.admit("c", [w]).results == dry.results


def _engine_after(calls: list[tuple[object, ...]], journal: object = None) -> Engine:
    """An engine holding cluster "c" after ``calls`` (the failing ones skipped)."""
    engine = Engine(clock=lambda: 5, journal=journal)  # type: ignore[arg-type]
    engine.push_snapshot("c", Snapshot(NODES, SCOPES))
    for call in calls:
        try:
            run_call(engine, call, dry_run=False)
        except StrataError:
            continue
    return engine


class _Recorder:
    """A journal that keeps every change in memory and never checkpoints."""

    def __init__(self) -> None:
        self.changes: list[object] = []

    def append(self, change: object) -> None:
        self.changes.append(change)

    def wants_checkpoint(self, cluster_id: str, generation: int) -> bool:
        return False

    def checkpoint(self, cluster_id: str, generation: int, snapshot: object) -> None:
        raise AssertionError("never asked for")


@settings(max_examples=80)
@given(
    calls=calls,
    singles=st.lists(st.tuples(workloads, st.sampled_from(["", "r1", "r2"]), st.booleans())),
)
def test_one_workload_admit_journals_exactly_what_it_admitted(
    calls: list[tuple[object, ...]], singles: list[tuple[Workload, str, bool]]
) -> None:
    """A one-workload Admit that commits journals one delta at the generation it answers,
    holding exactly the workload it admitted; a dry run, a denial, an error or a replayed
    request id journals nothing."""
    engine = _engine_after(calls, _Recorder())
    journal = engine.journal
    assert isinstance(journal, _Recorder)
    for w, request_id, dry in singles:
        before, generation = len(journal.changes), engine.snapshot("c")[0]
        try:
            result = engine.admit("c", [w], request_id=request_id, dry_run=dry)
        except StrataError:
            assert len(journal.changes) == before
            continue
        new = journal.changes[before:]
        if result.generation != generation + 1:
            assert new == []
            continue
        state = engine.store._slots["c"].state
        assert state is not None
        (change,) = new
        assert change.generation == result.generation  # type: ignore[attr-defined]
        assert change.delta == Delta(upsert_workloads=(state.workloads[w.id],))  # type: ignore[attr-defined]


@settings(max_examples=60)
@given(calls=calls)
def test_the_task_mix_moves_alike_with_a_journal_or_without(
    calls: list[tuple[object, ...]],
) -> None:
    """A commit counts the same workloads into the task mix whether it builds a journal delta
    (ordered) or not (the upserted set alone), so FGD scores do not depend on a state dir."""
    engines = _engine_after(calls, _Recorder()), _engine_after(calls)
    mixes = []
    for engine in engines:
        state = engine.store._slots["c"].state
        assert state is not None
        mixes.append((state.task_mix.total, state.task_mix.typical(1.0)))
    assert mixes[0] == mixes[1]
    assert fingerprint(engines[0]) == fingerprint(engines[1])
