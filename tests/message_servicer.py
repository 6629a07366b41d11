"""Admit and Place answered as messages: the oracles the servicer's byte handlers are checked
against (``test_place_wire_service``), and ``add_results``, which fills a response message.

The servicer registers one handler per RPC, and Admit's and Place's write their answers as
bytes (Place also reads its request from bytes). These are the plain translations they shortcut
— protobuf parses, ``convert`` converts, the engine decides, ``add_results`` fills a response
message (runs of the result encoder's value writer parsed in, the rest field by field) — kept
here, where only tests use them.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import WorkloadResult
from strata_policy.service import convert as c
from strata_policy.service.convert import DECISION_CODES, fill_result
from strata_policy.service.result_encoder import _borrowed_entries, _write_results
from strata_policy.service.servicer import (
    ORDERS,
    PolicyServicer,
    enum_from_proto,
    errors_to_status,
    idempotency,
    options_from_proto,
)
from strata_policy.state import request_checks as checks


class MessageServicer(PolicyServicer):
    """A servicer that also answers Admit and Place through messages."""

    @errors_to_status
    def admit_message(
        self, request: svc.AdmitRequest, context: grpc.ServicerContext
    ) -> svc.AdmitResponse:
        """Admit: convert the message, call the engine, fill an ``AdmitResponse``."""
        checks.check_batch(
            self.engine.limits, request.cluster_id, request.request_id, len(request.workloads)
        )
        caller, digest = idempotency(request, context)
        batch = self.engine.admit(
            request.cluster_id,
            c.workloads_from_proto(request.workloads),
            order=enum_from_proto(ORDERS, request.order, "order"),
            dry_run=request.dry_run,
            expected_generation=request.expected_generation,
            request_id=request.request_id,
            now_ms=request.now_ms,
            caller=caller,
            body_digest=digest,
        )
        response = svc.AdmitResponse(generation=batch.generation)
        add_results(response, batch.results)
        return response

    @errors_to_status
    def place_message(
        self, request: svc.PlaceRequest, context: grpc.ServicerContext
    ) -> svc.PlaceResponse:
        """Place: the parsed message's workloads converted (no tags), the engine's results as
        values, a ``PlaceResponse`` filled from them."""
        checks.check_batch(
            self.engine.limits,
            request.cluster_id,
            request.request_id,
            len(request.workloads) + len(request.workload_ids),
        )
        caller, digest = idempotency(request, context)
        fragmentation = request.fragmentation if request.HasField("fragmentation") else None
        batch = self.engine.place(
            request.cluster_id,
            c.workloads_from_proto(request.workloads),
            request.workload_ids[:],
            order=enum_from_proto(ORDERS, request.order, "order"),
            options=options_from_proto(
                request.policy, request.resource_weights, request.seed, fragmentation
            ),
            dry_run=request.dry_run,
            expected_generation=request.expected_generation,
            request_id=request.request_id,
            now_ms=request.now_ms,
            caller=caller,
            body_digest=digest,
        )
        response = svc.PlaceResponse(generation=batch.generation)
        add_results(response, batch.results)
        return response


def add_results(
    response: svc.AdmitResponse | svc.PlaceResponse, decisions: Sequence[WorkloadResult]
) -> None:
    """Append each decision to ``response.results``, in order: runs of results the value
    writer writes are parsed in by one ``MergeFromString`` each (their borrowed entries in
    the mapping's own order, as assigning them would insert them), the others added field by
    field (``add_result``) in their place."""
    start = 0
    for i, r in enumerate(decisions):
        if r.reasons or r.victims:
            if start < i:
                _merge(response, decisions[start:i])
            add_result(response.results, r)
            start = i + 1
    if start < len(decisions):
        _merge(response, decisions[start:] if start else decisions)


def _merge(response: svc.AdmitResponse | svc.PlaceResponse, run: Sequence[WorkloadResult]) -> None:
    parts: list[bytes] = []
    _write_results(parts, run, _borrowed_entries)
    response.MergeFromString(b"".join(parts))


def add_result(
    results: RepeatedCompositeFieldContainer[pb.WorkloadResult], r: WorkloadResult
) -> None:
    """Append one decision field by field (the general path)."""
    fill_result(
        results.add(workload_id=r.workload_id, decision=DECISION_CODES[r.decision._value_]), r
    )
