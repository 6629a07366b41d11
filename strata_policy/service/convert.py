"""Explicit conversions between the wire (``strata.policy.v1``) and the domain (``model``).

``*_from_proto`` build domain values from request messages (defaults applied: replicas 0 → 1,
weight 0 → 1, preemptible absent → true); ``*_to_proto`` fill response messages. A request's
enums and placement options are read where its handler reads its other fields
(``servicer.enum_from_proto``, ``servicer.options_from_proto``). Nothing here
validates beyond what the wire cannot express: validation is the engine's, so embedded and remote
callers get the same answers.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TypeVar

from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy import model
from strata_policy.service import snapshot_decoder
from strata_policy.service.field_coverage import FieldMap, same
from strata_policy.state.changes import Delta

E = TypeVar("E")


# One shared, read-only empty mapping for the many workloads and nodes without labels or
# selectors: a pushed million-workload snapshot would otherwise hold a million empty dicts.
_NO_LABELS: Mapping[str, str] = MappingProxyType({})
_new_workload = model.new_workload
_new_node = model.new_node
_intern = sys.intern
_REQUESTS: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
_MAX_SHARED_REQUESTS = 4096
# Keyed by the enum's value, not the member: an Enum's __hash__ is Python code.
DECISION_CODES = {d.value: getattr(pb, f"DECISION_{d.value}") for d in model.Decision}
VICTIM_REASONS = {r: getattr(pb, f"VICTIM_REASON_{r.value}") for r in model.VictimReason}


# --- from the wire ---------------------------------------------------------------------------


def _dict(m: Mapping[str, E]) -> dict[str, E]:
    """A protobuf map as a dict: read key by key, for ``dict(m)`` goes through the pure-Python
    ``KeysView`` and costs twice as much (a pushed snapshot has a map or two per node)."""
    return {k: m[k] for k in m}


def node_from_proto(m: pb.Node) -> model.Node:
    """A node (built through its slots: a pushed snapshot has a hundred thousand)."""
    labels = m.labels
    return _new_node(
        m.id,
        shared_request(m.capacity),  # one dict per distinct capacity, as for requests
        _dict(labels) if labels else _NO_LABELS,
        m.unschedulable,
        m.gpu_model,
    )


def scope_from_proto(m: pb.Scope) -> model.Scope:
    """A scope; weight 0 (unset) means 1."""
    return model.Scope(
        id=m.id,
        parent_id=m.parent_id,
        kind=m.kind,
        guarantee=_dict(m.guarantee),
        limit=_dict(m.limit),
        weight=m.weight if m.weight != 0 else 1.0,
    )


def shared_request(request: Mapping[str, int]) -> dict[str, int]:
    """One dict per distinct request, shared by every workload that asks for the same amounts.

    A pushed snapshot of a million workloads typically has a few hundred distinct requests;
    sharing them saves most of the memory their dicts would take. The dicts are never mutated
    (the model's values are immutable by contract) and hold their resources in name order.
    Bounded: the table is emptied when full.
    """
    pairs = []
    for name in request:  # a protobuf map's items() is the slow pure-Python ItemsView
        pairs.append((name, request[name]))
    pairs.sort()
    items = tuple(pairs)
    found = _REQUESTS.get(items)
    if found is None:
        if len(_REQUESTS) >= _MAX_SHARED_REQUESTS:
            _REQUESTS.clear()
        found = _REQUESTS[items] = dict(items)
    return found


def workload_from_proto(m: pb.Workload) -> model.Workload:
    """A workload; replicas 0 (unset) means 1, preemptible absent means true.

    This runs once per workload of every Admit and Place, so each field is read once and the
    value is built through its slots (``model.new_workload``). ``preemptible`` asks for
    presence only when the value read is false (absent reads as false and means true).
    """
    selector = m.node_selector
    return _new_workload(
        m.id,
        _intern(m.scope_id),
        shared_request(m.request),
        m.replicas or 1,
        m.priority,
        m.preemptible or not m.HasField("preemptible"),
        dict(selector) if selector else _NO_LABELS,
        m.gpu_model,
        m.spread.topology_key if m.HasField("spread") else "",
        m.queued_at_ms,
    )


WORKLOAD_FIELDS = FieldMap(
    "convert.workload_from_proto/workload_to_proto", pb.Workload, model.Workload,
    {**same("id", "scope_id", "request", "replicas", "priority", "preemptible", "node_selector",
            "gpu_model", "queued_at_ms"), "spread": "spread_key"},
    nested=(FieldMap("convert.workload_from_proto", pb.Spread, None,
                     {"topology_key": "spread_key"}),),
).check()  # fmt: skip
"""What the two workload conversions read and write: every field of ``pb.Workload`` and of
``model.Workload`` (``Spread`` is the one ``spread_key``). The Place request decoder builds its
values from what ``workload_from_proto`` reads (``service.field_coverage``)."""


def workloads_from_proto(messages: Sequence[pb.Workload]) -> list[model.Workload]:
    """A request's workloads, in order.

    Read through a slice (a list of the same messages): protobuf's repeated containers have no
    iterator of their own, so a loop over one ends by raising and catching an IndexError, which
    on a one-workload Admit in a server costs about as much as converting the workload.
    """
    out = []
    for m in messages[:]:  # a loop, not a comprehension: one function less per Admit
        out.append(workload_from_proto(m))
    return out


def placement_from_proto(m: pb.Placement) -> model.Placement:
    """One replica's placement (devices through a slice, as ``workloads_from_proto`` says)."""
    devices = m.gpu_devices
    return model.Placement(
        node_id=sys.intern(m.node_id), gpu_devices=tuple(devices[:]) if devices else ()
    )


def running_from_proto(m: pb.RunningWorkload) -> model.RunningWorkload:
    """A running workload with its placements."""
    return model.RunningWorkload(
        workload=workload_from_proto(m.workload),
        placements=tuple(placement_from_proto(p) for p in m.placements),
        admitted_at_ms=m.admitted_at_ms,
    )


def snapshot_from_proto(m: pb.Snapshot) -> model.Snapshot:
    """A whole snapshot; its running workloads as columns (``snapshot_decoder``), made one by
    one only when read, or converted here one by one when the columns cannot be read."""
    nodes = tuple(node_from_proto(n) for n in m.nodes)
    scopes = tuple(scope_from_proto(s) for s in m.scopes)
    columns = snapshot_decoder.running_columns(m, nodes, scopes, running_from_proto)
    if columns is not None:
        return model.Snapshot(nodes, scopes, columns)
    return model.Snapshot(nodes, scopes, plain_running_from_proto(m))


def snapshot_from_push(request: snapshot_decoder.DecodedPush) -> model.Snapshot:
    """A PushSnapshot request's snapshot: ``snapshot_from_proto`` of the whole request's, its
    nodes and running workloads read from their bytes when the decoder kept them as bytes."""
    m = request.message.snapshot
    body = request.body
    if body is None:
        return snapshot_from_proto(m)
    scopes = tuple(scope_from_proto(s) for s in m.scopes)
    whole: list[pb.Snapshot] = []  # parsed once, if what the columns decline needs it

    def parsed() -> pb.Snapshot:
        # The kernels walked every record whole, so protobuf parses them (see decode_push).
        if not whole:
            whole.append(pb.Snapshot.FromString(body))
        return whole[0]

    nodes: Sequence[model.Node] | None = snapshot_decoder.nodes_from_bytes(
        body, request.nodes_counted, request.nodes_walked
    )
    if nodes is None:
        nodes = tuple(node_from_proto(n) for n in parsed().nodes)
    columns = snapshot_decoder.columns_from_bytes(
        body, nodes, scopes, running_from_proto, request.running_counted, request.running_walked
    )
    if columns is not None:
        return model.Snapshot(nodes, scopes, columns)
    return model.Snapshot(nodes, scopes, plain_running_from_proto(parsed()))


def plain_running_from_proto(m: pb.Snapshot) -> tuple[model.RunningWorkload, ...]:
    """A snapshot's running workloads, converted one by one (the plain path)."""
    return tuple(running_from_proto(w) for w in m.workloads)


def delta_from_proto(m: svc.UpdateSnapshotRequest) -> Delta:
    """An UpdateSnapshot request's delta."""
    return Delta(
        upsert_nodes=tuple(node_from_proto(n) for n in m.upsert_nodes),
        remove_node_ids=tuple(m.remove_node_ids),
        upsert_scopes=tuple(scope_from_proto(s) for s in m.upsert_scopes),
        remove_scope_ids=tuple(m.remove_scope_ids),
        upsert_workloads=tuple(running_from_proto(w) for w in m.upsert_workloads),
        remove_workload_ids=tuple(m.remove_workload_ids),
    )


# --- to the wire -----------------------------------------------------------------------------


def node_to_proto(n: model.Node) -> pb.Node:
    """A node."""
    return pb.Node(
        id=n.id,
        capacity=n.capacity,
        labels=n.labels,
        unschedulable=n.unschedulable,
        gpu_model=n.gpu_model,
    )


def scope_to_proto(s: model.Scope) -> pb.Scope:
    """A scope."""
    return pb.Scope(
        id=s.id,
        parent_id=s.parent_id,
        kind=s.kind,
        guarantee=s.guarantee,
        limit=s.limit,
        weight=s.weight,
    )


def workload_to_proto(w: model.Workload) -> pb.Workload:
    """A workload (preemptible always present on output)."""
    return pb.Workload(
        id=w.id,
        scope_id=w.scope_id,
        request=w.request,
        replicas=w.replicas,
        priority=w.priority,
        preemptible=w.preemptible,
        node_selector=w.node_selector,
        gpu_model=w.gpu_model,
        spread=pb.Spread(topology_key=w.spread_key) if w.spread_key else None,
        queued_at_ms=w.queued_at_ms,
    )


def placements_to_proto(placements: Iterable[model.Placement]) -> list[pb.Placement]:
    """Placements per replica."""
    return [pb.Placement(node_id=p.node_id, gpu_devices=p.gpu_devices) for p in placements]


def snapshot_to_proto(s: model.Snapshot) -> pb.Snapshot:
    """A whole snapshot."""
    return pb.Snapshot(
        nodes=[node_to_proto(n) for n in s.nodes],
        scopes=[scope_to_proto(x) for x in s.scopes],
        workloads=[
            pb.RunningWorkload(
                workload=workload_to_proto(rw.workload),
                placements=placements_to_proto(rw.placements),
                admitted_at_ms=rw.admitted_at_ms,
            )
            for rw in s.workloads
        ],
    )


def reason_to_proto(r: model.Reason) -> pb.Reason:
    """One reason."""
    return pb.Reason(
        code=str(r.code),
        message=r.message,
        scope_id=r.scope_id,
        resource=r.resource,
        usage=r.usage,
        limit=r.limit,
        request=r.request,
        available=r.available,
        node_counts=r.node_counts,
    )


def victim_to_proto(v: model.Victim) -> pb.Victim:
    """One victim."""
    return pb.Victim(
        workload_id=v.workload_id,
        scope_id=v.scope_id,
        reason=VICTIM_REASONS[v.reason],
        freed=v.freed,
        priority=v.priority,
    )


def result_to_proto(r: model.WorkloadResult) -> pb.WorkloadResult:
    """One workload's decision."""
    out = pb.WorkloadResult(workload_id=r.workload_id, decision=DECISION_CODES[r.decision._value_])
    fill_result(out, r)
    return out


def fill_result(out: pb.WorkloadResult, r: model.WorkloadResult) -> None:
    """Set the parts of ``out`` that ``r`` has (id and decision aside); empty parts stay unset."""
    if r.borrowed:
        borrowed = out.borrowed  # a protobuf map's update() is the pure-Python MutableMapping one
        for name, amount in r.borrowed.items():
            borrowed[name] = amount
    if r.score:
        out.score = r.score
    if r.explanation:
        out.explanation = r.explanation
    if r.placements:
        add = out.placements.add
        for p in r.placements:
            if p.gpu_devices:
                add(node_id=p.node_id, gpu_devices=p.gpu_devices)
            else:
                add(node_id=p.node_id)
    if r.reasons:
        out.reasons.extend(reason_to_proto(x) for x in r.reasons)
    if r.victims:
        out.victims.extend(victim_to_proto(v) for v in r.victims)


RESULT_FIELDS = FieldMap(
    "convert.fill_result", pb.WorkloadResult, model.WorkloadResult,
    same("workload_id", "decision", "placements", "reasons", "borrowed", "victims", "score",
         "explanation"),
    nested=(
        FieldMap("convert.fill_result", pb.Placement, model.Placement,
                 same("node_id", "gpu_devices")),
        FieldMap("convert.reason_to_proto", pb.Reason, model.Reason,
                 same("code", "message", "scope_id", "resource", "usage", "limit", "request",
                      "available", "node_counts")),
        FieldMap("convert.victim_to_proto", pb.Victim, model.Victim,
                 same("workload_id", "scope_id", "reason", "freed", "priority")),
    ),
).check()  # fmt: skip
"""What ``fill_result`` (with ``result_to_proto`` for the id and decision) writes: every field
of ``pb.WorkloadResult`` and of ``model.WorkloadResult``, and of their placements, reasons and
victims. The plain writer every byte writer is proven equal to (``service.field_coverage``)."""


def scope_status_to_proto(s: model.ScopeStatus) -> pb.ScopeStatus:
    """A scope's status (with its effective guarantee and oversubscribed resources)."""
    return pb.ScopeStatus(
        id=s.id,
        parent_id=s.parent_id,
        kind=s.kind,
        usage=s.usage,
        guarantee=s.guarantee,
        limit=s.limit,
        borrowed=s.borrowed,
        weight=s.weight,
        at_limit=s.at_limit,
        workload_count=s.workload_count,
        effective_guarantee=s.effective_guarantee,
        oversubscribed=s.oversubscribed,
    )


def cluster_to_proto(
    info: model.ClusterInfo, snapshot: model.Snapshot | None = None
) -> svc.GetClusterResponse:
    """GetCluster's answer."""
    return svc.GetClusterResponse(
        generation=info.generation,
        node_count=info.node_count,
        scope_count=info.scope_count,
        workload_count=info.workload_count,
        scopes=[scope_status_to_proto(s) for s in info.scopes],
        capacity=info.capacity,
        allocated=info.allocated,
        snapshot=snapshot_to_proto(snapshot) if snapshot is not None else None,
    )
