"""The cluster's value types: nodes, scopes, workloads, placements and snapshots.

Frozen, slotted, pure Python. Mappings are stored as given (callers pass fresh dicts); the state
store never mutates them. Validation lives in ``strata_policy.state.validate``, not here, so
that a bad snapshot can be described field by field before anything is built from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from strata_policy.model.resources import GPU, Resources, scale
from strata_policy.model.slots import setters

HOSTNAME_KEY = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class Node:
    """A machine; ``capacity["gpu"]`` is a multiple of 1000 (one entry per device)."""

    id: str
    capacity: Resources = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    gpu_model: str = ""

    @property
    def gpu_devices(self) -> int:
        """How many GPU devices the node has."""
        return self.capacity.get(GPU, 0) // 1000

    def label(self, key: str) -> str | None:
        """A label's value; every node carries its id as ``kubernetes.io/hostname``."""
        if key == HOSTNAME_KEY:
            return self.labels.get(key, self.id)
        return self.labels.get(key)


@dataclass(frozen=True, slots=True)
class Scope:
    """A node of the tenancy tree; absent limit = unlimited; an absent guarantee is the
    children's sum, or 0 for a leaf (the effective guarantee, ``QuotaTree``)."""

    id: str
    parent_id: str = ""
    kind: str = ""
    guarantee: Resources = field(default_factory=dict)
    limit: Resources = field(default_factory=dict)
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Workload:
    """A gang of ``replicas`` identical replicas, each asking for ``request``."""

    id: str
    scope_id: str
    request: Resources = field(default_factory=dict)
    replicas: int = 1
    priority: int = 0
    preemptible: bool = True
    node_selector: Mapping[str, str] = field(default_factory=dict)
    gpu_model: str = ""
    spread_key: str = ""
    queued_at_ms: int = 0

    @property
    def total(self) -> dict[str, int]:
        """``request × replicas``: what the workload holds against quota."""
        return scale(self.request, self.replicas)

    @property
    def gpu_models(self) -> frozenset[str]:
        """Allowed GPU models (``A|B`` = either); empty = any."""
        return frozenset(m for m in self.gpu_model.split("|") if m)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one replica runs: a node and the GPU device indices it holds there."""

    node_id: str
    gpu_devices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RunningWorkload:
    """A workload the engine holds: ADMITTED without placements, PLACED with one per replica."""

    workload: Workload
    placements: tuple[Placement, ...] = ()
    admitted_at_ms: int = 0

    @property
    def placed(self) -> bool:
        """Whether the workload holds nodes (PLACED) or only quota (ADMITTED)."""
        return bool(self.placements)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A whole cluster: nodes in snapshot order (the tie-break order), scopes, running work.

    ``nodes`` and ``workloads`` are tuples, or sequences that make each node or workload when
    read (a pushed snapshot's columns, ``state.node_columns``, ``state.running_columns``):
    read them as ``Sequence``s.
    """

    nodes: Sequence[Node] = ()
    scopes: tuple[Scope, ...] = ()
    workloads: Sequence[RunningWorkload] = ()


_new = object.__new__
WORKLOAD_SETTERS = setters(
    Workload,
    ("id", "scope_id", "request", "replicas", "priority", "preemptible", "node_selector",
     "gpu_model", "spread_key", "queued_at_ms"),
)  # fmt: skip
"""``Workload``'s slot setters in field order, for builders that skip its ``__init__``."""
(
    _set_id,
    _set_scope_id,
    _set_request,
    _set_replicas,
    _set_priority,
    _set_preemptible,
    _set_node_selector,
    _set_gpu_model,
    _set_spread_key,
    _set_queued_at_ms,
) = WORKLOAD_SETTERS


NODE_SETTERS = setters(Node, ("id", "capacity", "labels", "unschedulable", "gpu_model"))
"""``Node``'s slot setters in field order."""
_node_setters = NODE_SETTERS


def new_node(
    id: str,
    capacity: Resources,
    labels: Mapping[str, str],
    unschedulable: bool,
    gpu_model: str,
) -> Node:
    """``Node(...)`` with every field given, built through its slots (as ``new_workload``: a
    pushed snapshot converts one per node). The value equals ``Node(...)`` of the same fields."""
    n: Node = _new(Node)
    set_id, set_capacity, set_labels, set_unschedulable, set_gpu_model = _node_setters
    set_id(n, id)
    set_capacity(n, capacity)
    set_labels(n, labels)
    set_unschedulable(n, unschedulable)
    set_gpu_model(n, gpu_model)
    return n


def new_workload(
    id: str,
    scope_id: str,
    request: Resources,
    replicas: int,
    priority: int,
    preemptible: bool,
    node_selector: Mapping[str, str],
    gpu_model: str,
    spread_key: str,
    queued_at_ms: int,
) -> Workload:
    """``Workload(...)`` with every field given, built through its slots.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``; for the
    ten fields of a workload that is most of the cost of converting one from the wire, paid for
    every workload of every Admit and Place. The value equals ``Workload(...)`` of the same fields.
    """
    w: Workload = _new(Workload)
    _set_id(w, id)
    _set_scope_id(w, scope_id)
    _set_request(w, request)
    _set_replicas(w, replicas)
    _set_priority(w, priority)
    _set_preemptible(w, preemptible)
    _set_node_selector(w, node_selector)
    _set_gpu_model(w, gpu_model)
    _set_spread_key(w, spread_key)
    _set_queued_at_ms(w, queued_at_ms)
    return w
