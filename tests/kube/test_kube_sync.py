"""``kube sync`` against the loopback protocol fake and the in-process Strata server."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from protocol_fake import FakeApiServer
from sync_harness import Running, running_sync, wait_until

from strata_policy.kube.testing import container, namespace, node, pod, strata_scope
from strata_policy.service.client import Client

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
NAMESPACES = "/api/v1/namespaces"
SCOPES = "/apis/strata.dev/v1alpha1/stratascopes"


def _seed(fake: FakeApiServer) -> None:
    fake.put(NODES, node("n1", cpu="8", memory="32Gi", gpus=2, product="A100"))
    fake.put(NODES, node("n2", cpu="8", memory="32Gi"))
    fake.put(NAMESPACES, namespace("team-a", labels={"strata.dev/scope": "a"}))
    fake.put(SCOPES, strata_scope("a", parent="org", guarantee={"nvidia.com/gpu": "1"}))
    fake.put(PODS, pod("p1", "team-a", containers=[container(cpu="1")], node_name="n1"))
    fake.put(
        PODS,
        pod("p2", "team-a", containers=[container(**{"nvidia.com/gpu": "1"})], node_name="n1"),
    )


def _converge(run: Running) -> None:
    assert wait_until(run.converged), (run.server_view(), run.expected(), run.syncer.stats)


def _converge_and_watch(run: Running) -> None:
    """Converged, and every watch open: a fault made now reaches every reflector."""
    _converge(run)
    assert wait_until(run.watching), (run.fake.open_watches, run.reflectors)


def _total(run: Running, counter: str) -> int:
    return sum(getattr(r.stats, counter) for r in run.reflectors)


def test_initial_list_and_events(client: Client, cluster_id: str) -> None:
    """The first list creates the cluster; later adds, changes and deletes follow it."""
    fake = FakeApiServer()
    _seed(fake)
    with running_sync(fake, client, cluster_id) as run:
        _converge(run)
        assert run.syncer.stats.pushes == 1
        view = run.server_view()
        assert view is not None
        assert sorted(view.workloads) == ["team-a/p1", "team-a/p2"]
        assert view.workloads["team-a/p2"]["placements"] == [{"nodeId": "n1", "gpuDevices": [0]}]
        fake.put(PODS, pod("p3", "team-a", containers=[container(cpu="2")], node_name="n2"))
        fake.delete(PODS, "team-a/p1")
        fake.put(NODES, node("n2", cpu="16", memory="32Gi"))
        _converge(run)
        assert run.syncer.stats.calls >= 1


def test_bookmarks_move_the_version(client: Client, cluster_id: str) -> None:
    """A BOOKMARK moves the watch version without touching the objects."""
    fake = FakeApiServer()
    _seed(fake)
    with running_sync(fake, client, cluster_id) as run:
        _converge_and_watch(run)
        fake.put(NAMESPACES, namespace("other"))
        fake.bookmark()
        # the reflector counts a bookmark before it applies it: wait for both
        assert wait_until(
            lambda: (
                run.reflectors[0].stats.bookmarks >= 1
                and run.cache.versions["nodes"] == str(fake.version)
            )
        ), (run.reflectors[0].stats, run.cache.versions, fake.version)
        _converge(run)


@pytest.mark.parametrize("in_stream", [True, False], ids=["410 in stream", "410 as HTTP status"])
def test_gone_relists(client: Client, cluster_id: str, in_stream: bool) -> None:
    """After 410 Gone the reflector re-lists: what changed while it was cut off is seen."""
    fake = FakeApiServer()
    fake.expire_in_stream = in_stream
    _seed(fake)
    with running_sync(fake, client, cluster_id) as run:
        _converge_and_watch(run)
        lists = _total(run, "lists")
        fake.drop_watches()
        fake.delete(PODS, "team-a/p2")
        fake.put(PODS, pod("p9", "team-a", containers=[container(cpu="1")], node_name="n2"))
        fake.compact()
        _converge(run)
        # a reflector whose re-list changed nothing may re-list after the state converged
        assert wait_until(lambda: _total(run, "lists") > lists and _total(run, "expired") >= 1), [
            r.stats for r in run.reflectors
        ]


def test_expired_mid_stream(client: Client, cluster_id: str) -> None:
    """An ERROR 410 event on an open watch makes every reflector re-list."""
    fake = FakeApiServer()
    _seed(fake)
    with running_sync(fake, client, cluster_id) as run:
        _converge_and_watch(run)
        fake.expire_watches()
        fake.delete(NODES, "n2")
        _converge(run)
        # the state converges once the nodes reflector has the deletion; the others (and the
        # nodes one, if the deletion came on the stream before the ERROR) count theirs later
        assert wait_until(lambda: all(r.stats.expired >= 1 for r in run.reflectors)), [
            r.stats for r in run.reflectors
        ]


def test_dropped_connection_rewatches(client: Client, cluster_id: str) -> None:
    """A dropped watch resumes from the last version, without a re-list."""
    fake = FakeApiServer()
    _seed(fake)
    with running_sync(fake, client, cluster_id) as run:
        _converge_and_watch(run)
        lists = _total(run, "lists")
        fake.drop_watches()
        fake.put(PODS, pod("p5", "team-a", containers=[container(cpu="1")], node_name="n2"))
        _converge(run)
        assert wait_until(lambda: _total(run, "broken") >= 1), [r.stats for r in run.reflectors]
        assert _total(run, "lists") == lists


def test_paged_list(client: Client, cluster_id: str) -> None:
    """A list in pages (limit/continue) is read to the end."""
    fake = FakeApiServer()
    fake.page_size = 2
    _seed(fake)
    for i in range(5):
        fake.put(NODES, node(f"x{i}", cpu="4", memory="8Gi"))
    with running_sync(fake, client, cluster_id) as run:
        _converge(run)
        view = run.server_view()
        assert view is not None
        assert len(view.nodes) == 7


def test_conflict_repushes(client: Client, cluster_id: str) -> None:
    """Another client's commit makes the next delta ABORTED; the syncer re-reads and re-sends."""
    fake = FakeApiServer()
    _seed(fake)
    with running_sync(fake, client, cluster_id) as run:
        _converge(run)
        client.call(
            "Admit",
            {
                "clusterId": cluster_id,
                "workloads": [{"id": "other", "scopeId": "a", "request": {"cpu": 1}}],
            },
        )
        fake.put(PODS, pod("p7", "team-a", containers=[container(cpu="1")], node_name="n2"))
        assert wait_until(lambda: run.syncer.stats.conflicts >= 1)
        _converge(run)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("node"), st.integers(0, 3), st.sampled_from(["4", "8"])),
        st.tuples(st.just("del-node"), st.integers(0, 3), st.just("")),
        st.tuples(st.just("pod"), st.integers(0, 6), st.sampled_from(["n0", "n1", "n2", "n3"])),
        st.tuples(st.just("del-pod"), st.integers(0, 6), st.just("")),
        st.tuples(st.just("ns"), st.integers(0, 2), st.sampled_from(["s0", "s1", ""])),
        st.tuples(st.just("scope"), st.integers(0, 1), st.sampled_from(["", "s0", "s1"])),
        st.tuples(st.just("fault"), st.integers(0, 3), st.just("")),
    ),
    max_size=14,
)


