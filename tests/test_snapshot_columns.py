"""A snapshot pushed as columns (``service.snapshot_decoder``, ``state.columnar_build``) gives
exactly the state, the answers and the errors of the same snapshot converted one by one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strata.policy.v1 import policy_service_pb2 as svc

from strata_policy.engine import Engine
from strata_policy.errors import InvalidArgument
from strata_policy.model import Node, Placement, RunningWorkload, Snapshot, new_node
from strata_policy.service import convert, snapshot_decoder
from strata_policy.state import request_checks, running_columns, validate
from strata_policy.state.changes import Delta
from strata_policy.state.durable import SqliteJournal
from strata_policy.state.running_columns import RunningColumns
from strata_policy.testing import node, resources, running, scope, snapshot, workload

NODES = [node("n1", cpu=16, gpus=4, model="A100"), node("n2", cpu=16, gpus=2, model="T4")]
SCOPES = [scope("org", limit=resources(cpu=64)), scope("team", "org"), scope("lab", "org")]
GPU_JOB = workload("g", "team", cpu=2, gpu_milli=2000, replicas=2, gpu_model="A100|T4")


def columnar(snap: Snapshot) -> Snapshot:
    """``snap`` through the wire and the columns, as the server reads a push: the request's
    bytes split by ``decode_push``, the running workloads read from them."""
    message = svc.PushSnapshotRequest(cluster_id="c", snapshot=convert.snapshot_to_proto(snap))
    decoded = snapshot_decoder.decode_push(message.SerializeToString())
    assert decoded.body is not None
    return convert.snapshot_from_push(decoded)


def from_message(snap: Snapshot) -> Snapshot:
    """``snap`` through a parsed message and the columns (``convert.snapshot_from_proto``)."""
    return convert.snapshot_from_proto(convert.snapshot_to_proto(snap))


def plain(snap: Snapshot) -> Snapshot:
    """``snap`` through the wire, converted one workload at a time."""
    m = convert.snapshot_to_proto(snap)
    out = convert.snapshot_from_proto(m)
    return Snapshot(out.nodes, out.scopes, convert.plain_running_from_proto(m))


def outcome(snap: Snapshot) -> dict[str, Any]:
    """Everything a pushed snapshot shows: the error, or the state and some answers."""
    engine = Engine(clock=lambda: 1000)
    try:
        engine.push_snapshot("c", snap)
    except InvalidArgument as e:
        return {"error": [(v.field, v.description) for v in e.violations]}
    with engine.store.slot("c") as slot:
        state = slot.state
        assert state is not None
        matrix = state.matrix
        arrays = [matrix.allocated, matrix.free, matrix.gpu_free, matrix.version, matrix.replicas]
        found: dict[str, Any] = {
            "matrix": [a.tolist() for a in arrays],
            "journal": matrix.journal[: matrix.journal_len].tolist(),
            "usage": {s: state.tree.usage(s) for s in state.tree.scopes},
            "mix": list(state.task_mix._counts.items()),
            "counts": state.workload_counts(),
            "held": list(state.workloads),
        }
    found["cluster"] = engine.get_cluster("c")
    probes = [workload("p1", "team", cpu=40), workload("p2", "lab", gpu_milli=1000)]
    found["admit"] = engine.admit("c", probes, dry_run=True).results
    found["place"] = engine.place("c", probes[1:], dry_run=True).results
    found["snapshot"] = engine.snapshot("c")
    return found


def same(snap: Snapshot) -> None:
    """The columnar paths' outcome (from bytes, from a message) is the plain path's."""
    want = outcome(plain(snap))
    assert outcome(columnar(snap)) == want
    assert outcome(from_message(snap)) == want


CASES = [
    pytest.param([], id="no workloads"),
    pytest.param([running(workload("a", "team", cpu=1), "n1")], id="one placed"),
    pytest.param([running(workload("a", "team", cpu=1), admitted_at_ms=7)], id="admitted only"),
    pytest.param([running(GPU_JOB, ("n1", (0, 1)), ("n2", (1, 0)))], id="gang on devices"),
    pytest.param(
        [
            running(
                workload("s", "lab", gpu_milli=500, priority=3, preemptible=False), ("n2", (1,))
            ),
            running(workload("t", "lab", gpu_milli=250, node_selector={"zone": "a"}), ("n2", (1,))),
            running(
                workload("u", "team", cpu=1, spread_key="kubernetes.io/hostname", replicas=2),
                "n1",
                "n2",
            ),
        ],
        id="shared device, selector, spread",
    ),
    pytest.param(
        [running(workload(f"w{i}", "team", cpu=1, extra={"x": 0}), "n1") for i in range(9)],
        id="zero amount of a resource no node has",
    ),
    pytest.param([running(workload("a", "nope", cpu=1), "n1")], id="bad: unknown scope"),
    pytest.param([running(workload("a", "team", cpu=1), "n9")], id="bad: unknown node"),
    pytest.param([running(workload("a", "team", cpu=1), "n1")] * 2, id="bad: repeated id"),
    pytest.param([running(workload("", "team", cpu=1), "n1")], id="bad: empty id"),
    pytest.param(
        [running(workload(i, "team", cpu=1), "n1") for i in ("a", "b", "c", "a")],
        id="bad: repeated id, far apart",
    ),
    pytest.param(
        [running(workload(i, "team", cpu=1), "n1") for i in ("w1", "w2", "w\u00e9", "w\u00e8")],
        id="ids differing in one byte",
    ),
    pytest.param([running(workload("", "team", cpu=1), "n1")] * 2, id="bad: empty id twice"),
    pytest.param(
        [running(workload(i * 253, "team", cpu=1), "n1") for i in ("x", "y", "\u00e9")],
        id="ids of 253 characters",
    ),
    pytest.param([running(workload("x" * 254, "team", cpu=1), "n1")], id="bad: huge id"),
    pytest.param([running(workload("x" * 300, "team", cpu=1), "n1")] * 2, id="bad: huge id twice"),
    pytest.param([running(workload("a", "team", cpu=1, replicas=2), "n1")], id="bad: count"),
    pytest.param([running(workload("a", "team", cpu=1), admitted_at_ms=-1)], id="bad: admitted"),
    pytest.param([running(workload("a", "team", cpu=17), "n1")], id="bad: does not fit"),
    pytest.param([running(workload("a", "team", gpu_milli=1500), "n1")], id="bad: gpu amount"),
    pytest.param(
        [running(workload("a", "team", extra={"x": 1}), "n1")], id="bad: no such resource"
    ),
    pytest.param([running(workload("a", "team", gpu_milli=1000), ("n1", (7,)))], id="bad: device"),
    pytest.param(
        [running(workload("a", "team", gpu_milli=2000), ("n1", (1, 1)))], id="bad: same device"
    ),
    pytest.param(
        [running(workload("a", "team", gpu_milli=1000), ("n1", (-1,)))], id="bad: device -1"
    ),
    pytest.param(
        [running(workload("a", "team", extra={"x": 2**61}, replicas=4))], id="bad: overflow"
    ),
    pytest.param(
        [running(workload("a", "team", gpu_milli=5000), ("n1", (0, 1, 2, 3, 4)))],
        id="bad: more devices than any node",
    ),
]


@pytest.mark.parametrize(
    "workloads",
    [
        pytest.param(
            [running(workload("a", "team", gpu_milli=5000), ("n1", tuple(range(5))))],
            id="a placement wider than the widest node",
        ),
        pytest.param(
            [running(workload(f"w{i}", "team", extra={f"x{i}": 1})) for i in range(3)],
            id="resources no node has",
        ),
    ],
)
def test_what_no_node_could_hold_sizes_no_array(workloads: list[RunningWorkload]) -> None:
    """A request naming more devices or resources than the nodes have takes the plain path
    (which refuses it) before the columns size an array by it: a client cannot make the
    server allocate placements x devices or workloads x resources of its choosing."""
    m = convert.snapshot_to_proto(snapshot(NODES, SCOPES, workloads))
    nodes = tuple(convert.node_from_proto(n) for n in m.nodes)
    scopes = tuple(convert.scope_from_proto(x) for x in m.scopes)
    assert snapshot_decoder.running_columns(m, nodes, scopes, convert.running_from_proto) is None
    same(snapshot(NODES, SCOPES, workloads))


@pytest.mark.parametrize("workloads", CASES)
def test_columns_match_plain_path(workloads: list[RunningWorkload]) -> None:
    """Each named snapshot gives the same state, answers or violations on both paths."""
    same(snapshot(NODES, SCOPES, workloads))


def test_bad_nodes_walk_every_workload() -> None:
    """A bad node list reports the workloads' violations too, as the plain path does."""
    nodes = [*NODES, node("n1")]
    snap = snapshot(nodes, SCOPES, [running(workload("a", "nope", cpu=1), "n1")])
    assert outcome(columnar(snap)) == outcome(plain(snap))
    assert len(outcome(columnar(snap))["error"]) == 2


