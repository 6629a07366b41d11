"""UpdateSnapshot in place equals the plain rebuild, and a push of the resulting snapshot.

The in-place path (``state.incremental``) must be invisible: for any sequence of deltas (good
and bad, dry runs included) interleaved with decisions, the engine answers and holds exactly
what the plain path (apply the delta to the snapshot, validate, build again) does, and what a
fresh push of ``engine.snapshot()`` holds; the journal replays to the same state.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.engine import Engine
from strata_policy.errors import InvalidArgument, StorageUnavailable, StrataError
from strata_policy.model import Order, Policy, RunningWorkload, Snapshot, Workload
from strata_policy.model.objects import Node, Placement
from strata_policy.placement.place import PlacementOptions
from strata_policy.state.changes import Change, ChangeKind, Delta
from strata_policy.state.cluster import ClusterState
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.request_checks import Limits
from strata_policy.testing import node, running, scope, snapshot, workload

NODE_IDS = [f"n{i}" for i in range(6)]
SCOPE_IDS = ["org", "team-a", "team-b", "lab", "x"]
WORKLOAD_IDS = [f"w{i}" for i in range(8)]

BASE = snapshot(
    [
        node("n0", cpu=16, gpus=4, model="A100", labels={"zone": "a"}),
        node("n1", cpu=16, gpus=2, model="T4", labels={"zone": "b"}, extra={"rdma": 4}),
        node("n2", cpu=8, gpus=0, labels={"zone": "a"}),
        node("n3", cpu=8, gpus=4, model="A100"),
    ],
    [
        scope("org", limit={"gpu": 8000}),
        scope("team-a", "org", guarantee={"gpu": 2000}),
        scope("lab"),
    ],
    [
        running(workload("w0", "team-a", cpu=2, gpu_milli=1000), ("n0", (1,))),
        running(workload("w1", "lab", cpu=1, gpu_milli=500), ("n1", (0,))),
        running(workload("w2", "org", cpu=1)),
    ],
)


class PlainEngine(Engine):
    """An engine whose UpdateSnapshot always takes the plain path (the reference)."""

    def _update_in_place(
        self, state: ClusterState, delta: Delta, dry_run: bool, change: Change
    ) -> bool:
        """Never in place."""
        return False


class ListJournal:
    """Keeps every committed change, never checkpoints."""

    def __init__(self) -> None:
        self.changes: list[Change] = []

    def append(self, change: Change) -> None:
        """Keep it."""
        self.changes.append(change)

    def wants_checkpoint(self, cluster_id: str, generation: int) -> bool:
        """Never."""
        return False

    def checkpoint(self, cluster_id: str, generation: int, snapshot: Snapshot) -> None:
        """Not called."""
        raise AssertionError("never asked")


nodes_st = st.builds(
    node,
    st.sampled_from(NODE_IDS),
    cpu=st.sampled_from([0, 2, 8, 16]),
    gpus=st.sampled_from([0, 1, 2, 4]),
    model=st.sampled_from(["", "A100", "T4"]),
    labels=st.sampled_from([{}, {"zone": "a"}, {"zone": "b"}]),
    unschedulable=st.booleans(),
    extra=st.sampled_from([None, {"rdma": 4}, {"nvme": 0}]),
)
bad_node = st.builds(Node, st.sampled_from(["", "n1"]), st.just({"gpu": 1500}))
scopes_st = st.builds(
    scope,
    st.sampled_from(SCOPE_IDS),
    st.sampled_from(["", "org", "team-a", "lab", "ghost", "x"]),
    guarantee=st.sampled_from([None, {"gpu": 1000}, {"cpu": 99_000}]),
    limit=st.sampled_from([None, {"gpu": 8000}, {"cpu": 4000}]),
    weight=st.sampled_from([1.0, 2.0]),
)
placements_st = st.lists(
    st.builds(
        Placement,
        st.sampled_from([*NODE_IDS[:4], "ghost"]),
        st.sampled_from([(), (0,), (1,), (0, 1), (3,)]),
    ),
    max_size=2,
)
running_st = st.builds(
    lambda w, ps, at: RunningWorkload(w, tuple(ps[: w.replicas]) if ps else (), at),
    st.builds(
        workload,
        st.sampled_from(WORKLOAD_IDS),
        st.sampled_from([*SCOPE_IDS, "ghost"]),
        cpu=st.sampled_from([0, 1, 4, 12]),
        gpu_milli=st.sampled_from([0, 500, 1000, 2000, 1500]),
        replicas=st.integers(1, 2),
        extra=st.sampled_from([None, {"rdma": 2}]),
    ),
    placements_st,
    st.sampled_from([0, 5, -1]),
)
mixed_deltas = st.builds(
    Delta,
    upsert_nodes=st.lists(st.one_of(nodes_st, nodes_st, bad_node), max_size=2).map(tuple),
    remove_node_ids=st.lists(st.sampled_from([*NODE_IDS, "ghost"]), max_size=2).map(tuple),
    upsert_scopes=st.lists(scopes_st, max_size=2).map(tuple),
    remove_scope_ids=st.lists(st.sampled_from(SCOPE_IDS), max_size=1).map(tuple),
    upsert_workloads=st.lists(running_st, max_size=3).map(tuple),
    remove_workload_ids=st.lists(st.sampled_from(WORKLOAD_IDS), max_size=2).map(tuple),
)
# Mostly-valid deltas of one kind each, so that the in-place path is taken often (a random mix
# is usually refused, and then both engines run the plain path).
fitting_running = st.builds(
    lambda w, n, d: RunningWorkload(w, (Placement(n, d if w.request.get("gpu") else ()),)),
    st.builds(
        workload,
        st.sampled_from(WORKLOAD_IDS),
        st.sampled_from(["team-a", "lab", "org"]),
        cpu=st.sampled_from([0, 1, 2]),
        gpu_milli=st.sampled_from([0, 0, 250, 1000]),
    ),
    st.sampled_from(["n0", "n1"]),
    st.sampled_from([(0,), (1,)]),
) | st.builds(
    RunningWorkload,
    st.builds(
        workload, st.sampled_from(WORKLOAD_IDS), st.sampled_from(["team-a", "lab"]), cpu=st.just(1)
    ),
)
workload_deltas = st.builds(
    Delta,
    upsert_workloads=st.lists(fitting_running, max_size=3, unique_by=lambda rw: rw.workload.id).map(
        tuple
    ),
    remove_workload_ids=st.lists(st.sampled_from(WORKLOAD_IDS[:4]), max_size=2, unique=True).map(
        tuple
    ),
)
tweaked_nodes = st.builds(
    lambda n, cpu, gpus, cordoned, zone: dataclasses.replace(
        n,
        capacity={**n.capacity, "cpu": cpu, "gpu": gpus * 1000},
        unschedulable=cordoned,
        labels={"zone": zone},
    ),
    st.sampled_from(BASE.nodes[:2]),
    st.sampled_from([1000, 8000, 16000]),
    st.sampled_from([0, 1, 2, 4]),
    st.booleans(),
    st.sampled_from(["a", "b"]),
)  # same model and columns: mostly rows patched in place (``node_changes._patched``)
node_deltas = st.builds(
    Delta,
    upsert_nodes=st.lists(
        st.one_of(nodes_st, tweaked_nodes, tweaked_nodes), max_size=2, unique_by=lambda n: n.id
    ).map(tuple),
    remove_node_ids=st.lists(st.sampled_from(NODE_IDS[2:]), max_size=1).map(tuple),
)
scope_deltas = st.builds(
    Delta,
    upsert_scopes=st.lists(
        st.builds(
            scope,
            st.sampled_from(SCOPE_IDS),
            st.sampled_from(["", "org", "org", "lab"]),
            guarantee=st.sampled_from([None, {"gpu": 1000}]),
            limit=st.sampled_from([None, {"gpu": 8000}, {"cpu": 1000}]),
        ),
        max_size=2,
        unique_by=lambda s: s.id,
    ).map(tuple),
    remove_scope_ids=st.lists(st.sampled_from(["x", "team-b", "lab"]), max_size=1).map(tuple),
)
deltas = st.one_of(mixed_deltas, workload_deltas, workload_deltas, node_deltas, scope_deltas)
pending = st.builds(
    workload,
    st.sampled_from(["p0", "p1", "w0"]),
    st.sampled_from(["team-a", "lab", "org"]),
    cpu=st.sampled_from([1, 4]),
    gpu_milli=st.sampled_from([0, 500, 1000]),
    replicas=st.integers(1, 2),
    spread_key=st.sampled_from(["", "kubernetes.io/hostname"]),
    node_selector=st.sampled_from([{}, {"zone": "a"}]),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("update"), deltas, st.booleans()),
        st.tuples(st.just("update"), deltas, st.just(False)),
        st.tuples(st.just("place"), pending, st.sampled_from(list(Policy))),
        st.tuples(st.just("admit"), pending, st.just(Order.FIFO)),
        st.tuples(st.just("release"), st.sampled_from(["p0", "p1", "w1"]), st.just(None)),
    ),
    min_size=1,
    max_size=8,
)


# NodeMatrix slots that are caches or cache stamps, not state: every other slot is compared, so
# a slot added to the matrix is compared unless it is named here.
CACHE_SLOTS = frozenset(
    {"epoch", "journal", "journal_len", "lineage", "placement_index", "version"}
)  # fmt: skip


def state_of(engine: Engine) -> tuple[object, ...]:
    """Everything the cluster holds: snapshot, info, every matrix slot that is state, the quota
    tree's usage, the schedulable capacity."""
    state = engine.store._slots["c"].state
    assert state is not None
    m, tree = state.matrix, state.tree
    matrix = {
        name: value.tolist() if isinstance(value, np.ndarray) else value
        for name in NodeMatrix.__slots__
        if name not in CACHE_SLOTS
        for value in (getattr(m, name),)
    }
    usage = {s: (dict(tree.usage(s)), dict(tree.own_usage(s))) for s in tree.scopes}
    return (
        engine.snapshot("c"),
        engine.get_cluster("c"),
        matrix,
        (usage, dict(tree.total_usage()), dict(tree.scopes), tree.statuses({})),
        state.capacity,
    )


