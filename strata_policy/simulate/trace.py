"""Traces: the nodes, scopes and timed workloads a replay feeds to the engine.

Two input formats, both turned into the same ``Trace`` of domain objects:

- **openb** (Alibaba ``cluster-trace-gpu-v2023``, the FGD paper's data): a node list
  (``sn,cpu_milli,memory_mib,gpu,model``) and a pod list (``name,cpu_milli,memory_mib,num_gpu,
  gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time``). Capacity is
  cpu = cpu_milli, memory = memory_mib × 2^20, gpu = gpu × 1000, gpu_model = model. A pod asks for
  gpu = gpu_milli when num_gpu is 1 and gpu_milli < 1000 (a share of one device), else
  num_gpu × 1000 (whole devices; none when num_gpu is 0); ``gpu_spec`` becomes ``gpu_model``
  (``A|B`` = either). Each pod belongs to the scope named by its ``qos`` (LS, BE, ...), with
  priority LS/Guaranteed 100, Burstable 50, BE 0; times are seconds, kept as milliseconds.
- **generic** (ours, for any cluster): one JSON document ``{"nodes": [...], "scopes": [...],
  "workloads": [...]}``, amounts in human units as the CLI takes them (``"cpu": "8"``,
  ``"memory": "48Gi"``, ``"gpu": "0.5"``); see ``docs/simulation.md`` for every field.

Loading never guesses silently: a malformed row raises ``InvalidArgument`` naming the file, row
and field, because a replay of a half-read trace would print confident wrong numbers.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strata_policy.errors import InvalidArgument
from strata_policy.model import Node, Scope, Workload
from strata_policy.model.resources import CPU, GPU, MEMORY, MILLI_PER_GPU, parse_amount

MIB = 1024**2
OPENB_NODE_FILE = "openb_node_list_gpu_node.csv"
OPENB_POD_FILE = "openb_pod_list_default.csv"
OPENB_PRIORITY = {"LS": 100, "Guaranteed": 100, "Burstable": 50, "BE": 0}


@dataclass(frozen=True, slots=True)
class TimedWorkload:
    """A workload with its place on the trace's clock; ``departure_ms`` None = never leaves."""

    workload: Workload
    arrival_ms: int = 0
    departure_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    """Everything a replay needs: nodes in file order, scopes, workloads in file order."""

    name: str
    nodes: tuple[Node, ...]
    workloads: tuple[TimedWorkload, ...]
    scopes: tuple[Scope, ...] = field(default=())

    @property
    def gpu_milli(self) -> int:
        """The cluster's GPU capacity in milli-GPUs (the 100 % of protocol 1's axis)."""
        return sum(n.capacity.get(GPU, 0) for n in self.nodes)

    def with_scopes(self, scopes: Sequence[Scope]) -> Trace:
        """The same trace under another scope tree (protocol 2's ``--scopes`` file)."""
        return Trace(self.name, self.nodes, self.workloads, tuple(scopes))

    def head(self, count: int) -> Trace:
        """The first ``count`` workloads (a slice for tests and quick looks)."""
        return Trace(self.name, self.nodes, self.workloads[:count], self.scopes)


def pod_gpu_request(num_gpu: int, gpu_milli: int) -> int:
    """The device-level GPU request of an openb pod (see the module docstring)."""
    if num_gpu <= 0:
        return 0
    if num_gpu == 1 and 0 < gpu_milli < MILLI_PER_GPU:
        return gpu_milli
    return num_gpu * MILLI_PER_GPU


def load_openb(pod_csv: Path, node_csv: Path | None = None) -> Trace:
    """An openb trace; ``node_csv`` defaults to the gpu-node list beside the pod list."""
    node_path = node_csv if node_csv is not None else pod_csv.parent / OPENB_NODE_FILE
    nodes = tuple(_openb_node(row, node_path, i) for i, row in _rows(node_path))
    pods = tuple(_openb_pod(row, pod_csv, i) for i, row in _rows(pod_csv))
    qos = sorted({p.workload.scope_id for p in pods})
    return Trace(pod_csv.stem, nodes, pods, tuple(Scope(id=q, kind="qos") for q in qos))


def load_generic(path: Path) -> Trace:
    """A trace in our JSON format (nodes, scopes, timed workloads in human units)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidArgument.one("trace", f"cannot read {path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise InvalidArgument.one("trace", f"{path}: expected a JSON object")
    nodes = tuple(
        _generic_node(d, f"{path}: nodes[{i}]") for i, d in enumerate(doc.get("nodes", []))
    )
    scopes = tuple(
        _generic_scope(d, f"{path}: scopes[{i}]") for i, d in enumerate(doc.get("scopes", []))
    )
    workloads = tuple(
        _generic_workload(d, f"{path}: workloads[{i}]")
        for i, d in enumerate(doc.get("workloads", []))
    )
    if not nodes:
        raise InvalidArgument.one("trace", f"{path}: no nodes")
    return Trace(path.stem, nodes, workloads, scopes)


def load_scopes(path: Path) -> tuple[Scope, ...]:
    """A scope file for protocol 2: a JSON list of scopes (or ``{"scopes": [...]}``)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidArgument.one("scopes", f"cannot read {path}: {exc}") from exc
    items = doc.get("scopes", []) if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise InvalidArgument.one("scopes", f"{path}: expected a list of scopes")
    return tuple(_generic_scope(d, f"{path}: scopes[{i}]") for i, d in enumerate(items))


