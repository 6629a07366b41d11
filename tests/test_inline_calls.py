"""The fast path (small calls run on the event loop) answers exactly as the worker pool does.

Two servers get the same snapshot and the same sequence of Admit and Release calls, one with the
fast path (``calls.INLINE``) and one without (every call on a worker); every answer, committed
or dry run, success or error, must be the same bytes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from gate_server import serve_gate
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import Scope, Snapshot
from strata_policy.service import convert
from strata_policy.service.calls import INLINE, INLINE_BATCH, CallGate, Slots, dry_runs_only
from strata_policy.service.config import ServerConfig
from strata_policy.service.server import Server
from strata_policy.service.servicer import SERVICE
from strata_policy.testing import node

PATH = "/strata.policy.v1.PolicyService/"


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Server, Server]]:
    """A server with the fast path and one without."""
    fast = Server(ServerConfig(address="127.0.0.1:0", workers=2))
    slow = Server(ServerConfig(address="127.0.0.1:0", workers=2))
    slow.gate.inline = {}
    for srv in (fast, slow):
        srv.start()
    yield fast, slow
    for srv in (fast, slow):
        srv.grpc.stop(0)


def _push(srv: Server, cluster_id: str) -> None:
    snapshot = Snapshot(
        nodes=tuple(node(f"n{i}", cpu=8, gpus=2) for i in range(3)),
        scopes=(Scope("org"), Scope("a", "org", guarantee={"gpu": 2000}, limit={"cpu": 12000})),
    )
    request = svc.PushSnapshotRequest(
        cluster_id=cluster_id, snapshot=convert.snapshot_to_proto(snapshot)
    )
    with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        ch.unary_unary(PATH + "PushSnapshot")(request.SerializeToString(), timeout=30)


def _answer(srv: Server, method: str, request: Any) -> tuple[str, bytes | str]:
    """("ok", response bytes) or (code name, details)."""
    with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        try:
            return "ok", ch.unary_unary(PATH + method)(request.SerializeToString(), timeout=30)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details() or ""  # type: ignore[attr-defined]  # a Call


workloads = st.builds(
    pb.Workload,
    id=st.sampled_from(["w1", "w2", "w3", "", "x" * 300]),
    scope_id=st.sampled_from(["a", "org", "nope"]),
    request=st.dictionaries(
        st.sampled_from(["cpu", "gpu"]), st.sampled_from([0, 500, 1000, 4000, -1]), max_size=2
    ),
    replicas=st.sampled_from([0, 1, 2]),
)
running = st.builds(
    lambda w, node_id: pb.RunningWorkload(
        workload=w, placements=[pb.Placement(node_id=node_id)] if node_id else []
    ),
    workloads,
    st.sampled_from(["", "n0", "n1", "nope"]),
)
calls = st.one_of(
    st.builds(
        lambda ups, ids, dry: (
            "UpdateSnapshot",
            svc.UpdateSnapshotRequest(upsert_workloads=ups, remove_workload_ids=ids, dry_run=dry),
        ),
        st.lists(running, max_size=3),
        st.lists(st.sampled_from(["w1", "w2", "zz"]), max_size=2),
        st.booleans(),
    ),
    st.builds(
        lambda ws, dry: ("Admit", svc.AdmitRequest(workloads=ws, dry_run=dry)),
        st.lists(workloads, max_size=20),
        st.booleans(),
    ),
    st.builds(
        lambda ids, dry: ("Release", svc.ReleaseRequest(workload_ids=ids, dry_run=dry)),
        st.lists(st.sampled_from(["w1", "w2", "w3", "zz"]), max_size=4),
        st.booleans(),
    ),
)


@settings(max_examples=25, deadline=None)
@given(sequence=st.lists(calls, min_size=1, max_size=6), cluster=st.uuids())
def test_fast_path_answers_as_the_pool(
    pair: tuple[Server, Server], sequence: list[tuple[str, Any]], cluster: Any
) -> None:
    """Any sequence of small Admit/Release/UpdateSnapshot calls gets the same answers on both
    paths (a bad delta included: on the loop it is handed to a worker for its exact errors)."""
    fast, slow = pair
    cluster_id = f"c-{cluster.hex[:12]}"
    for srv in pair:
        _push(srv, cluster_id)
    for method, request in sequence:
        request.cluster_id = cluster_id
        assert _answer(fast, method, request) == _answer(slow, method, request)


@pytest.mark.parametrize(
    ("rules", "request_", "inline"),
    [
        pytest.param(INLINE, svc.AdmitRequest(workloads=[pb.Workload()] * 16), True, id="16"),
        pytest.param(INLINE, svc.AdmitRequest(workloads=[pb.Workload()] * 17), False, id="17"),
        pytest.param(
            dry_runs_only(INLINE),
            svc.AdmitRequest(workloads=[pb.Workload()]),
            False,
            id="journal: commit",
        ),
        pytest.param(
            dry_runs_only(INLINE),
            svc.AdmitRequest(workloads=[pb.Workload()], dry_run=True),
            True,
            id="journal: dry run",
        ),
        pytest.param(INLINE, svc.ReleaseRequest(workload_ids=["w"] * 64), True, id="release 64"),
        pytest.param(INLINE, svc.ReleaseRequest(workload_ids=["w"] * 65), False, id="release 65"),
        pytest.param(
            INLINE,
            svc.UpdateSnapshotRequest(
                upsert_workloads=[pb.RunningWorkload()] * 8, remove_workload_ids=["w"] * 8
            ),
            True,
            id="update: 16 pod events",
        ),
        pytest.param(
            INLINE,
            svc.UpdateSnapshotRequest(remove_workload_ids=["w"] * 17),
            False,
            id="update: 17 pod events",
        ),
        pytest.param(
            INLINE,
            svc.UpdateSnapshotRequest(upsert_nodes=[pb.Node(id="n")]),
            False,
            id="update: a node (O(nodes))",
        ),
        pytest.param(
            INLINE,
            svc.UpdateSnapshotRequest(remove_scope_ids=["s"]),
            False,
            id="update: a scope (O(tree))",
        ),
    ],
)
def test_which_calls_run_on_the_loop(rules: Any, request_: Any, inline: bool) -> None:
    """Small batches only, and with a journal only dry runs."""
    method = type(request_).__name__.removesuffix("Request")
    assert rules[method](request_) is inline


class _Codes:
    """The codes the gate reports finished calls with (its metrics observer)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        """Record one finished call's code."""
        self.seen.append(code)