def run_step(engine: Engine, step: tuple[Any, ...]) -> object:
    """One step; its answer, or the error it raised (type, text and violations)."""
    kind, arg, extra = step
    try:
        if kind == "update":
            return engine.update_snapshot("c", arg, dry_run=extra)
        if kind == "place":
            opts = PlacementOptions(policy=extra, seed=3)
            return engine.place("c", [arg], options=opts, now_ms=7)
        if kind == "admit":
            return engine.admit("c", [arg], order=extra, now_ms=7)
        return engine.release("c", [arg])
    except StrataError as err:
        return (type(err).__name__, str(err), getattr(err, "violations", None))


@settings(max_examples=150, deadline=None)
@given(steps=steps)
def test_deltas_in_place_equal_the_plain_rebuild(steps: list[tuple[Any, ...]]) -> None:
    """Every step answers, raises and leaves the state as the plain path does."""
    journal = ListJournal()
    live, plain = Engine(journal=journal, clock=lambda: 7), PlainEngine(clock=lambda: 7)
    for engine in (live, plain):
        engine.push_snapshot("c", BASE)
    for step in steps:
        assert run_step(live, step) == run_step(plain, step), step
        assert state_of(live) == state_of(plain), step
    # The journal replays to the same state, through the same in-place path.
    replayed = Engine()
    for change in [Change("c", 1, ChangeKind.PUSH, snapshot=BASE), *journal.changes]:
        replayed.restore(change)
    assert state_of(replayed) == state_of(live)