def load_trace(path: Path, node_csv: Path | None = None) -> Trace:
    """Any supported trace: a JSON file, an openb pod list, or a folder holding the openb files."""
    if path.is_dir():
        return load_openb(path / OPENB_POD_FILE, node_csv or path / OPENB_NODE_FILE)
    if path.suffix == ".json":
        return load_generic(path)
    return load_openb(path, node_csv)


def _rows(path: Path) -> Iterable[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise InvalidArgument.one("trace", f"cannot read {path}: {exc}") from exc
    return enumerate(rows, start=2)  # line numbers as an editor shows them (header = 1)


def _int(row: Mapping[str, str], key: str, where: str, default: int | None = None) -> int:
    text = (row.get(key) or "").strip()
    if not text and default is not None:
        return default
    try:
        value = int(float(text))
    except ValueError:
        raise InvalidArgument.one(key, f"{where}: {key}={text!r} is not a number") from None
    if value < 0:
        raise InvalidArgument.one(key, f"{where}: {key}={value} is negative")
    return value


def _openb_node(row: Mapping[str, str], path: Path, line: int) -> Node:
    where = f"{path.name}:{line}"
    capacity = {
        CPU: _int(row, "cpu_milli", where),
        MEMORY: _int(row, "memory_mib", where) * MIB,
        GPU: _int(row, "gpu", where) * MILLI_PER_GPU,
    }
    return Node(
        id=row.get("sn") or f"node-{line}",
        capacity={k: v for k, v in capacity.items() if v},
        gpu_model=(row.get("model") or "").strip(),
    )


def _openb_pod(row: Mapping[str, str], path: Path, line: int) -> TimedWorkload:
    where = f"{path.name}:{line}"
    gpu = pod_gpu_request(_int(row, "num_gpu", where, 0), _int(row, "gpu_milli", where, 0))
    request = {
        CPU: _int(row, "cpu_milli", where),
        MEMORY: _int(row, "memory_mib", where) * MIB,
        GPU: gpu,
    }
    qos = (row.get("qos") or "").strip() or "default"
    created_s = _int(row, "creation_time", where, 0)
    deleted = (row.get("deletion_time") or "").strip()
    workload = Workload(
        id=row.get("name") or f"pod-{line}",
        scope_id=qos,
        request={k: v for k, v in request.items() if v},
        priority=OPENB_PRIORITY.get(qos, 0),
        gpu_model=(row.get("gpu_spec") or "").strip() if gpu else "",
        queued_at_ms=created_s * 1000,
    )
    departure = _int(row, "deletion_time", where) * 1000 if deleted else None
    return TimedWorkload(workload, created_s * 1000, departure)


def _amounts(doc: Any, where: str) -> dict[str, int]:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InvalidArgument.one("resources", f"{where}: expected a mapping of amounts")
    out: dict[str, int] = {}
    for name, value in doc.items():
        try:
            out[str(name)] = parse_amount(str(name), str(value))
        except ValueError as exc:
            raise InvalidArgument.one(str(name), f"{where}: {exc}") from None
    return {k: v for k, v in out.items() if v}


def _field(doc: Mapping[str, Any], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidArgument.one(key, f"{where}: {key!r} must be a non-empty string")
    return value


def _generic_node(doc: Any, where: str) -> Node:
    if not isinstance(doc, dict):
        raise InvalidArgument.one("nodes", f"{where}: expected an object")
    return Node(
        id=_field(doc, "id", where),
        capacity=_amounts(doc.get("capacity"), where),
        labels={str(k): str(v) for k, v in (doc.get("labels") or {}).items()},
        unschedulable=bool(doc.get("unschedulable", False)),
        gpu_model=str(doc.get("gpu_model", "")),
    )


def _generic_scope(doc: Any, where: str) -> Scope:
    if not isinstance(doc, dict):
        raise InvalidArgument.one("scopes", f"{where}: expected an object")
    return Scope(
        id=_field(doc, "id", where),
        parent_id=str(doc.get("parent_id", "")),
        kind=str(doc.get("kind", "")),
        guarantee=_amounts(doc.get("guarantee"), where),
        limit=_amounts(doc.get("limit"), where),
        weight=float(doc.get("weight", 1.0)),
    )


def _generic_workload(doc: Any, where: str) -> TimedWorkload:
    if not isinstance(doc, dict):
        raise InvalidArgument.one("workloads", f"{where}: expected an object")
    arrival_ms = int(doc.get("arrival_ms", 0))
    departure = doc.get("departure_ms")
    workload = Workload(
        id=_field(doc, "id", where),
        scope_id=_field(doc, "scope_id", where),
        request=_amounts(doc.get("request"), where),
        replicas=int(doc.get("replicas", 1)),
        priority=int(doc.get("priority", 0)),
        preemptible=bool(doc.get("preemptible", True)),
        node_selector={str(k): str(v) for k, v in (doc.get("node_selector") or {}).items()},
        gpu_model=str(doc.get("gpu_model", "")),
        spread_key=str(doc.get("spread_key", "")),
        queued_at_ms=arrival_ms,
    )
    return TimedWorkload(workload, arrival_ms, None if departure is None else int(departure))
