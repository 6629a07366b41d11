"""Bearer-token authorization over a real gRPC server: who may read or change which cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from gate_server import serve_gate
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc

from strata_policy.errors import PermissionDenied
from strata_policy.service.auth import TokenFileError, TokenTable, check_request
from strata_policy.service.calls import CallGate, Slots
from strata_policy.service.servicer import SERVICE

OPS, TEAM_A, VIEWER = "ops-token-0001", "team-a-token-01", "viewer-token-01"
TOKENS = {
    "tokens": [
        {"name": "ops", "token": OPS, "clusters": ["*"], "access": "read-write"},
        {"name": "team-a", "token": TEAM_A, "clusters": ["a"], "access": "read-write"},
        {"name": "viewer", "token": VIEWER, "clusters": ["a", "b"], "access": "read-only"},
    ]
}


class Recorder(svc_grpc.PolicyServiceServicer):
    """A servicer that only records which calls reached it (called on a worker thread)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def GetCluster(self, request: Any, context: Any) -> svc.GetClusterResponse:
        """Record and answer."""
        self.calls.append(("GetCluster", request.cluster_id))
        return svc.GetClusterResponse(generation=1)

    def PushSnapshot(self, request: Any, context: Any) -> svc.PushSnapshotResponse:
        """Record and answer."""
        self.calls.append(("PushSnapshot", request.cluster_id))
        return svc.PushSnapshotResponse(generation=1)

    def Admit(self, request: Any, context: Any) -> svc.AdmitResponse:
        """Record and answer."""
        self.calls.append(("Admit", request.cluster_id))
        return svc.AdmitResponse(generation=1)

    def DeleteCluster(self, request: Any, context: Any) -> svc.DeleteClusterResponse:
        """Record and answer."""
        self.calls.append(("DeleteCluster", request.cluster_id))
        return svc.DeleteClusterResponse(generation=1)


def _handlers(recorder: Recorder) -> dict[str, Any]:
    """The recorder's methods as the server's sync handlers."""
    return {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(recorder, name),
            request_deserializer=getattr(svc, f"{name}Request").FromString,
            response_serializer=getattr(svc, f"{name}Response").SerializeToString,
        )
        for name in ("GetCluster", "PushSnapshot", "Admit", "DeleteCluster")
    }


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[grpc.Channel, Recorder]]:
    """An asyncio server whose call gate checks tokens in front of the recorder, with health."""
    recorder = Recorder()
    gate = CallGate(
        _handlers(recorder),
        SERVICE,
        futures.ThreadPoolExecutor(max_workers=2),
        Slots(16),
        tokens=TokenTable.from_dict(TOKENS),
    )
    with serve_gate(gate) as channel:
        yield channel, recorder


def call(channel: grpc.Channel, method: str, request: Any, token: str | None) -> grpc.StatusCode:
    """Make one call; return its status code."""
    stub = svc_grpc.PolicyServiceStub(channel)
    metadata = () if token is None else (("authorization", token),)
    try:
        getattr(stub, method)(request, metadata=metadata, timeout=30)
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


GET_A = svc.GetClusterRequest(cluster_id="a")
GET_C = svc.GetClusterRequest(cluster_id="c")
PUSH_A = svc.PushSnapshotRequest(cluster_id="a")
PUSH_B = svc.PushSnapshotRequest(cluster_id="b")
ADMIT_A = svc.AdmitRequest(cluster_id="a")
ADMIT_A_DRY = svc.AdmitRequest(cluster_id="a", dry_run=True)
DELETE_A = svc.DeleteClusterRequest(cluster_id="a")
OK, UNAUTH, DENIED = (
    grpc.StatusCode.OK,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
)


@pytest.mark.parametrize(
    ("method", "request_", "token", "expected"),
    [
        pytest.param("GetCluster", GET_A, None, UNAUTH, id="no token"),
        pytest.param("GetCluster", GET_A, "Bearer nope-nope-nope", UNAUTH, id="unknown token"),
        pytest.param("GetCluster", GET_A, f"Basic {OPS}", UNAUTH, id="not a bearer header"),
        pytest.param("GetCluster", GET_A, "Bearer ", UNAUTH, id="empty bearer"),
        pytest.param("PushSnapshot", PUSH_A, f"Bearer {OPS}", OK, id="wildcard read-write"),
        pytest.param("GetCluster", GET_C, f"Bearer {OPS}", OK, id="wildcard any cluster"),
        pytest.param("PushSnapshot", PUSH_A, f"bearer {TEAM_A}", OK, id="own cluster, any case"),
        pytest.param("PushSnapshot", PUSH_B, f"Bearer {TEAM_A}", DENIED, id="other cluster"),
        pytest.param("GetCluster", GET_C, f"Bearer {TEAM_A}", DENIED, id="other cluster read"),
        pytest.param("GetCluster", GET_A, f"Bearer {VIEWER}", OK, id="read-only reads"),
        pytest.param("Admit", ADMIT_A, f"Bearer {VIEWER}", DENIED, id="read-only mutates"),
        pytest.param("Admit", ADMIT_A_DRY, f"Bearer {VIEWER}", OK, id="read-only dry run"),
        pytest.param("DeleteCluster", DELETE_A, f"Bearer {VIEWER}", DENIED, id="no dry delete"),
        pytest.param("GetCluster", GET_C, f"Bearer {VIEWER}", DENIED, id="read-only elsewhere"),
    ],
)
def test_access(
    server: tuple[grpc.Channel, Recorder],
    method: str,
    request_: Any,
    token: str | None,
    expected: grpc.StatusCode,
) -> None:
    """Each token reaches exactly its clusters at its access level; denials never run the call."""
    channel, recorder = server
    before = len(recorder.calls)
    assert call(channel, method, request_, token) == expected
    reached = recorder.calls[before:]
    assert reached == ([(method, request_.cluster_id)] if expected == OK else [])


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        pytest.param(None, "UNAUTHENTICATED", id="unauthenticated"),
        pytest.param(f"Bearer {TEAM_A}", "PERMISSION_DENIED", id="permission denied"),
    ],
)
def test_denials_carry_error_info(
    server: tuple[grpc.Channel, Recorder], token: str | None, reason: str
) -> None:
    """A denial carries a google.rpc.ErrorInfo in the strata.policy.v1 domain."""
    channel, _ = server
    stub = svc_grpc.PolicyServiceStub(channel)
    metadata = () if token is None else (("authorization", token),)
    with pytest.raises(grpc.RpcError) as caught:
        stub.PushSnapshot(PUSH_B, metadata=metadata, timeout=30)
    status = rpc_status.from_call(caught.value)  # type: ignore[arg-type]
    assert status is not None
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    info = error_details_pb2.ErrorInfo()
    infos[0].Unpack(info)
    assert (info.reason, info.domain) == (reason, "strata.policy.v1")