@settings(max_examples=60, deadline=None)
@given(
    updates=st.lists(deltas, min_size=1, max_size=6),
    probe=pending,
    policy=st.sampled_from(list(Policy)),
)
def test_deltas_leave_what_a_push_of_the_result_gives(
    updates: list[Delta], probe: Workload, policy: Policy
) -> None:
    """After any deltas, a fresh push of ``engine.snapshot()`` holds and answers the same."""
    live = Engine(clock=lambda: 7)
    live.push_snapshot("c", BASE)
    for delta in updates:
        run_step(live, ("update", delta, False))
    pushed = Engine(clock=lambda: 7)
    pushed.push_snapshot("c", live.snapshot("c")[1])
    live_state, pushed_state = live.store._slots["c"].state, pushed.store._slots["c"].state
    assert live_state is not None
    assert pushed_state is not None
    pushed_state.task_mix = live_state.task_mix.copy()  # history, not state: the same mix
    pushed_state.generation = live_state.generation
    assert state_of(pushed) == state_of(live)
    opts = PlacementOptions(policy=policy, seed=3)
    for engine_calls in (
        lambda e: e.admit("c", [probe], now_ms=7, dry_run=True),
        lambda e: e.place("c", [probe], options=opts, now_ms=7),
        lambda e: e.reclaim("c", dataclasses.replace(probe, id="r", priority=9), dry_run=True),
        lambda e: e.get_cluster("c"),
    ):
        answers = []
        for engine in (live, pushed):
            try:
                answers.append(engine_calls(engine))
            except StrataError as err:
                answers.append((type(err).__name__, str(err)))
        assert answers[0] == answers[1]


