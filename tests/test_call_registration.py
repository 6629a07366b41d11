"""How the call gate's methods are found per call (``CallGate.add_to``).

Without tokens, the methods served on the loop (``calls.REGISTERED``: Admit among them) are
registered methods: gRPC matches a call to its handler in its core, and ``CallGate.service`` (a
Python call per RPC) is not asked; the others are looked up there. With tokens, every call must be
looked up there, since authentication reads the call's metadata in that step.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import policy_service_pb2_grpc as svc_grpc

from strata_policy.service.auth import TokenTable
from strata_policy.service.calls import REGISTERED, CallGate, Slots
from strata_policy.service.servicer import SERVICE
from tests.gate_server import serve_gate

TOKEN = "t-0123456789abcdef"


def _handlers() -> dict[str, Any]:
    """Admit and GetCluster answering generation 7, as sync handlers."""
    return {
        name: grpc.unary_unary_rpc_method_handler(
            lambda request, context, response=response: response(generation=7),
            request_deserializer=getattr(svc, f"{name}Request").FromString,
            response_serializer=response.SerializeToString,
        )
        for name, response in (
            ("Admit", svc.AdmitResponse),
            ("GetCluster", svc.GetClusterResponse),
        )
    }


class CountingGate(CallGate):
    """A call gate that counts how often gRPC asks it for a handler."""

    looked_up = 0

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        """Count, then answer as the gate does."""
        self.looked_up += 1
        return super().service(handler_call_details)


@pytest.fixture(params=[False, True], ids=["no tokens", "tokens"])
def gate(request: pytest.FixtureRequest) -> Iterator[CountingGate]:
    """A counting gate, with or without a token table."""
    tokens = None
    if request.param:
        grant = {"name": "ops", "token": TOKEN, "clusters": ["*"], "access": "read-write"}
        tokens = TokenTable.from_dict({"tokens": [grant]})
    with futures.ThreadPoolExecutor(max_workers=1) as pool:
        yield CountingGate(_handlers(), SERVICE, pool, Slots(4), tokens=tokens)


@pytest.mark.parametrize(
    ("method", "registered"),
    [
        pytest.param("Admit", True, id="Admit: served on the loop, registered"),
        pytest.param("GetCluster", False, id="GetCluster: looked up"),
    ],
)
def test_lookups_per_call(gate: CountingGate, method: str, registered: bool) -> None:
    """Calls are answered either way; the gate is asked for a call's handler unless the method
    is registered and no tokens are checked."""
    assert (method in REGISTERED) == registered
    metadata = (("authorization", f"Bearer {TOKEN}"),)
    with serve_gate(gate) as channel:
        stub = svc_grpc.PolicyServiceStub(channel)  # type: ignore[no-untyped-call]
        request = getattr(svc, f"{method}Request")(cluster_id="c")
        before = gate.looked_up
        for _ in range(3):
            assert getattr(stub, method)(request, metadata=metadata).generation == 7
        asked = gate.looked_up - before
    assert asked == (0 if registered and gate.tokens is None else 3)


def test_unknown_methods_are_unimplemented(gate: CountingGate) -> None:
    """A method the gate does not serve still ends UNIMPLEMENTED (through the generic lookup)."""
    with serve_gate(gate) as channel:
        call = channel.unary_unary("/strata.policy.v1.PolicyService/NoSuchMethod")
        with pytest.raises(grpc.RpcError) as caught:
            call(b"", metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=30)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
