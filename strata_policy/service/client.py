"""A thin client for the CLI, scripts and tests: JSON-shaped dicts in, dicts out.

Requests and responses use the proto JSON mapping (the same shapes ``grpcurl`` takes and prints;
field names in camelCase or snake_case), so a file the CLI reads can be sent with ``grpcurl -d``
unchanged. Errors come back as ``RpcError`` with the status code, message and decoded details.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc
from strata.policy.v1 import types_pb2

METHODS = (
    "PushSnapshot",
    "UpdateSnapshot",
    "GetCluster",
    "DeleteCluster",
    "ListClusters",
    "Admit",
    "Place",
    "Release",
    "Reclaim",
    "PlanCapacity",
)

POLICIES = tuple(
    v.name.removeprefix("POLICY_") for v in types_pb2.Policy.DESCRIPTOR.values if v.number
)
ORDERS = tuple(v.name.removeprefix("ORDER_") for v in types_pb2.Order.DESCRIPTOR.values if v.number)


def request_descriptor(method: str) -> Any:
    """The request message's descriptor of ``method``, so a client can check a file against the
    schema before sending it (``ctl.request_files``) without importing the generated code."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    return getattr(svc, f"{method}Request").DESCRIPTOR


def snapshot_descriptor() -> Any:
    """The ``Snapshot`` message's descriptor (a push file may be a bare snapshot)."""
    return types_pb2.Snapshot.DESCRIPTOR


@dataclass
class RpcError(Exception):
    """A failed call: the code name, message, ErrorInfo reason and field violations."""

    code: str
    message: str
    reason: str = ""
    violations: list[tuple[str, str]] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def violations_left_out(self) -> int:
        """How many field violations the server counted but did not send (it sends the first
        20; ErrorInfo metadata ``violations`` has the full count)."""
        try:
            total = int(self.metadata.get("violations", "0"))
        except ValueError:
            return 0
        return max(0, total - len(self.violations))

    def __str__(self) -> str:
        lines = [f"{self.code}: {self.message}"]
        lines += [f"  {path}: {what}" for path, what in self.violations]
        return "\n".join(lines)


class Client:
    """Calls ``PolicyService`` by method name with JSON-shaped dicts."""

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        *,
        token: str = "",
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float = 60.0,
        max_message_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        options = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ]
        if credentials is None:
            self.channel = grpc.insecure_channel(address, options=options)
        else:
            self.channel = grpc.secure_channel(address, credentials, options=options)
        self.stub = svc_grpc.PolicyServiceStub(self.channel)  # type: ignore[no-untyped-call]  # generated
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout

    def call(self, method: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request (a dict in the proto JSON mapping) and return the response dict."""
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
        message = json_format.ParseDict(dict(request), getattr(svc, f"{method}Request")())
        try:
            response = getattr(self.stub, method)(
                message, timeout=self.timeout, metadata=self.metadata
            )
        except grpc.RpcError as exc:
            raise _decode(exc) from None
        return json_format.MessageToDict(response, always_print_fields_with_no_presence=True)

    def health(self, service: str = "", timeout: float | None = None) -> str:
        """The health status name (SERVING, NOT_SERVING...); ``RpcError`` when unreachable."""
        stub = health_pb2_grpc.HealthStub(self.channel)
        try:
            reply = stub.Check(
                health_pb2.HealthCheckRequest(service=service),
                timeout=self.timeout if timeout is None else timeout,
            )
        except grpc.RpcError as exc:
            raise _decode(exc) from None
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()


def _decode(exc: grpc.RpcError) -> RpcError:
    code = exc.code().name
    out = RpcError(code=code, message=exc.details() or "")
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]  # as above
    for detail in status.details if status else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            out.reason = info.reason
            out.metadata = dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.violations = [(v.field, v.description) for v in bad.field_violations]
    return out