CASES = [
    pytest.param(
        Delta(upsert_workloads=(running(workload("w9", "lab", cpu=1), "n2"),)),
        {"workloads": ["w0", "w1", "w2", "w9"]},
        id="new workload: appended to the admission order",
    ),
    pytest.param(
        Delta(
            upsert_workloads=(
                running(workload("w0", "team-a", cpu=3, gpu_milli=1000), ("n0", (2,))),
            )
        ),
        {"workloads": ["w0", "w1", "w2"]},
        id="upserted workload keeps its place",
    ),
    pytest.param(
        Delta(remove_workload_ids=("w0",), upsert_workloads=(running(workload("w0", "lab")),)),
        {"workloads": ["w1", "w2", "w0"]},
        id="removed then upserted workload goes last",
    ),
    pytest.param(
        Delta(upsert_nodes=(node("n4", cpu=4),), remove_node_ids=("n2",)),
        {"nodes": ["n0", "n1", "n3", "n4"]},
        id="new node appended, removed node's row closes up",
    ),
    pytest.param(
        Delta(upsert_nodes=(node("n0", cpu=16, gpus=4, unschedulable=True),)),
        {"nodes": ["n0", "n1", "n2", "n3"]},
        id="cordoned node keeps its row",
    ),
    pytest.param(
        Delta(upsert_nodes=(node("n1", cpu=16, gpus=2, model="A100", extra={"rdma": 4}),)),
        {"nodes": ["n0", "n1", "n2", "n3"]},
        id="the last T4 node becomes an A100: the model list shrinks",
    ),
    pytest.param(
        Delta(upsert_nodes=(node("n1", cpu=16, gpus=2, model="T4"),)),
        {"nodes": ["n0", "n1", "n2", "n3"]},
        id="the last node listing rdma drops it: the column goes",
    ),
    pytest.param(
        Delta(upsert_scopes=(scope("team-b", "org"), scope("lab", limit={"cpu": 9000}))),
        {"scopes": ["org", "team-a", "lab", "team-b"]},
        id="new scope appended, patched scope in place",
    ),
]


