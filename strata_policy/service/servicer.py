"""The PolicyService servicer: convert the request, call the engine, convert the answer.

Nothing else happens here (STYLE habit 5): validation and decisions are the engine's, and errors
become statuses through ``status.abort``'s one table. Two things only the wire knows are added:
the request's counts and ids are checked before conversion (``request_limits`` for
UpdateSnapshot, the byte reader's counts for PushSnapshot, ``state.request_checks.check_batch``
for the others), and a call with a ``request_id`` names its caller and the digest of its body,
for idempotency (``identity``). Messages become model objects in ``convert``; a request's enums
and placement options (order, policy, weights, seed, fragmentation) are read here, beside the
handlers that read its other fields (``options_from_proto``, which PlanCapacity's conversion
takes too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial, wraps
from typing import Any, Protocol, TypeVar

import grpc
import structlog
from google.protobuf.message_factory import GetMessageClass
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy import model
from strata_policy.engine import Engine, NotInPlace
from strata_policy.engine.commit import request_digest
from strata_policy.errors import InternalError, InvalidArgument, StrataError
from strata_policy.placement.place import FgdScore, PlacementOptions
from strata_policy.service import convert as c
from strata_policy.service import plan_convert as pc
from strata_policy.service import request_limits as limits
from strata_policy.service.identity import caller_identity
from strata_policy.service.place_request_decoder import DecodedPlace, decode_place
from strata_policy.service.result_encoder import (
    EncodedResponse,
    columnar_bytes,
    encoded_data,
    response_bytes,
)
from strata_policy.service.running_rows import collector_paused
from strata_policy.service.snapshot_decoder import DecodedPush, decode_push
from strata_policy.service.status import abort
from strata_policy.state import request_checks as checks
from strata_policy.state.taskmix import TaskType

log = structlog.get_logger("strata.service")
Req = TypeVar("Req")
Resp = TypeVar("Resp")
E = TypeVar("E")
Handler = Callable[["PolicyServicer", Req, grpc.ServicerContext], Resp]
SERVICE = svc.DESCRIPTOR.services_by_name["PolicyService"]
_NO_IDENTITY = ("", b"")  # what ``idempotency`` finds for a call without a request_id


class _Idempotent(Protocol):
    """A request with a ``request_id`` (every mutating RPC's)."""

    @property
    def request_id(self) -> str: ...

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...  # protobuf's name


def idempotency(
    request: _Idempotent, context: grpc.ServicerContext, raw: bytes = b""
) -> tuple[str, bytes]:
    """The caller's identity and the body's digest, for a call the engine may remember: one
    with a ``request_id`` that is not a dry run (nothing to work out for any other)."""
    if not request.request_id or getattr(request, "dry_run", False):
        return "", b""
    body = raw or request.SerializeToString(deterministic=True)
    return caller_identity(context), request_digest(body)


# --- a request's enums and placement options ----------------------------------------------

ORDERS = {
    pb.ORDER_UNSPECIFIED: model.Order.FIFO,
    pb.ORDER_FIFO: model.Order.FIFO,
    pb.ORDER_PRIORITY: model.Order.PRIORITY,
    pb.ORDER_FAIR: model.Order.FAIR,
}
POLICIES = {
    pb.POLICY_UNSPECIFIED: model.Policy.LEAST_ALLOCATED,
    **{getattr(pb, f"POLICY_{p.value}"): p for p in model.Policy},
}
FRAGMENTATION_SCORES = {
    pb.FRAGMENTATION_SCORE_UNSPECIFIED: FgdScore.REFINED,
    **{getattr(pb, f"FRAGMENTATION_SCORE_{s.value}"): s for s in FgdScore},
}


def enum_from_proto(table: Mapping[Any, E], value: int, field: str) -> E:
    """The domain value of a wire enum. proto3 keeps a number it does not know (a newer
    client's, or a typo in JSON), so an unknown one is INVALID_ARGUMENT naming the field rather
    than a silent fall back to the default (``policy: 99`` once placed with LEAST_ALLOCATED)."""
    try:
        return table[value]
    except KeyError:
        known = ", ".join(str(v) for v in sorted(table))
        raise InvalidArgument.one(field, f"unknown value {value} (one of {known})") from None


def options_from_proto(
    policy: int,
    weights: Mapping[str, float],
    seed: int,
    fragmentation: pb.FragmentationOptions | None = None,
) -> PlacementOptions:
    """Placement options from a Place, Reclaim or PlanCapacity request."""
    task_types: tuple[TaskType, ...] = ()
    coverage = 0.95
    fgd_score = FgdScore.REFINED
    if fragmentation is not None:
        task_types = tuple(
            TaskType(
                cpu_milli=t.request.get("cpu", 0),
                gpu_milli=t.request.get("gpu", 0),
                gpu_model=t.gpu_model,
                weight=t.weight or 1.0,
            )
            for t in fragmentation.task_types
        )
        coverage = fragmentation.coverage or 0.95
        fgd_score = enum_from_proto(
            FRAGMENTATION_SCORES, fragmentation.score, "fragmentation.score"
        )
    return PlacementOptions(
        policy=enum_from_proto(POLICIES, policy, "policy"),
        resource_weights=dict(weights),
        seed=seed,
        task_types=task_types,
        coverage=coverage,
        fgd_score=fgd_score,
    )


def errors_to_status(fn: Handler[Req, Resp]) -> Handler[Req, Resp]:
    """A handler whose ``StrataError`` aborts with its status (``status.abort``'s table) and
    whose unexpected error aborts as INTERNAL (logged); ``NotInPlace`` passes through."""

    @wraps(fn)
    def handler(self: PolicyServicer, request: Req, context: grpc.ServicerContext) -> Resp:
        try:
            return fn(self, request, context)
        except StrataError as exc:
            abort(context, exc)
        except NotInPlace:
            raise  # for the call gate: this call goes to a worker (``calls.Capture.on_loop``)
        except Exception as exc:
            log.exception("unexpected error", method=fn.__name__)
            abort(context, InternalError(f"{type(exc).__name__}: {exc}"))

    return handler


class PolicyServicer:
    """Translates each RPC to one ``Engine`` call: one handler per RPC, each registered by
    ``method_handlers``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @errors_to_status
    def PushSnapshot(
        self, request: DecodedPush, context: grpc.ServicerContext
    ) -> svc.PushSnapshotResponse:
        """The request read from its bytes (``snapshot_decoder.decode_push``: the nodes and
        running workloads read from the bytes as columns, unless protobuf had to parse
        them; it sizes arrays by their counts only within the limits); its counts checked
        against the limits before anything else is sized by them."""
        message = request.message
        snap = message.snapshot
        checks.check_request_ids(message.cluster_id, message.request_id)
        self.engine.limits.check_sizes(request.node_count, len(snap.scopes), request.workload_count)
        caller, digest = idempotency(message, context, request.raw)
        with collector_paused():  # a push makes its objects by the hundred thousand
            snapshot = c.snapshot_from_push(request)
            generation = self.engine.push_snapshot(
                message.cluster_id,
                snapshot,
                dry_run=message.dry_run,
                expected_generation=message.expected_generation,
                request_id=message.request_id,
                caller=caller,
                body_digest=digest,
            )
        return svc.PushSnapshotResponse(
            generation=generation,
            node_count=len(snapshot.nodes),
            scope_count=len(snapshot.scopes),
            workload_count=len(snapshot.workloads),
        )

    @errors_to_status
    def UpdateSnapshot(
        self, request: svc.UpdateSnapshotRequest, context: grpc.ServicerContext
    ) -> svc.UpdateSnapshotResponse:
        limits.check_update(self.engine.limits, request)
        caller, digest = idempotency(request, context)
        generation = self.engine.update_snapshot(
            request.cluster_id,
            c.delta_from_proto(request),
            dry_run=request.dry_run,
            expected_generation=request.expected_generation,
            request_id=request.request_id,
            caller=caller,
            body_digest=digest,
            in_place_only=getattr(context, "on_loop", False),
        )
        nodes, scopes, workloads = self.engine.counts(request.cluster_id)
        return svc.UpdateSnapshotResponse(
            generation=generation, node_count=nodes, scope_count=scopes, workload_count=workloads
        )

    @errors_to_status
    def GetCluster(
        self, request: svc.GetClusterRequest, context: grpc.ServicerContext
    ) -> svc.GetClusterResponse:
        info = self.engine.get_cluster(request.cluster_id)
        snapshot = None
        if request.include_snapshot:
            _, snapshot = self.engine.snapshot(request.cluster_id)
        return c.cluster_to_proto(info, snapshot)

    @errors_to_status
    def DeleteCluster(
        self, request: svc.DeleteClusterRequest, context: grpc.ServicerContext
    ) -> svc.DeleteClusterResponse:
        caller, digest = idempotency(request, context)
        generation = self.engine.delete_cluster(
            request.cluster_id,
            expected_generation=request.expected_generation,
            request_id=request.request_id,
            caller=caller,
            body_digest=digest,
        )
        return svc.DeleteClusterResponse(generation=generation)

    @errors_to_status
    def ListClusters(
        self, request: svc.ListClustersRequest, context: grpc.ServicerContext
    ) -> svc.ListClustersResponse:
        """Every cluster by id; with tokens, ``auth`` keeps only those the caller may read."""
        return svc.ListClustersResponse(
            clusters=[
                svc.ClusterSummary(
                    cluster_id=cluster_id,
                    generation=info.generation,
                    node_count=info.node_count,
                    scope_count=info.scope_count,
                    workload_count=info.workload_count,
                )
                for cluster_id, info in sorted(self.engine.clusters(), key=lambda item: item[0])
            ]
        )

    @errors_to_status
    def Admit(self, request: svc.AdmitRequest, context: grpc.ServicerContext) -> EncodedResponse:
        """The answer written as bytes (``result_encoder.response_bytes``), the bytes an
        ``AdmitResponse`` of the same results serializes to: a one-workload Admit is the
        commonest call, and builds no response message. Each field is read once, and a call
        without a ``request_id`` (no idempotency to work out) and a known order call nothing
        more for them."""
        cluster_id, request_id = request.cluster_id, request.request_id
        workloads = request.workloads
        checks.check_batch(self.engine.limits, cluster_id, request_id, len(workloads))
        caller, digest = idempotency(request, context) if request_id else _NO_IDENTITY
        order = ORDERS.get(request.order) or enum_from_proto(ORDERS, request.order, "order")
        batch = self.engine.admit(
            cluster_id,
            c.workloads_from_proto(workloads),
            order=order,
            dry_run=request.dry_run,
            expected_generation=request.expected_generation,
            request_id=request_id,
            now_ms=request.now_ms,
            caller=caller,
            body_digest=digest,
        )
        generation = batch.generation
        return EncodedResponse(generation, response_bytes(generation, batch.results))

    @errors_to_status
    def Place(self, request: DecodedPlace, context: grpc.ServicerContext) -> EncodedResponse:
        """The request read from its bytes (``place_request_decoder.decode_place``: the
        workloads as values, with the tags that group them), the answer written as bytes from
        the engine's columns (``result_encoder.columnar_bytes``): the bytes a ``PlaceResponse``
        of the same results serializes to."""
        message = request.message
        checks.check_batch(
            self.engine.limits,
            message.cluster_id,
            message.request_id,
            max(request.workload_count, len(request.workloads)) + len(message.workload_ids),
        )
        caller, digest = idempotency(message, context, request.raw)
        fragmentation = message.fragmentation if message.HasField("fragmentation") else None
        batch = self.engine.place_columnar(
            message.cluster_id,
            request.workloads,
            message.workload_ids[:],  # a list; see convert.workloads_from_proto
            tags=request.tags,
            order=enum_from_proto(ORDERS, message.order, "order"),
            options=options_from_proto(
                message.policy, message.resource_weights, message.seed, fragmentation
            ),
            dry_run=message.dry_run,
            expected_generation=message.expected_generation,
            request_id=message.request_id,
            now_ms=message.now_ms,
            caller=caller,
            body_digest=digest,
        )
        return EncodedResponse(batch.generation, columnar_bytes(batch))

    @errors_to_status
    def Release(
        self, request: svc.ReleaseRequest, context: grpc.ServicerContext
    ) -> svc.ReleaseResponse:
        checks.check_batch(
            self.engine.limits, request.cluster_id, request.request_id, len(request.workload_ids)
        )
        caller, digest = idempotency(request, context)
        result = self.engine.release(
            request.cluster_id,
            request.workload_ids[:],  # a list; see convert.workloads_from_proto
            dry_run=request.dry_run,
            expected_generation=request.expected_generation,
            request_id=request.request_id,
            caller=caller,
            body_digest=digest,
        )
        return svc.ReleaseResponse(
            generation=result.generation, released=result.released, not_found=result.not_found
        )

    @errors_to_status
    def Reclaim(
        self, request: svc.ReclaimRequest, context: grpc.ServicerContext
    ) -> svc.ReclaimResponse:
        checks.check_request_ids(request.cluster_id, request.request_id)
        caller, digest = idempotency(request, context)
        result = self.engine.reclaim(
            request.cluster_id,
            c.workload_from_proto(request.workload),
            require_placement=request.require_placement,
            options=options_from_proto(request.policy, request.resource_weights, request.seed),
            dry_run=request.dry_run,
            expected_generation=request.expected_generation,
            request_id=request.request_id,
            now_ms=request.now_ms,
            caller=caller,
            body_digest=digest,
        )
        return svc.ReclaimResponse(
            generation=result.generation,
            satisfiable=result.satisfiable,
            victims=[c.victim_to_proto(v) for v in result.victims],
            reasons=[c.reason_to_proto(r) for r in result.reasons],
            result=c.result_to_proto(result.result) if result.result is not None else None,
        )

    @errors_to_status
    def PlanCapacity(
        self, request: svc.PlanCapacityRequest, context: grpc.ServicerContext
    ) -> svc.PlanCapacityResponse:
        fragmentation = request.fragmentation if request.HasField("fragmentation") else None
        placement = options_from_proto(request.policy, request.resource_weights, 0, fragmentation)
        generation, plan = self.engine.plan_capacity(
            request.cluster_id,
            [pc.group_from_proto(g) for g in request.node_groups],
            c.workloads_from_proto(request.workloads),
            options=pc.options_from_proto(request, placement),
        )
        return pc.plan_to_proto(generation, plan)


def method_handlers(servicer: PolicyServicer) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """Each method's handler, as the generated ``add_PolicyServiceServicer_to_server`` builds
    them, except that Place reads its request's bytes itself (``decode_place``) and Place and
    Admit answer bytes (``encoded_data``); clients see the same messages and errors. The
    server serves them through ``calls.CallGate``."""
    handlers = {}
    for method in SERVICE.methods:
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name),
            request_deserializer=GetMessageClass(method.input_type).FromString,
            response_serializer=GetMessageClass(method.output_type).SerializeToString,
        )
    handlers["Place"] = grpc.unary_unary_rpc_method_handler(
        servicer.Place,
        # Past the batch limit the workloads are counted, not converted (see decode_place).
        request_deserializer=partial(decode_place, max_workloads=servicer.engine.limits.max_batch),
        response_serializer=encoded_data,
    )
    handlers["PushSnapshot"] = grpc.unary_unary_rpc_method_handler(
        servicer.PushSnapshot,
        # running workloads kept as bytes, read as columns; past the limits only counted
        request_deserializer=partial(
            decode_push,
            max_nodes=servicer.engine.limits.max_nodes,
            max_workloads=servicer.engine.limits.max_workloads,
        ),
        response_serializer=svc.PushSnapshotResponse.SerializeToString,
    )
    handlers["Admit"] = grpc.unary_unary_rpc_method_handler(
        servicer.Admit,
        request_deserializer=svc.AdmitRequest.FromString,
        response_serializer=encoded_data,
    )
    return handlers
