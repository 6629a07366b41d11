"""Idempotency (DESIGN §4): per caller, committed calls only, the same id with another body
refused; ids bounded in length; nothing kept for clusters that do not exist."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.engine import Engine
from strata_policy.errors import ClusterNotFound, InvalidArgument, RequestIdReused
from strata_policy.service.client import Client, RpcError
from strata_policy.service.config import ServerConfig
from strata_policy.service.server import Server
from strata_policy.state.changes import Delta
from strata_policy.testing import node, running, scope, snapshot, workload

BASE = snapshot(
    [node("n1", cpu=64, gpus=8)],
    [scope("team-a")],
    [running(workload("held", "team-a", cpu=1), "n1")],
)
Step = Callable[[Engine], object]


def _engine() -> Engine:
    engine = Engine(clock=lambda: 1_000)
    engine.push_snapshot("c", BASE)
    return engine


def admit(wid: str, rid: str = "r", *, dry: bool = False, caller: str = "") -> Step:
    """An Admit of one workload under a request id."""
    return lambda e: e.admit(
        "c", [workload(wid, "team-a", cpu=1)], request_id=rid, dry_run=dry, caller=caller
    )


def release(wid: str, rid: str = "r", *, dry: bool = False, caller: str = "") -> Step:
    """A Release under a request id."""
    return lambda e: e.release("c", [wid], request_id=rid, dry_run=dry, caller=caller)


def held(engine: Engine) -> set[str]:
    """The ids of the workloads the cluster holds."""
    return {rw.workload.id for rw in engine.snapshot("c")[1].workloads}


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param(
            [admit("w1", dry=True), admit("w1")], {"held", "w1"}, id="a dry run does not poison"
        ),
        pytest.param([release("held", dry=True), release("held")], set(), id="nor a dry release"),
        pytest.param([admit("w1"), admit("w1")], {"held", "w1"}, id="a retry commits once"),
        pytest.param(
            [admit("w1", caller="alice"), admit("w2", caller="bob")],
            {"held", "w1", "w2"},
            id="ids are per caller",
        ),
        pytest.param(
            [admit("w1", caller="alice"), admit("w1", caller="alice", rid="r2")],
            InvalidArgument,
            id="a new id runs again (and the workload exists)",
        ),
    ],
)
def test_what_is_remembered(steps: list[Step], expected: set[str] | type) -> None:
    """Only committed calls are remembered, under their caller; a retry commits nothing twice."""
    engine = _engine()
    outcome: set[str] | type
    try:
        for step in steps:
            step(engine)
        outcome = held(engine)
    except InvalidArgument:
        outcome = InvalidArgument
    assert outcome == expected


def test_a_retry_gets_the_first_answer_and_changes_nothing() -> None:
    """The same id and body answers the first result again, at the first generation."""
    engine = _engine()
    first = admit("w1")(engine)
    generation = engine.snapshot("c")[0]
    assert admit("w1")(engine) == first
    assert engine.snapshot("c")[0] == generation


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(admit("w1"), admit("w2"), id="admit: another workload"),
        pytest.param(release("held"), release("other"), id="release: another id list"),
        pytest.param(
            lambda e: e.update_snapshot("c", Delta(upsert_nodes=(node("n2"),)), request_id="r"),
            lambda e: e.update_snapshot("c", Delta(upsert_nodes=(node("n3"),)), request_id="r"),
            id="update: another delta",
        ),
        pytest.param(
            lambda e: e.push_snapshot("c", BASE, request_id="r"),
            lambda e: e.push_snapshot("c", snapshot([node("n9")]), request_id="r"),
            id="push: another snapshot",
        ),
    ],
)
def test_the_same_id_with_another_body_is_refused(first: Step, second: Step) -> None:
    """REQUEST_ID_REUSED, naming request_id, and nothing changes."""
    engine = _engine()
    first(engine)
    before = engine.snapshot("c")
    with pytest.raises(RequestIdReused) as err:
        second(engine)
    assert err.value.reason == "REQUEST_ID_REUSED"
    assert err.value.violations[0].field == "request_id"
    assert engine.snapshot("c") == before


def test_a_retried_delete_gets_its_answer_after_the_cluster_is_gone() -> None:
    """DeleteCluster retried with its id answers the generation it deleted."""
    engine = _engine()
    assert engine.delete_cluster("c", request_id="d") == 1
    assert engine.delete_cluster("c", request_id="d") == 1
    with pytest.raises(ClusterNotFound):
        engine.delete_cluster("c", request_id="other")


LONG = "x" * 254


@pytest.mark.parametrize(
    ("call", "field"),
    [
        pytest.param(lambda e: e.get_cluster(LONG), "cluster", id="get: long cluster id"),
        pytest.param(lambda e: e.push_snapshot(LONG, BASE), "cluster_id", id="push: cluster id"),
        pytest.param(admit("w1", rid="r" * 129), "request_id", id="admit: request id"),
        pytest.param(release("w1", rid="r" * 129), "request_id", id="release: request id"),
        pytest.param(release("w" * 254), "workload_ids[0]", id="release: workload id"),
        pytest.param(admit("w" * 254), "workloads[0].id", id="admit: workload id"),
        pytest.param(
            lambda e: e.push_snapshot("c", snapshot([node("n" * 254)])),
            "snapshot.nodes[0].id",
            id="push: node id",
        ),
        pytest.param(
            lambda e: e.push_snapshot("c", snapshot([], [scope("s" * 254)])),
            "snapshot.scopes[0].id",
            id="push: scope id",
        ),
    ],
)
def test_ids_are_bounded(call: Step, field: str) -> None:
    """Ids beyond their limit (253, a request id 128) are refused naming the field (an
    unknown cluster is simply not found), and nothing changes."""
    engine = _engine()
    before = engine.snapshot("c")
    with pytest.raises((InvalidArgument, ClusterNotFound)) as err:
        call(engine)
    if isinstance(err.value, InvalidArgument):
        assert err.value.violations[0].field == field
    assert engine.snapshot("c") == before
    assert engine.cluster_ids() == ["c"]


def test_unknown_clusters_keep_nothing() -> None:
    """Calls naming clusters that do not exist, and refused or dry pushes of new ones, leave
    no trace in the store."""
    engine = _engine()
    for i in range(50):
        cid = f"unknown-{i}-" + "u" * 200
        for call in (
            lambda cid=cid: engine.get_cluster(cid),
            lambda cid=cid: engine.admit(cid, [workload("w", "team-a")]),
            lambda cid=cid: engine.release(cid, ["w"], request_id="r"),
            lambda cid=cid: engine.delete_cluster(cid),
            lambda cid=cid: engine.push_snapshot(cid, snapshot([node("n1")], [scope("a", "nope")])),
        ):
            with pytest.raises((ClusterNotFound, InvalidArgument)):
                call()
        assert engine.push_snapshot(cid, BASE, dry_run=True) == 0
    assert set(engine.store._slots) == {"c"}
    assert engine.store.remembered() == 0


# --- over gRPC: the caller is the bearer token ---------------------------------------------

WRITER, READER = "writer-token-1", "reader-token-1"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A server with a read-write and a read-only token; its port."""
    tokens: Path = tmp_path_factory.mktemp("tokens") / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"name": "w", "token": WRITER, "clusters": ["*"], "access": "read-write"},
                    {"name": "r", "token": READER, "clusters": ["*"], "access": "read-only"},
                ]
            }
        )
    )
    srv = Server(ServerConfig(address="127.0.0.1:0", workers=2, token_file=str(tokens)))
    srv.start()
    yield srv.port
    srv.grpc.stop(0)


