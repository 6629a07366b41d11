"""Model dataclasses ⇄ JSON-able dicts, for the journal and for snapshot files.

The dict shape is the proto3 JSON mapping of ``strata.policy.v1`` (``parentId``, ``gpuModel``,
``spread: {topologyKey}``, placements ``{nodeId, gpuDevices}``), so a file written by
``grpcurl``/``json_format.MessageToJson`` reads here and a file written here parses as a proto.
On input both spellings are accepted (``parent_id`` and ``parentId``), and int64 amounts may be
JSON numbers or the decimal strings proto JSON emits. Output is camelCase with plain integers
and leaves out defaults the way proto JSON does.

Decoding never trusts its input: a wrong type becomes an ``InvalidArgument`` whose field paths
read like the request (``snapshot.nodes[3].capacity["cpu"]``); semantic checks (parents exist,
GPU multiples...) stay in ``state.validate``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import Node, Placement, RunningWorkload, Scope, Snapshot, Workload
from strata_policy.state.changes import Change, ChangeKind, Delta
from strata_policy.state.running_table import every_row

JsonDict = dict[str, Any]
T = TypeVar("T")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


class _Reader:
    """Typed access to one JSON object, collecting violations instead of raising early."""

    def __init__(self, data: object, path: str, out: list[FieldViolation]) -> None:
        self.path, self.out = path, out
        if isinstance(data, Mapping):
            self.data: Mapping[str, Any] = data
        else:
            self.data = {}
            out.append(FieldViolation(path, f"must be an object, got {type(data).__name__}"))

    def _get(self, name: str) -> tuple[Any, str]:
        camel = _camel(name)
        if name in self.data:
            return self.data[name], f"{self.path}.{name}"
        return self.data.get(camel), f"{self.path}.{name}"

    def bad(self, where: str, what: str, value: object) -> None:
        self.out.append(FieldViolation(where, f"must be {what}, got {value!r}"[:200]))

    def text(self, name: str) -> str:
        value, where = self._get(name)
        if value is None:
            return ""
        if not isinstance(value, str):
            self.bad(where, "a string", value)
            return ""
        return value

    def integer(self, name: str, default: int = 0) -> int:
        value, where = self._get(name)
        return default if value is None else _int(value, where, self)

    def flag(self, name: str, default: bool) -> bool:
        value, where = self._get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.bad(where, "true or false", value)
            return default
        return value

    def number(self, name: str, default: float) -> float:
        value, where = self._get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            self.bad(where, "a number", value)
            return default
        try:
            number = float(value)
        except ValueError:
            self.bad(where, "a number", value)
            return default
        # 0 is proto3's "unset" for a double: the model's default applies.
        return number if number != 0 else default

    def amounts(self, name: str) -> dict[str, int]:
        value, where = self._get(name)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.bad(where, "an object of amounts", value)
            return {}
        return {str(k): _int(v, f'{where}["{k}"]', self) for k, v in value.items()}

    def labels(self, name: str) -> dict[str, str]:
        value, where = self._get(name)
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            self.bad(where, "an object of strings", value)
            return {}
        return {str(k): v for k, v in value.items()}

    def items(
        self, name: str, decode: Callable[[object, str, list[FieldViolation]], T]
    ) -> tuple[T, ...]:
        value, where = self._get(name)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.bad(where, "a list", value)
            return ()
        return tuple(decode(item, f"{where}[{i}]", self.out) for i, item in enumerate(value))

    def strings(self, name: str) -> tuple[str, ...]:
        value, where = self._get(name)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.bad(where, "a list of strings", value)
            return ()
        return tuple(value)

    def child(self, name: str) -> _Reader | None:
        value, where = self._get(name)
        return None if value is None else _Reader(value, where, self.out)


def _int(value: object, where: str, reader: _Reader) -> int:
    """An integer from a JSON number without a fraction, or a decimal string (proto int64)."""
    if isinstance(value, bool):
        reader.bad(where, "an integer", value)
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    reader.bad(where, "an integer", value)
    return 0


# --- decoding --------------------------------------------------------------------------------


def _node(data: object, path: str, out: list[FieldViolation]) -> Node:
    r = _Reader(data, path, out)
    return Node(
        id=r.text("id"),
        capacity=r.amounts("capacity"),
        labels=r.labels("labels"),
        unschedulable=r.flag("unschedulable", False),
        gpu_model=r.text("gpu_model"),
    )


def _scope(data: object, path: str, out: list[FieldViolation]) -> Scope:
    r = _Reader(data, path, out)
    return Scope(
        id=r.text("id"),
        parent_id=r.text("parent_id"),
        kind=r.text("kind"),
        guarantee=r.amounts("guarantee"),
        limit=r.amounts("limit"),
        weight=r.number("weight", 1.0),
    )


def _workload(data: object, path: str, out: list[FieldViolation]) -> Workload:
    r = _Reader(data, path, out)
    spread = r.child("spread")
    spread_key = spread.text("topology_key") if spread is not None else r.text("spread_key")
    return Workload(
        id=r.text("id"),
        scope_id=r.text("scope_id"),
        request=r.amounts("request"),
        replicas=r.integer("replicas", 1) or 1,
        priority=r.integer("priority"),
        preemptible=r.flag("preemptible", True),
        node_selector=r.labels("node_selector"),
        gpu_model=r.text("gpu_model"),
        spread_key=spread_key,
        queued_at_ms=r.integer("queued_at_ms"),
    )


def _placement(data: object, path: str, out: list[FieldViolation]) -> Placement:
    r = _Reader(data, path, out)
    value, where = r._get("gpu_devices")
    devices: tuple[int, ...] = ()
    if value is not None:
        if isinstance(value, list):
            devices = tuple(_int(v, f"{where}[{i}]", r) for i, v in enumerate(value))
        else:
            r.bad(where, "a list of device indices", value)
    return Placement(node_id=r.text("node_id"), gpu_devices=devices)


def _running(data: object, path: str, out: list[FieldViolation]) -> RunningWorkload:
    r = _Reader(data, path, out)
    inner, where = r._get("workload")
    if inner is None:
        out.append(FieldViolation(where, "is required"))
        inner = {}
    return RunningWorkload(
        workload=_workload(inner, where, out),
        placements=r.items("placements", _placement),
        admitted_at_ms=r.integer("admitted_at_ms"),
    )


def _decode(decode: Callable[[object, str, list[FieldViolation]], T], data: object, path: str) -> T:
    out: list[FieldViolation] = []
    value = decode(data, path, out)
    if out:
        raise InvalidArgument(out)
    return value


def _snapshot(data: object, path: str, out: list[FieldViolation]) -> Snapshot:
    r = _Reader(data, path, out)
    return Snapshot(
        nodes=r.items("nodes", _node),
        scopes=r.items("scopes", _scope),
        workloads=r.items("workloads", _running),
    )


def _delta(data: object, path: str, out: list[FieldViolation]) -> Delta:
    r = _Reader(data, path, out)
    return Delta(
        upsert_nodes=r.items("upsert_nodes", _node),
        remove_node_ids=r.strings("remove_node_ids"),
        upsert_scopes=r.items("upsert_scopes", _scope),
        remove_scope_ids=r.strings("remove_scope_ids"),
        upsert_workloads=r.items("upsert_workloads", _running),
        remove_workload_ids=r.strings("remove_workload_ids"),
    )


def node_from_dict(data: object, path: str = "node") -> Node:
    """A ``Node`` from its JSON object; ``InvalidArgument`` on wrong types."""
    return _decode(_node, data, path)


def scope_from_dict(data: object, path: str = "scope") -> Scope:
    """A ``Scope`` from its JSON object; a weight of 0 or absent means the default 1."""
    return _decode(_scope, data, path)


def workload_from_dict(data: object, path: str = "workload") -> Workload:
    """A ``Workload``; absent ``preemptible`` means true, absent ``replicas`` means 1."""
    return _decode(_workload, data, path)


def running_from_dict(data: object, path: str = "workload") -> RunningWorkload:
    """A ``RunningWorkload``: ``{workload, placements, admittedAtMs}``."""
    return _decode(_running, data, path)


def snapshot_from_dict(data: object, path: str = "snapshot") -> Snapshot:
    """A ``Snapshot`` from ``{nodes, scopes, workloads}`` in proto JSON or snake_case."""
    return _decode(_snapshot, data, path)


def delta_from_dict(data: object, path: str = "delta") -> Delta:
    """A ``Delta`` with the field names of ``UpdateSnapshotRequest``."""
    return _decode(_delta, data, path)


def change_from_dict(data: object, path: str = "change") -> Change:
    """A ``Change``: ``{clusterId, generation, kind, snapshot | delta}``."""
    out: list[FieldViolation] = []
    r = _Reader(data, path, out)
    kind_name = r.text("kind")
    try:
        kind = ChangeKind(kind_name)
    except ValueError:
        out.append(FieldViolation(f"{path}.kind", f"unknown change kind {kind_name!r}"))
        kind = ChangeKind.DELETE
    snap = r.child("snapshot")
    delta = r.child("delta")
    change = Change(
        cluster_id=r.text("cluster_id"),
        generation=r.integer("generation"),
        kind=kind,
        snapshot=_snapshot(snap.data, snap.path, out) if snap is not None else None,
        delta=_delta(delta.data, delta.path, out) if delta is not None else None,
    )
    if out:
        raise InvalidArgument(out)
    return change


# --- encoding --------------------------------------------------------------------------------


def _put(out: JsonDict, key: str, value: object) -> None:
    """Set ``key`` unless ``value`` is a proto3 default (empty, zero, false)."""
    if value:
        out[key] = value


def node_to_dict(n: Node) -> JsonDict:
    """A node as proto JSON (defaults left out)."""
    out: JsonDict = {"id": n.id}
    _put(out, "capacity", dict(n.capacity))
    _put(out, "labels", dict(n.labels))
    _put(out, "unschedulable", n.unschedulable)
    _put(out, "gpuModel", n.gpu_model)
    return out


def scope_to_dict(s: Scope) -> JsonDict:
    """A scope as proto JSON; the weight is always written (1 is the default, not 0)."""
    out: JsonDict = {"id": s.id}
    _put(out, "parentId", s.parent_id)
    _put(out, "kind", s.kind)
    _put(out, "guarantee", dict(s.guarantee))
    _put(out, "limit", dict(s.limit))
    out["weight"] = s.weight
    return out


def workload_to_dict(w: Workload) -> JsonDict:
    """A workload as proto JSON; ``preemptible`` written only when false (absent = true)."""
    out: JsonDict = {"id": w.id, "scopeId": w.scope_id}
    _put(out, "request", dict(w.request))
    out["replicas"] = w.replicas
    _put(out, "priority", w.priority)
    if not w.preemptible:
        out["preemptible"] = False
    _put(out, "nodeSelector", dict(w.node_selector))
    _put(out, "gpuModel", w.gpu_model)
    if w.spread_key:
        out["spread"] = {"topologyKey": w.spread_key}
    _put(out, "queuedAtMs", w.queued_at_ms)
    return out


def placement_to_dict(p: Placement) -> JsonDict:
    """A placement: ``{nodeId, gpuDevices}``."""
    out: JsonDict = {"nodeId": p.node_id}
    _put(out, "gpuDevices", list(p.gpu_devices))
    return out


def running_to_dict(rw: RunningWorkload) -> JsonDict:
    """A running workload: ``{workload, placements, admittedAtMs}``."""
    out: JsonDict = {"workload": workload_to_dict(rw.workload)}
    _put(out, "placements", [placement_to_dict(p) for p in rw.placements])
    _put(out, "admittedAtMs", rw.admitted_at_ms)
    return out


def snapshot_to_dict(snap: Snapshot) -> JsonDict:
    """A snapshot as proto JSON, in snapshot order."""
    return {
        "nodes": [node_to_dict(n) for n in snap.nodes],
        "scopes": [scope_to_dict(s) for s in snap.scopes],
        "workloads": [running_to_dict(rw) for rw in every_row(snap.workloads)],
    }


def delta_to_dict(delta: Delta) -> JsonDict:
    """A delta with ``UpdateSnapshotRequest``'s field names (empty lists left out)."""
    out: JsonDict = {}
    _put(out, "upsertNodes", [node_to_dict(n) for n in delta.upsert_nodes])
    _put(out, "removeNodeIds", list(delta.remove_node_ids))
    _put(out, "upsertScopes", [scope_to_dict(s) for s in delta.upsert_scopes])
    _put(out, "removeScopeIds", list(delta.remove_scope_ids))
    _put(out, "upsertWorkloads", [running_to_dict(rw) for rw in delta.upsert_workloads])
    _put(out, "removeWorkloadIds", list(delta.remove_workload_ids))
    return out


def change_to_dict(change: Change) -> JsonDict:
    """A committed change: cluster, generation, kind and its body."""
    out: JsonDict = {
        "clusterId": change.cluster_id,
        "generation": change.generation,
        "kind": change.kind.value,
    }
    if change.snapshot is not None:
        out["snapshot"] = snapshot_to_dict(change.snapshot)
    if change.delta is not None:
        out["delta"] = delta_to_dict(change.delta)
    return out
