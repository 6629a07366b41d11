"""A pushed snapshot's running workloads held as columns, each made into a ``RunningWorkload``
only when something asks for that one.

PushSnapshot of a million running workloads spent most of its time and memory making a
``Workload``, a ``RunningWorkload``, a ``Placement`` and their tuples and dicts per workload,
which building the state then read once. ``RunningColumns`` holds what building the state
needs as arrays (scope, replicas, request amounts, placements as node and device indices), the
ids as strings (the state's keys), and a way to make row ``i``'s ``RunningWorkload`` exactly
as the plain conversion makes it (``make``: the service parses that row's own bytes and
converts them with the same function). It is a ``Sequence[RunningWorkload]``, so everything
that reads a snapshot's workloads one by one (the journal's codec, a digest, the plain
validation walk) still reads the very values of the plain path.

``plainly_valid`` says, in a few vectorised passes, that ``state.validate.running_workload``
would find nothing in any row (a Hypothesis property keeps it from accepting anything the walk
refuses); when it cannot say so, validation walks the made rows and reports exactly what the
plain path reports. ``state.columnar_build`` builds a ``ClusterState`` from the columns.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from strata_policy.model import Node, RunningWorkload, Scope
from strata_policy.model.resources import GPU, MAX_AMOUNT, MILLI_PER_GPU
from strata_policy.state.made_on_read import MadeOnRead
from strata_policy.state.node_columns import NodeColumns
from strata_policy.state.running_table import IdIndex

# ``state.validate``'s and ``state.request_checks``' bounds (validate imports this module; a
# test keeps them equal)
MAX_ID_LENGTH = 253
MAX_REPLICAS = 10_000
MAX_NODE_RESOURCES = 64
MAX_DEVICES_PER_NODE = 64
_ID = operator.attrgetter("id")
_CAPACITY = operator.attrgetter("capacity")


class RunningColumns(MadeOnRead[RunningWorkload]):
    """Running workloads as columns (see the module docstring), indexed like the snapshot.

    Row ``i``: ``ids[i]`` (``id_bytes[i]`` bytes of UTF-8; ``ids`` may be given as a function
    that decodes them, called when they are first read); ``scope[i]`` the
    index of its scope in ``scopes`` (-1: none of them); ``replicas[i]``, ``admitted_at_ms[i]``;
    ``request[i, k]`` its amount of ``resources[k]`` (0 when absent);
    ``gpu_models[gpu_model[i]]``; its placements are ``placement_start[i]`` and the
    ``placement_count[i]`` after it, each ``placement_node[p]`` (an index in ``nodes``, -1:
    none of them) with ``devices[p]`` (-1 padded). ``distinct_ids`` is whether no id repeats,
    when the maker worked that out (``service.snapshot_decoder``: on the ids' bytes, so that
    validation needs no dict of them); ``None``: ``rows`` answers it. ``id_index``, when the maker
    kept the table that check made (``state.running_table.IdIndex``), finds a row by its id's bytes:
    a state built from the columns looks its ids up there, and makes no dict of them.
    """

    __slots__ = (
        "_ids",
        "_rows",
        "_valid",
        "admitted_at_ms",
        "devices",
        "distinct_ids",
        "gpu_model",
        "gpu_models",
        "id_bytes",
        "id_index",
        "make",
        "nodes",
        "placement_count",
        "placement_node",
        "placement_start",
        "replicas",
        "request",
        "resources",
        "scope",
        "scopes",
    )

    def __init__(
        self,
        *,
        nodes: Sequence[Node],
        scopes: tuple[Scope, ...],
        ids: list[str] | Callable[[], list[str]],
        id_bytes: np.ndarray,
        scope: np.ndarray,
        replicas: np.ndarray,
        admitted_at_ms: np.ndarray,
        resources: tuple[str, ...],
        request: np.ndarray,
        gpu_models: tuple[str, ...],
        gpu_model: np.ndarray,
        placement_start: np.ndarray,
        placement_count: np.ndarray,
        placement_node: np.ndarray,
        devices: np.ndarray,
        make: Callable[[int], RunningWorkload],
        distinct_ids: bool | None = None,
        id_index: IdIndex | None = None,
    ) -> None:
        self.nodes, self.scopes = nodes, scopes
        self._ids, self.id_bytes, self.scope, self.replicas = ids, id_bytes, scope, replicas
        self.admitted_at_ms, self.resources, self.request = admitted_at_ms, resources, request
        self.gpu_models, self.gpu_model = gpu_models, gpu_model
        self.placement_start, self.placement_count = placement_start, placement_count
        self.placement_node, self.devices = placement_node, devices
        self.make = make
        self.distinct_ids = distinct_ids
        self.id_index = id_index
        super().__init__(id_bytes.shape[0])
        self._valid: bool | None = None
        self._rows: dict[str, int] | None = None

    @property
    def ids(self) -> list[str]:
        """Each row's id (decoded once, when first read)."""
        ids = self._ids
        if callable(ids):
            ids = self._ids = ids()
        return ids

    def _make(self, k: int) -> RunningWorkload:
        return self.make(k)

    # --- columns ---------------------------------------------------------------------------

    def rows(self) -> dict[str, int]:
        """Each id's row (the last, if an id repeats); made once."""
        if self._rows is None:
            self._rows = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return self._rows

    def scope_ids(self) -> list[str]:
        """Each row's scope id (rows whose scope is none of ``scopes`` are not asked for)."""
        names = [s.id for s in self.scopes]
        return [names[k] for k in self.scope.tolist()]

    def placed_rows(self) -> np.ndarray:
        """Each placement's row (placements in snapshot order: row by row, replica by replica)."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.placement_count)

    def plainly_valid(self) -> bool:
        """True only when ``state.validate.running_workload`` would find nothing in any row,
        nor ``unique`` a repeated id; see the module docstring. Worked out once."""
        if self._valid is None:
            self._valid = self._plainly_valid()
        return self._valid

    def _plainly_valid(self) -> bool:
        n = len(self)
        if not n:
            return True
        if not (self.distinct_ids if self.distinct_ids is not None else len(self.rows()) == n):
            return False  # a repeated id
        if self.id_bytes.min() < 1:
            return False
        if self.id_bytes.max() > MAX_ID_LENGTH and max(map(len, self.ids)) > MAX_ID_LENGTH:
            return False  # characters, not bytes, are counted: asked only of long UTF-8
        if self.scope.min() < 0:
            return False  # an empty or unknown scope id
        replicas = self.replicas
        if replicas.min() < 1 or replicas.max() > MAX_REPLICAS:
            return False
        if "" in self.resources:
            return False
        request = self.request
        if request.size and (request.min() < 0 or request.max() > MAX_AMOUNT):
            return False
        if request.size and bool(np.any(request > MAX_AMOUNT // replicas[:, None])):
            return False  # request × replicas overflows
        if GPU in self.resources:
            gpu = request[:, self.resources.index(GPU)]
            if bool(np.any((gpu >= MILLI_PER_GPU) & (gpu % MILLI_PER_GPU != 0))):
                return False
        if self.admitted_at_ms.min() < 0:
            return False
        count = self.placement_count
        if bool(np.any((count != 0) & (count != replicas))):
            return False
        return not (self.placement_node.size and self.placement_node.min() < 0)


def nodes_plainly_valid(nodes: Sequence[Node]) -> bool:
    """True only when ``state.validate``'s ``node_resources``, ``node`` and ``unique`` would
    find nothing in ``nodes`` (the columnar path asks this first), asked with C-level passes
    and once per distinct capacity dict (the service shares one per distinct capacity,
    ``convert.shared_request``) rather than once per node."""
    if type(nodes) is NodeColumns:
        return nodes.plainly_valid(MAX_ID_LENGTH, MAX_NODE_RESOURCES, MAX_DEVICES_PER_NODE)
    if not nodes:
        return True
    ids = list(map(_ID, nodes))
    lengths = list(map(len, ids))
    if len(set(ids)) != len(ids) or min(lengths) < 1 or max(lengths) > MAX_ID_LENGTH:
        return False
    capacities = list(map(_CAPACITY, nodes))
    counts = Counter(map(id, capacities))
    distinct = dict(zip(map(id, capacities), capacities, strict=True))
    names = set().union(*distinct.values())
    if len(names) > MAX_NODE_RESOURCES or "" in names:
        return False
    totals: dict[str, int] = {}
    for key, capacity in distinct.items():
        for name, amount in capacity.items():
            if not 0 <= amount <= MAX_AMOUNT:
                return False
            totals[name] = totals.get(name, 0) + amount * counts[key]
        gpu = capacity.get(GPU, 0)
        if gpu % MILLI_PER_GPU or gpu // MILLI_PER_GPU > MAX_DEVICES_PER_NODE:
            return False
    return all(total <= MAX_AMOUNT for total in totals.values())