def test_a_read_only_dry_run_does_not_poison_a_writers_id(guarded: int) -> None:
    """A viewer's dry run under an id, then a writer's commit under it: the workload is held
    (the dry run's answer was not remembered); a writer's retry with another body is
    REQUEST_ID_REUSED over the wire."""
    writer = Client(f"127.0.0.1:{guarded}", token=WRITER)
    reader = Client(f"127.0.0.1:{guarded}", token=READER)
    try:
        push = {"clusterId": "g", "snapshot": {"nodes": [{"id": "n1", "capacity": {"cpu": "8000"}}],
                                               "scopes": [{"id": "team-a"}]}}  # fmt: skip
        writer.call("PushSnapshot", push)
        w1 = {"id": "w1", "scopeId": "team-a", "request": {"cpu": "1000"}}
        body = {"clusterId": "g", "requestId": "job-1", "workloads": [w1]}
        reader.call("Admit", {**body, "dryRun": True})
        answer = writer.call("Admit", body)
        assert answer["generation"] == "2", "the writer's Admit was committed"
        assert writer.call("GetCluster", {"clusterId": "g"})["workloadCount"] == 1
        other = {**body, "workloads": [{"id": "w2", "scopeId": "team-a"}]}
        with pytest.raises(RpcError) as err:
            writer.call("Admit", other)
        assert (err.value.code, err.value.reason) == ("INVALID_ARGUMENT", "REQUEST_ID_REUSED")
        assert writer.call("Admit", body) == answer, "the writer's retry gets the first answer"
    finally:
        writer.close()
        reader.close()


# --- property: a retry never commits twice, a dry run is never remembered ------------------

retried_calls = st.lists(
    st.tuples(
        st.sampled_from(["admit", "release", "place"]),
        st.integers(0, 3),  # the workload
        st.sampled_from(["r1", "r2", "r3"]),  # the request id
        st.sampled_from(["alice", "bob"]),
        st.booleans(),  # dry run
    ),
    max_size=25,
)


def _retry_step(method: str, wid: str, rid: str, caller: str, dry: bool) -> Step:
    """One call of the property below."""
    if method == "admit":
        w = workload(wid, "team-a", cpu=1)
        return lambda e: e.admit("c", [w], request_id=rid, dry_run=dry, caller=caller)
    if method == "release":
        return lambda e: e.release("c", [wid], request_id=rid, dry_run=dry, caller=caller)
    return lambda e: e.place("c", workload_ids=[wid], request_id=rid, dry_run=dry, caller=caller)


@settings(max_examples=60, deadline=None)
@given(calls=retried_calls)
def test_retries_commit_once_and_dry_runs_are_not_remembered(
    calls: list[tuple[str, int, str, str, bool]],
) -> None:
    """Each (caller, id) answers its first committed body's result again without changing the
    cluster; another body under it is REQUEST_ID_REUSED; dry runs leave the memory as it was."""
    engine = _engine()
    first: dict[tuple[str, str], tuple[tuple[str, int], object]] = {}
    for method, k, rid, caller, dry in calls:
        wid = f"w{k}"
        step = _retry_step(method, wid, rid, caller, dry)
        before, remembered = engine.snapshot("c"), engine.store.remembered()
        seen = first.get((caller, rid))
        try:
            answer = step(engine)
        except RequestIdReused:
            assert not dry
            assert seen is not None
            assert seen[0] != (method, k)
            assert engine.snapshot("c") == before
            continue
        except (InvalidArgument, ClusterNotFound):
            assert engine.snapshot("c") == before
            continue
        if dry:
            assert engine.snapshot("c") == before
            assert engine.store.remembered() == remembered
        elif seen is not None and seen[0] == (method, k):
            assert answer == seen[1], "a retry answers the first result"
            assert engine.snapshot("c") == before, "a retry commits nothing"
        elif seen is None:
            first[(caller, rid)] = ((method, k), answer)