def _do(fake: FakeApiServer, op: tuple[str, int, str]) -> None:
    what, i, arg = op
    if what == "node":
        fake.put(NODES, node(f"n{i}", cpu=arg, memory="16Gi", gpus=i % 2))
    elif what == "del-node":
        fake.delete(NODES, f"n{i}")
    elif what == "pod":
        gpu = {"nvidia.com/gpu": "1"} if i % 3 == 0 else {}
        fake.put(
            PODS,
            pod(f"p{i}", f"ns{i % 3}", containers=[container(cpu="1", **gpu)], node_name=arg),
        )
    elif what == "del-pod":
        fake.delete(PODS, f"ns{i % 3}/p{i}")
    elif what == "ns":
        fake.put(NAMESPACES, namespace(f"ns{i}", labels={"strata.dev/scope": arg} if arg else None))
    elif what == "scope":
        fake.put(SCOPES, strata_scope(f"s{i}", parent=arg if arg != f"s{i}" else ""))
    else:
        [fake.drop_watches, fake.compact, fake.expire_watches, fake.bookmark][i]()


@settings(max_examples=8)
@given(OPS, OPS)
@example(  # events sent after a compaction were lost by the fake: it must 410 such a watch
    before=[("node", 0, "4"), ("del-node", 2, ""), ("node", 0, "4")],
    after=[
        ("node", 3, "4"),
        ("pod", 0, "n0"),
        ("ns", 1, "s1"),
        ("del-node", 0, ""),
        ("ns", 1, ""),
        ("fault", 1, ""),
    ],
)
def test_property_cluster_equals_fake(client: Client, before: list, after: list) -> None:
    """Over random event streams with drops, compactions and bookmarks, Strata equals the fake."""
    cluster_id = f"prop-{uuid.uuid4().hex[:8]}"
    fake = FakeApiServer()
    for op in before:
        _do(fake, op)
    with running_sync(fake, client, cluster_id) as run:
        for op in after:
            _do(fake, op)
        _converge(run)


def test_without_the_crd(client: Client, cluster_id: str) -> None:
    """A cluster without the StrataScope CRD (404) syncs with no StrataScopes."""
    fake = FakeApiServer()
    fake.missing.add(SCOPES)
    fake.put(NODES, node("n1", cpu="8", memory="32Gi"))
    fake.put(PODS, pod("p1", "team-a", containers=[container(cpu="1")], node_name="n1"))
    with running_sync(fake, client, cluster_id) as run:
        _converge(run)
        view = run.server_view()
        assert view is not None
        assert sorted(view.scopes) == ["team-a"]