@pytest.mark.parametrize(("delta", "order"), CASES)
def test_where_upserted_and_removed_items_go(delta: Delta, order: dict[str, list[str]]) -> None:
    """Items keep, take or leave their place as the plain path's snapshot orders them, and the
    state is what a push of the resulting snapshot builds."""
    engine = Engine()
    engine.push_snapshot("c", BASE)
    engine.update_snapshot("c", delta)
    snap = engine.snapshot("c")[1]
    got = {
        "nodes": [n.id for n in snap.nodes],
        "scopes": [s.id for s in snap.scopes],
        "workloads": [rw.workload.id for rw in snap.workloads],
    }
    assert {k: got[k] for k in order} == order
    pushed = Engine()
    pushed.push_snapshot("c", snap)
    pushed.store._slots["c"].state.generation = 2  # type: ignore[union-attr]  # pushed: it holds one
    assert state_of(pushed) == state_of(engine)


BAD = [
    pytest.param(Delta(remove_node_ids=("n0",)), "remove_node_ids[0]", id="node still runs"),
    pytest.param(Delta(remove_scope_ids=("lab",)), "remove_scope_ids[0]", id="scope still holds"),
    pytest.param(Delta(remove_workload_ids=("nope",)), "remove_workload_ids[0]", id="unknown id"),
    pytest.param(
        Delta(upsert_nodes=(node("n0", cpu=1, gpus=4),)),
        "snapshot.workloads[0].placements[0]",
        id="node shrunk below what runs on it",
    ),
    pytest.param(
        Delta(upsert_nodes=(node("n0", cpu=16, gpus=1),)),
        "snapshot.workloads[0].placements[0]",
        id="node lost a device in use",
    ),
    pytest.param(
        Delta(upsert_nodes=(node("n0", cpu=16, gpus=1, model="A100", labels={"zone": "a"}),)),
        "snapshot.workloads[0].placements[0]",
        id="node patched in place lost a device in use beside a free one",
    ),
    pytest.param(
        Delta(upsert_nodes=(node("n0", cpu=1, gpus=4, model="A100", labels={"zone": "a"}),)),
        "snapshot.workloads[0].placements[0]",
        id="node patched in place below what runs on it",
    ),
    pytest.param(
        Delta(upsert_nodes=(node("n1", cpu=16, model="T4", extra={"rdma": 4}),)),
        "snapshot.workloads[1].placements[0]",
        id="node patched in place lost a device in use",
    ),
    pytest.param(
        Delta(upsert_workloads=(running(workload("w9", "lab", cpu=99), "n2"),)),
        "snapshot.workloads[3].placements[0]",
        id="upserted workload does not fit",
    ),
    pytest.param(
        Delta(upsert_workloads=(running(workload("w9", "lab", cpu=1), "ghost"),)),
        "snapshot.workloads[3].placements[0].node_id",
        id="upserted workload on an unknown node",
    ),
    pytest.param(
        Delta(upsert_workloads=(running(workload("w9", "lab"), admitted_at_ms=-1),)),
        "snapshot.workloads[3].admitted_at_ms",
        id="upserted workload admitted before the epoch",
    ),
    pytest.param(
        Delta(upsert_workloads=(running(workload("w9", "lab", gpu_milli=2000), ("n3", (1, 1))),)),
        "snapshot.workloads[3].placements[0].gpu_devices",
        id="upserted workload naming a device twice",
    ),
    pytest.param(
        Delta(upsert_workloads=(running(workload("w9", "lab", replicas=2), "n2"),)),
        "snapshot.workloads[3].placements",
        id="upserted workload with fewer placements than replicas",
    ),
    pytest.param(
        Delta(upsert_scopes=(scope("org", "team-a"),)),
        "snapshot.scopes[0].parent_id",
        id="cycle",
    ),
]