def test_health_is_open(server: tuple[grpc.Channel, Recorder]) -> None:
    """Health checks need no token, so probes work."""
    channel, _ = server
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param([], "list under 'tokens'", id="not an object"),
        pytest.param({"tokens": {}}, "list under 'tokens'", id="tokens not a list"),
        pytest.param({"tokens": ["x"]}, r"tokens\[0\]: must be an object", id="entry not object"),
        pytest.param(
            {"tokens": [{"token": "short", "clusters": ["a"]}]},
            r"tokens\[0\]\.token",
            id="token too short",
        ),
        pytest.param(
            {"tokens": [{"token": "longenough", "clusters": []}]},
            r"tokens\[0\]\.clusters",
            id="no clusters",
        ),
        pytest.param(
            {"tokens": [{"token": "longenough", "clusters": ["a"], "access": "admin"}]},
            r"tokens\[0\]\.access",
            id="unknown access",
        ),
        pytest.param(
            {"tokens": [{"token": "longenough", "clusters": ["a"]}] * 2},
            r"tokens\[1\]\.token: the same token",
            id="duplicate token",
        ),
    ],
)
def test_bad_token_file(data: object, message: str) -> None:
    """A bad token file is refused at start-up with the entry and field named."""
    with pytest.raises(TokenFileError, match=message):
        TokenTable.from_dict(data)


@pytest.mark.parametrize(
    "suffix", [pytest.param(".yaml", id="yaml"), pytest.param(".json", id="json")]
)
def test_token_file_formats(tmp_path: Path, suffix: str) -> None:
    """YAML and JSON token files give the same grants."""
    path = tmp_path / f"tokens{suffix}"
    text = json.dumps(TOKENS) if suffix == ".json" else _yaml(TOKENS)
    path.write_text(text)
    table = TokenTable.from_file(path)
    assert len(table) == 3
    grant = table.lookup(VIEWER)
    assert grant is not None
    assert (grant.name, grant.clusters, grant.read_write) == ("viewer", {"a", "b"}, False)
    assert table.lookup("not-a-token") is None


def test_missing_token_file(tmp_path: Path) -> None:
    """A token file that cannot be read is a start-up error naming the file."""
    with pytest.raises(TokenFileError, match="cannot read"):
        TokenTable.from_file(tmp_path / "absent.yaml")


def _yaml(data: dict[str, list[dict[str, object]]]) -> str:
    lines = ["tokens:"]
    for entry in data["tokens"]:
        clusters = ", ".join(str(c) if c != "*" else '"*"' for c in entry["clusters"])  # type: ignore[attr-defined]
        lines += [
            f"  - name: {entry['name']}",
            f"    token: {entry['token']}",
            f"    clusters: [{clusters}]",
            f"    access: {entry['access']}",
        ]
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None)
@given(
    clusters=st.lists(st.sampled_from(["a", "b", "c", "*"]), min_size=1, max_size=3),
    read_write=st.booleans(),
    target=st.sampled_from(["a", "b", "c"]),
    dry_run=st.booleans(),
)
def test_decision_matches_the_rule(
    clusters: list[str], read_write: bool, target: str, dry_run: bool
) -> None:
    """For any grant, Admit passes iff the cluster is granted and (read-write or dry run)."""
    table = TokenTable.from_dict(
        {
            "tokens": [
                {
                    "token": "property-token",
                    "clusters": clusters,
                    "access": "read-write" if read_write else "read-only",
                }
            ]
        }
    )
    grant = table.lookup("property-token")
    assert grant is not None
    allowed = ("*" in clusters or target in clusters) and (read_write or dry_run)
    request = svc.AdmitRequest(cluster_id=target, dry_run=dry_run)
    try:
        check_request(grant, "/strata.policy.v1.PolicyService/Admit", request)
        assert allowed
    except PermissionDenied:
        assert not allowed


def test_unauthenticated_bytes_are_never_read(server: tuple[grpc.Channel, Recorder]) -> None:
    """Without a token even bytes that do not parse are UNAUTHENTICATED: nothing was read."""
    channel, _ = server
    call = channel.unary_unary("/strata.policy.v1.PolicyService/Admit")
    with pytest.raises(grpc.RpcError) as caught:
        call(b"\xff\xff\xff", timeout=30)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