def test_workloads_are_made_only_when_read() -> None:
    """A pushed snapshot holds row numbers until a workload is read; reading one makes it."""
    snap = snapshot(
        NODES, SCOPES, [running(workload(f"w{i}", "team", cpu=1), "n1") for i in range(5)]
    )
    engine = Engine()
    engine.push_snapshot("c", columnar(snap))
    with engine.store.slot("c") as slot:
        assert slot.state is not None
        table = slot.state.workloads
        assert all(type(v) is int for v in table._items.values())
        assert table["w3"] == snap.workloads[3]
        assert sum(type(v) is not int for v in table._items.values()) == 1
        assert slot.state.workload_counts() == {"team": 5}


names = st.sampled_from(["a", "b", "c", "", "a-very-long-" + "x" * 250])
amount = st.one_of(st.integers(0, 3000), st.sampled_from([-1, 1500, 2**62, 2**62 + 1]))
request = st.dictionaries(st.sampled_from(["cpu", "gpu", "memory", "x", ""]), amount, max_size=3)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    """Small snapshots over ``NODES`` and ``SCOPES``, valid and not."""
    rws = []
    for _ in range(draw(st.integers(0, 6))):
        w = workload(draw(names), draw(st.sampled_from(["org", "team", "lab", "zz"])))
        replicas = draw(st.sampled_from([1, 1, 2, 3, 0, -1]))
        w = type(w)(
            w.id, w.scope_id, draw(request), replicas, draw(st.integers(-2, 2)),
            draw(st.booleans()), draw(st.sampled_from([{}, {"zone": "a"}])),
            draw(st.sampled_from(["", "A100", "T4|A100"])),
            draw(st.sampled_from(["", "kubernetes.io/hostname"])), draw(st.integers(0, 9)),
        )  # fmt: skip
        count = draw(st.sampled_from([0, max(replicas, 0), 1]))
        placements = tuple(
            Placement(
                draw(st.sampled_from(["n1", "n2", "n3"])),
                tuple(draw(st.lists(st.integers(-1, 4), max_size=2))),
            )
            for _ in range(count)
        )
        rws.append(RunningWorkload(w, placements, draw(st.sampled_from([0, 5, -1]))))
    return snapshot(NODES, SCOPES, rws)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_columns_match_plain_path_for_any_snapshot(snap: Snapshot) -> None:
    """Any small snapshot, valid or not, gives the same outcome on both paths."""
    same(snap)