@pytest.mark.parametrize(("delta", "field"), BAD)
def test_bad_delta_names_the_field_and_changes_nothing(delta: Delta, field: str) -> None:
    """A bad delta raises the plain path's error (same field path) and changes nothing."""
    engine = Engine()
    engine.push_snapshot("c", BASE)
    before = state_of(engine)
    with pytest.raises(InvalidArgument) as err:
        engine.update_snapshot("c", delta)
    assert err.value.violations[0].field == field
    assert state_of(engine) == before


def test_size_limit_is_checked_on_the_result() -> None:
    """A delta taking the cluster past a size limit fails whole, as the plain path does."""
    engine = Engine(limits=Limits(max_workloads=3))
    engine.push_snapshot("c", BASE)
    before = state_of(engine)
    with pytest.raises(StrataError, match="max_workloads"):
        engine.update_snapshot("c", Delta(upsert_workloads=(running(workload("w9", "lab")),)))
    assert state_of(engine) == before


def test_failed_journal_write_rolls_the_delta_back() -> None:
    """A journal that fails leaves the state and generation as they were (UNAVAILABLE)."""

    class Failing(ListJournal):
        def append(self, change: Change) -> None:
            """Fail."""
            raise OSError("disk full")

    engine = Engine(journal=Failing())
    engine.restore(Change("c", 1, ChangeKind.PUSH, snapshot=BASE))
    before = state_of(engine)
    with pytest.raises(StorageUnavailable, match="disk full"):
        engine.update_snapshot("c", Delta(upsert_workloads=(running(workload("w9", "lab")),)))
    assert state_of(engine) == before


def test_node_running_a_replica_that_requests_nothing_is_not_removed() -> None:
    """A replica requesting nothing still runs on its node: removing the node is refused."""
    engine = Engine()
    engine.push_snapshot("c", BASE)
    engine.update_snapshot("c", Delta(upsert_workloads=(running(workload("w9", "lab"), "n2"),)))
    before = state_of(engine)
    with pytest.raises(InvalidArgument) as err:
        engine.update_snapshot("c", Delta(remove_node_ids=("n2",)))
    assert err.value.violations[0].field == "remove_node_ids[0]"
    assert state_of(engine) == before


IN_PLACE = [
    pytest.param(Delta(upsert_workloads=(running(workload("w9", "lab", cpu=1), "n2"),)), True,
                 id="pod started"),
    pytest.param(Delta(remove_workload_ids=("w1",)), True, id="pod deleted"),
    pytest.param(Delta(upsert_workloads=(running(workload("w0", "team-a", cpu=1)),)), True,
                 id="pod changed"),
    pytest.param(Delta(upsert_nodes=(dataclasses.replace(BASE.nodes[0], unschedulable=True),)),
                 False, id="node cordoned"),
    pytest.param(Delta(upsert_nodes=(node("n4", cpu=4),)), False, id="node added"),
    pytest.param(Delta(remove_node_ids=("n2",)), False, id="node removed"),
    pytest.param(Delta(upsert_nodes=BASE.nodes[:2]), True, id="nodes upserted unchanged"),
    pytest.param(Delta(upsert_scopes=(scope("lab", limit={"cpu": 9000}),)), True,
                 id="scope patched"),
    pytest.param(Delta(upsert_scopes=(scope("x", "lab"),)), True, id="scope added"),
]  # fmt: skip


@pytest.mark.parametrize(("delta", "same_matrix"), IN_PLACE)
def test_valid_deltas_are_applied_in_place(delta: Delta, same_matrix: bool) -> None:
    """A valid delta changes the live state rather than building a new one; pod and scope
    events keep the node matrix and its placement caches."""
    engine = Engine()
    engine.push_snapshot("c", BASE)
    state = engine.store._slots["c"].state
    assert state is not None
    matrix = state.matrix
    engine.update_snapshot("c", delta)
    assert engine.store._slots["c"].state is state
    assert (state.matrix is matrix) == same_matrix
