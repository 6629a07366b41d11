"""A pushed snapshot's nodes held as columns, each made into a ``Node`` only when something
asks for that one.

Making a hundred thousand ``Node`` objects was as costly as protobuf's parse of the whole
request, and building the state reads none of them: the matrix, its id index and the shape
checks read arrays. ``NodeColumns`` holds what they need (``capacity`` as the matrix's int64
columns, ``schedulable``, GPU model codes, the ids and their index) and, per node, the fields a
``Node`` is made of (its shared capacity and labels dicts, its flag and GPU model), so that row
``i``'s ``Node`` is made on first read and is the very value the plain conversion makes (no
labels: the same read-only empty mapping). It is
a ``Sequence[Node]`` equal to the plain tuple (``service.snapshot_decoder`` builds it from the
request's bytes; ``tests/test_snapshot_nodes.py`` proves it equal to protobuf's reading).

``plainly_valid`` answers ``running_columns.nodes_plainly_valid`` from the columns: True only
when ``state.validate``'s node checks would find nothing; when it cannot say so, validation
walks the made nodes and reports exactly what the plain path reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np

from strata_policy.model.objects import Node, new_node
from strata_policy.model.resources import GPU, MAX_AMOUNT, MILLI_PER_GPU, Resources
from strata_policy.state.made_on_read import MadeOnRead

_NO_LABELS: Mapping[str, str] = MappingProxyType({})  # as service.convert gives a node without
_GPU_COL = 2  # state.nodes.GPU_COL: the matrix's columns are cpu, memory, gpu, then the rest


class NodeColumns(MadeOnRead[Node]):
    """Nodes as columns (see the module docstring), indexed like the snapshot.

    Node ``i``: ``ids[i]``, ``capacities[i]`` and ``labels[i]`` (dicts, shared between nodes
    with equal ones: the model's dicts are never mutated), ``unschedulable[i]``, GPU model
    ``wire_models[wire_model[i]]``. For the matrix: ``node_index`` (id -> the last row of
    that id), ``listed`` (every resource some node lists; ``capacity``'s columns are
    ``state.matrix_build.columns_of(listed)``), ``capacity``, ``schedulable``, ``models`` (sorted,
    with ``""``) and ``model_code``; ``widest`` is the most GPU devices of a node.
    ``id_bytes``, when the maker read the nodes from bytes, is those bytes and each id's start
    and end in them, so that the same bytes' placements find their nodes by their ids' bytes
    (``service.snapshot_decoder``) rather than by decoded strings.
    """

    __slots__ = (
        "capacities",
        "capacity",
        "id_bytes",
        "ids",
        "labels",
        "listed",
        "model_code",
        "models",
        "node_index",
        "schedulable",
        "unschedulable",
        "widest",
        "wire_model",
        "wire_models",
    )

    def __init__(
        self,
        *,
        ids: list[str],
        capacities: Sequence[Resources],
        labels: Sequence[Mapping[str, str]],
        unschedulable: list[bool],
        wire_models: list[str],
        wire_model: list[int],
        listed: frozenset[str],
        capacity: np.ndarray,
        models: tuple[str, ...],
        model_code: np.ndarray,
        id_bytes: tuple[bytes, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.ids, self.capacities, self.labels = ids, capacities, labels
        self.unschedulable, self.wire_models, self.wire_model = (
            unschedulable,
            wire_models,
            wire_model,
        )
        self.node_index = dict(zip(ids, range(len(ids)), strict=True))  # the last of an id
        self.listed, self.capacity = listed, capacity
        self.schedulable = ~np.asarray(unschedulable, dtype=np.bool_).reshape(len(ids))
        self.models, self.model_code = models, model_code
        self.id_bytes = id_bytes
        self.widest = int(capacity[:, _GPU_COL].max()) // MILLI_PER_GPU if len(ids) else 0
        super().__init__(len(ids))

    def _make(self, k: int) -> Node:
        return new_node(
            self.ids[k],
            self.capacities[k],
            self.labels[k] or _NO_LABELS,
            self.unschedulable[k],
            self.wire_models[self.wire_model[k]],
        )

    # --- columns -----------------------------------------------------------------------------

    def plainly_valid(self, max_id_length: int, max_resources: int, max_devices: int) -> bool:
        """True only when ``state.validate``'s ``node_resources``, ``node`` and ``unique``
        would find nothing in these nodes (``running_columns.nodes_plainly_valid``'s answer,
        from the columns): ids distinct and 1 to ``max_id_length`` characters; at most
        ``max_resources`` resource names, none empty; every amount in 0..``MAX_AMOUNT``; GPU
        in whole devices, at most ``max_devices``; every resource's total at most
        ``MAX_AMOUNT``. A node not listing a resource holds 0 of its column, which passes."""
        n = len(self.ids)
        if not n:
            return True
        if len(self.node_index) != n:
            return False
        lengths = list(map(len, self.ids))
        if min(lengths) < 1 or max(lengths) > max_id_length:
            return False
        if len(self.listed) > max_resources or "" in self.listed:
            return False
        capacity = self.capacity
        if int(capacity.min()) < 0 or int(capacity.max()) > MAX_AMOUNT:
            return False
        if GPU in self.listed:
            gpu = capacity[:, _GPU_COL]
            if bool(np.any(gpu % MILLI_PER_GPU)) or int(gpu.max()) // MILLI_PER_GPU > max_devices:
                return False
        # exact totals: each amount < 2**63 split in 32-bit halves, each half summed in int64
        high = (capacity >> 32).sum(axis=0).tolist()
        low = (capacity & 0xFFFFFFFF).sum(axis=0).tolist()
        return all((h << 32) + lo <= MAX_AMOUNT for h, lo in zip(high, low, strict=True))