def _until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll ``condition`` until true or ``timeout`` seconds pass (a hang guard, not a bound)."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_a_cancelled_job_keeps_its_slot_and_cluster_until_it_ends() -> None:
    """A call cancelled while its job runs on a worker: the slot stays taken and the cluster
    stays off the fast path until the job ends, so no loop call waits on its lock."""
    release = threading.Event()
    running = threading.Event()
    ran: list[int] = []

    def admit(request: Any, context: Any) -> svc.AdmitResponse:
        ran.append(len(request.workloads))
        if len(request.workloads) > INLINE_BATCH:
            running.set()
            release.wait(60)  # a long engine call
        return svc.AdmitResponse(generation=1)

    handler = grpc.unary_unary_rpc_method_handler(
        admit,
        request_deserializer=svc.AdmitRequest.FromString,
        response_serializer=svc.AdmitResponse.SerializeToString,
    )
    codes = _Codes()
    gate = CallGate(
        {"Admit": handler}, SERVICE, futures.ThreadPoolExecutor(1), Slots(4), observer=codes
    )
    big = svc.AdmitRequest(cluster_id="c", workloads=[pb.Workload()] * (INLINE_BATCH + 1))
    small = svc.AdmitRequest(cluster_id="c", workloads=[pb.Workload()])
    with serve_gate(gate) as channel, futures.ThreadPoolExecutor(1) as client:
        call = channel.unary_unary(
            PATH + "Admit",
            request_serializer=svc.AdmitRequest.SerializeToString,
            response_deserializer=svc.AdmitResponse.FromString,
        )
        # Cancelled once its job runs (a deadline could pass before the job starts on a loaded
        # machine, and a job dropped from the queue is another case), and ended by the server.
        cancelled = call.future(big, timeout=60)
        assert running.wait(30)
        cancelled.cancel()
        assert cancelled.code() == grpc.StatusCode.CANCELLED
        assert _until(lambda: "CANCELLED" in codes.seen), codes.seen
        assert (gate.slots.in_use, dict(gate._busy)) == (1, {"c": 1})
        answer = client.submit(call, small, timeout=60)  # queued behind the long job
        health = health_pb2_grpc.HealthStub(channel)
        health.Check(health_pb2.HealthCheckRequest(), timeout=10)  # the loop is free
        assert not answer.done()
        release.set()
        assert answer.result().generation == 1
        assert _until(lambda: gate.slots.in_use == 0)
        assert (gate.slots.in_use, dict(gate._busy)) == (0, {})
    assert ran == [INLINE_BATCH + 1, 1]