def test_columns_are_small_beside_objects() -> None:
    """The columns of 2,000 workloads are arrays, not 2,000 objects (none made by a push)."""
    snap = snapshot(
        NODES, SCOPES, [running(workload(f"w{i}", "team", cpu=0.001), "n1") for i in range(2000)]
    )
    cols = columnar(snap).workloads
    assert isinstance(cols, RunningColumns)
    engine = Engine()
    engine.push_snapshot("c", Snapshot(snap.nodes, snap.scopes, cols))
    assert all(made is None for made in cols._made)
    assert np.array_equal(cols.placement_node, np.zeros(2000))


@pytest.mark.parametrize("every", [1, 100])
def test_journal_recovers_a_columnar_push(tmp_path: Path, every: int) -> None:
    """A columnar push, journaled (and checkpointed after later commits), recovers exactly."""
    rws = [
        running(workload(f"w{i}", "team", cpu=1, gpu_milli=250), ("n2", (i % 2,))) for i in range(6)
    ]
    journal = SqliteJournal(tmp_path, every=every)
    engine = Engine(clock=lambda: 1000, journal=journal)
    engine.push_snapshot("c", columnar(snapshot(NODES, SCOPES, rws)))
    engine.admit("c", [workload("late", "lab", cpu=1)])
    engine.release("c", ["w2"])
    journal.close()
    again = SqliteJournal(tmp_path, every=every)
    recovered = Engine(clock=lambda: 1000)
    for change in again.restore():
        recovered.restore(change)
    again.close()
    assert recovered.snapshot("c") == engine.snapshot("c")
    assert recovered.get_cluster("c") == engine.get_cluster("c")


def test_bounds_are_validates() -> None:
    """The columnar checks use ``state.validate``'s and ``state.request_checks``' bounds."""
    assert (running_columns.MAX_ID_LENGTH, running_columns.MAX_REPLICAS) == (
        request_checks.MAX_ID_LENGTH,
        request_checks.MAX_REPLICAS,
    )
    assert (running_columns.MAX_NODE_RESOURCES, running_columns.MAX_DEVICES_PER_NODE) == (
        validate.MAX_NODE_RESOURCES,
        validate.MAX_DEVICES_PER_NODE,
    )


capacity = st.dictionaries(
    st.sampled_from(["cpu", "gpu", "memory", ""]),
    st.sampled_from([0, 1, 1000, 1500, 65_000, -1, 2**62, 2**61 + 1]),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3", ""]), capacity), max_size=5))
def test_nodes_plainly_valid_only_when_the_walk_finds_nothing(
    spec: list[tuple[str, dict[str, int]]],
) -> None:
    """``nodes_plainly_valid`` never vouches for nodes the field-by-field walk refuses."""
    nodes = [Node(i, c) for i, c in spec]
    walked = validate.snapshot_shape(Snapshot(tuple(nodes)))
    if running_columns.nodes_plainly_valid(nodes):
        assert walked == []


def test_plain_nodes_are_vouched_for() -> None:
    """Valid nodes sharing their capacity dicts are vouched for without a walk."""
    shared = NODES[0].capacity
    assert running_columns.nodes_plainly_valid([Node(f"n{i}", shared) for i in range(50)])
    assert not running_columns.nodes_plainly_valid([Node("n", shared), Node("n", shared)])


DELTAS = [
    pytest.param(Delta(remove_workload_ids=("w1",)), id="remove a workload"),
    pytest.param(
        Delta(upsert_workloads=(running(workload("w2", "lab", cpu=2), "n2"),)),
        id="replace a workload (keeps its place)",
    ),
    pytest.param(
        Delta(upsert_workloads=(running(workload("new", "team", cpu=1), "n1"),)), id="add one"
    ),
    pytest.param(Delta(upsert_nodes=(node("n3", cpu=8),)), id="add a node"),
    pytest.param(Delta(remove_node_ids=("n2",)), id="bad: remove a node in use"),
    pytest.param(Delta(remove_scope_ids=("lab",)), id="remove a scope"),
]


@pytest.mark.parametrize("delta", DELTAS)
def test_updates_after_a_columnar_push_match(delta: Delta) -> None:
    """UpdateSnapshot on a state pushed as columns leaves what it leaves on a plain one."""
    rws = [running(workload(f"w{i}", "team", cpu=1), "n1" if i % 2 else "n2") for i in range(4)]
    snap = snapshot(NODES, SCOPES, rws)
    answers: list[list[Any]] = []
    for pushed in (columnar(snap), plain(snap)):
        engine = Engine(clock=lambda: 1000)
        engine.push_snapshot("c", pushed)
        answer: list[Any] = []
        try:
            engine.update_snapshot("c", delta)
        except InvalidArgument as e:
            answer.append([(v.field, v.description) for v in e.violations])
        answers.append([*answer, engine.snapshot("c"), engine.get_cluster("c")])
    assert answers[0] == answers[1]


def _admit_held(engine: Engine) -> Any:
    return engine.admit("c", [workload("w2", "team", cpu=1)]).results


def _release(engine: Engine) -> Any:
    return engine.release("c", ["w3", "missing", "w0"])


def _remove(engine: Engine) -> Any:
    return engine.update_snapshot("c", Delta(remove_workload_ids=("w1",)))


def _upsert(engine: Engine) -> Any:
    rw = running(workload("w2", "lab", cpu=2), "n2")
    return engine.update_snapshot("c", Delta(upsert_workloads=(rw,)))


def _place_held(engine: Engine) -> Any:
    return engine.place("c", workload_ids=["w1", "missing"], dry_run=True).results


LOOKUPS = [
    pytest.param(_admit_held, id="Admit of a held id"),
    pytest.param(_release, id="Release"),
    pytest.param(_remove, id="UpdateSnapshot removal"),
    pytest.param(_upsert, id="UpdateSnapshot upsert"),
    pytest.param(_place_held, id="Place by ids"),
    pytest.param(lambda engine: engine.get_cluster("c"), id="GetCluster"),
]


@pytest.mark.parametrize("first", LOOKUPS)
def test_first_lookup_by_id_after_a_columnar_push_matches(first: Any) -> None:
    """The first call to look a pushed id up (through the pushed ids' hash index, no id map
    made) answers and leaves what it does after a plain push, and so does every call after."""
    rws = [running(workload(f"w{i}", "team", cpu=1), "n1" if i % 2 else "n2") for i in range(4)]
    snap = snapshot(NODES, SCOPES, rws)
    answers: list[list[Any]] = []
    for pushed in (columnar(snap), plain(snap)):
        engine = Engine(clock=lambda: 1000)
        engine.push_snapshot("c", pushed)
        answer: list[Any] = []
        for call in (first, _admit_held, _release, _upsert, _remove):
            try:
                answer.append(call(engine))
            except InvalidArgument as e:
                answer.append([(v.field, v.description) for v in e.violations])
        answers.append([*answer, engine.snapshot("c"), engine.get_cluster("c")])
    assert answers[0] == answers[1]


def test_a_columnar_push_makes_no_id_map() -> None:
    """A pushed state finds its ids by their bytes: neither the push nor a call that looks ids
    up (an Admit, a Release) decodes them or makes a dict of them; a reader of every entry
    (a snapshot) makes the dicts once, the plain path's."""
    rws = [running(workload(f"w{i}", "team", cpu=1), "n1") for i in range(3)]
    engine = Engine(clock=lambda: 1000)
    pushed = columnar(snapshot(NODES, SCOPES, rws))
    engine.push_snapshot("c", pushed)
    assert isinstance(pushed.workloads, RunningColumns)
    engine.admit("c", [workload("new", "team", cpu=1)])
    engine.release("c", ["w0", "missing"])
    with engine.store.slot("c") as slot:
        state = slot.state
        assert state is not None
        assert callable(pushed.workloads._ids)  # not even decoded
        assert state.workloads._index is not None
        assert len(state.workloads._items) <= 2  # what changed: the new workload, a made row
        assert state._seq._index is not None  # type: ignore[attr-defined]
    assert [w.workload.id for w in engine.snapshot("c")[1].workloads] == ["w1", "w2", "new"]
    with engine.store.slot("c") as slot:
        state = slot.state
        assert state is not None
        assert state.workloads._index is None
        assert dict(state._seq) == {"w1": 1, "w2": 2, "new": 3}


def test_new_node_is_the_dataclass_value() -> None:
    """``new_node`` builds the value ``Node(...)`` builds, and a wire node converts to it."""
    fields = ("n", {"cpu": 1, "gpu": 2000}, {"zone": "a"}, True, "A100")
    built = new_node(*fields)
    assert type(built) is Node
    assert built == Node(*fields)
    assert convert.node_from_proto(convert.node_to_proto(built)) == built
    with pytest.raises(AttributeError):
        built.id = "x"  # type: ignore[misc]  # frozen on purpose
