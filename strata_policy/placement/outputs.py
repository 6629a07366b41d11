"""The placement kernels' answers as values: ``Placement`` tuples shared across a batch, the
``Placement``, ``RunningWorkload`` and PLACED ``WorkloadResult`` values a batch makes per
workload, built through their slots, and a batch's PLACED results held in columns until a
reader asks for them as values.

**Shared placements.** ``Placement`` values are immutable and a batch's replicas land on a
limited set of (node, devices): the values are cached in the lineage's caches
(``placement.index``, so copies share them) and a batch looks most of them up instead of
building them. See ``batch_placements``.

**Slot builders.** A frozen dataclass's ``__init__`` sets each field through
``object.__setattr__``: about 0.3 µs a field, so a ``WorkloadResult`` costs more than the
kernel's whole work for one placement, and a batch of 10,000 builds three values per workload.
Here a value is ``object.__new__`` plus one slot-descriptor call per field, about a third of the
cost, and equal (``==``) to the value the constructor builds. The ``*_many`` builders go one
step further for a batch: they build the values column by column, each column one C-level
``map`` of a slot setter over the objects, so no Python frame runs per value (about 50 ns a
field). Each builder sets every field: the field names are checked against
``dataclasses.fields`` at import (``model.slots.setters``), so a field added to one of these
classes fails loudly instead of leaving a slot unset.

**Results in columns.** A Place of 1,000 workloads placed through the batch lane
(``engine.place``) has its results in four columns — ids, placement tuples, borrowed amounts,
scores — before any ``WorkloadResult`` exists, and building those 1,000 values (eight slots
each, and as many objects for the cyclic collector to walk) costs about a tenth of placing
them. ``Engine.place`` answers the values, as embedders read them (``ColumnarBatch.
batch_result``, exactly the ``BatchResult`` built value by value: ``tests/test_columnar.py``);
the Place RPC's encoder (``service.result_encoder.columnar_bytes``) writes the columns straight
to the wire and builds none.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from strata_policy.model import (
    BatchResult,
    Decision,
    Placement,
    RunningWorkload,
    Workload,
    WorkloadResult,
    new_result,
)
from strata_policy.model.decisions import RESULT_SETTERS
from strata_policy.model.resources import Resources
from strata_policy.model.slots import setters
from strata_policy.placement.index import index_of
from strata_policy.placement.lineage import MAX_PLACEMENTS, remember
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.validate import MAX_DEVICES_PER_NODE

_new = object.__new__
_drain: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend  # runs an iterator in C


_P_NODE, _P_DEVICES = setters(Placement, ("node_id", "gpu_devices"))
_R_WORKLOAD, _R_PLACEMENTS, _R_AT = setters(
    RunningWorkload, ("workload", "placements", "admitted_at_ms")
)
_ID, _DECISION, _PLACEMENTS, _REASONS, _BORROWED, _VICTIMS, _SCORE, _TEXT = RESULT_SETTERS
_PLACED = Decision.PLACED


def placement(node_id: str, gpu_devices: tuple[int, ...]) -> Placement:
    """``Placement(node_id, gpu_devices)``."""
    out: Placement = _new(Placement)
    _P_NODE(out, node_id)
    _P_DEVICES(out, gpu_devices)
    return out


def running(
    workload: Workload, placements: tuple[Placement, ...], admitted_at_ms: int
) -> RunningWorkload:
    """``RunningWorkload(workload, placements, admitted_at_ms)``."""
    out: RunningWorkload = _new(RunningWorkload)
    _R_WORKLOAD(out, workload)
    _R_PLACEMENTS(out, placements)
    _R_AT(out, admitted_at_ms)
    return out


def placed_result(
    workload_id: str, placements: tuple[Placement, ...], borrowed: Resources, score: float
) -> WorkloadResult:
    """``WorkloadResult(workload_id, PLACED, placements, borrowed=borrowed, score=score)``."""
    return new_result(workload_id, _PLACED, placements, borrowed, score)


def placement_many(
    node_ids: Sequence[str], gpu_devices: Sequence[tuple[int, ...]]
) -> list[Placement]:
    """``[placement(n, d) for n, d in zip(node_ids, gpu_devices)]``, by column."""
    out: list[Placement] = list(map(_new, repeat(Placement, len(node_ids))))
    _drain(map(_P_NODE, out, node_ids))
    _drain(map(_P_DEVICES, out, gpu_devices))
    return out


def running_many(
    workloads: Sequence[Workload], placements: Sequence[tuple[Placement, ...]], admitted_at_ms: int
) -> list[RunningWorkload]:
    """``[running(w, p, admitted_at_ms) for w, p in zip(workloads, placements)]``, by column."""
    out: list[RunningWorkload] = list(map(_new, repeat(RunningWorkload, len(workloads))))
    _drain(map(_R_WORKLOAD, out, workloads))
    _drain(map(_R_PLACEMENTS, out, placements))
    _drain(map(_R_AT, out, repeat(admitted_at_ms)))
    return out


# -- shared placements ---------------------------------------------------------------------


def placement_of(matrix: NodeMatrix, node: int, devices: tuple[int, ...]) -> Placement:
    """The shared ``Placement`` of one replica on node index ``node`` and ``devices``."""
    cache = index_of(matrix).lineage.placements
    key = (node, devices)
    found = cache.get(key)
    if found is None:
        made = placement(matrix.nodes[node].id, devices)
        found = remember(cache, key, made, MAX_PLACEMENTS)
    return found


# ``_DEVICES[d + 1]``: the shared device tuple of one replica on device ``d`` (-1: none)
_DEVICES: tuple[tuple[int, ...], ...] = ((), *((d,) for d in range(MAX_DEVICES_PER_NODE)))


def batch_placements(
    matrix: NodeMatrix,
    placed: np.ndarray,
    replicas: np.ndarray,
    n_devices: np.ndarray,
    offsets: np.ndarray,
    node: np.ndarray,
    devices: np.ndarray,
) -> list[tuple[Placement, ...]]:
    """Per workload of a kernel batch, its placements (``()`` where ``placed`` is false).

    A single replica on at most one device (nearly every workload of a big batch) is looked up
    by an integer code of (node, device) in a cache of one-placement tuples shared by copies of
    the matrix (a tuple and its ``Placement`` are immutable, and building them costs more than
    finding the node), one C-level ``map`` for the whole batch. The misses are built
    afterwards: the batch's new single placements (a node's or device's first use) by column
    (``placement_many``) and cached; gangs and several devices one at a time, through
    ``placement_of``'s cache.
    """
    width = devices.shape[1]
    code = np.full(len(replicas), -1, dtype=np.int64)
    single = placed & (replicas == 1) & (n_devices <= 1)
    rows = offsets[single]
    code[single] = node[rows] * (width + 1) + (devices[rows, 0] + 1 if width else 0)
    lineage = index_of(matrix).lineage
    cache = lineage.replica_tuples
    if len(cache) > MAX_PLACEMENTS:
        cache.clear()
    out: list[tuple[Placement, ...] | None] = list(map(cache.get, code.tolist()))
    misses = [w for w, found in enumerate(out) if found is None]
    if not misses:
        return out  # type: ignore[return-value]  # no None left
    miss = np.asarray(misses, dtype=np.int64)
    new = miss[code[miss] >= 0]  # one replica, at most one device, not cached yet: by column
    if new.size:
        rows = offsets[new]
        names = list(map(lineage.node_ids.__getitem__, node[rows].tolist()))
        devs = list(map(_DEVICES.__getitem__, (devices[rows, 0] + 1).tolist()))
        made = list(zip(placement_many(names, devs)))  # zip of one: 1-tuples
        cache.update(zip(code[new].tolist(), made, strict=True))
        for w, one in zip(new.tolist(), made, strict=True):
            out[w] = one
    rest = miss[code[miss] < 0].tolist()
    if rest:
        _gangs_and_unplaced(matrix, out, rest, placed, replicas, n_devices, offsets, node, devices)
    return out  # type: ignore[return-value]  # every None replaced


def _gangs_and_unplaced(
    matrix: NodeMatrix,
    out: list[tuple[Placement, ...] | None],
    rest: list[int],
    placed: np.ndarray,
    replicas: np.ndarray,
    n_devices: np.ndarray,
    offsets: np.ndarray,
    node: np.ndarray,
    devices: np.ndarray,
) -> None:
    """``batch_placements`` for unplaced workloads, gangs and several devices."""
    placed_list, reps, k_list = placed.tolist(), replicas.tolist(), n_devices.tolist()
    base, nodes = offsets.tolist(), node.tolist()
    widest = max(k_list, default=0)
    dev_list = devices[:, : max(widest, 1)].tolist()
    for w in rest:
        if not placed_list[w]:
            out[w] = ()
            continue
        k = k_list[w]
        first = base[w]
        chosen = []
        for i in range(first, first + reps[w]):
            devs = tuple(dev_list[i][:k]) if k > 1 else _DEVICES[dev_list[i][0] + 1] if k else ()
            chosen.append(placement_of(matrix, nodes[i], devs))
        out[w] = tuple(chosen)


# -- results in columns --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlacedColumns:
    """PLACED results in columns, one row per workload: row ``i`` is
    ``WorkloadResult(ids[i], PLACED, placements[i], borrowed=borrowed[i], score=scores[i])``
    (no reasons, victims or explanation). The columns are equally long and not mutated."""

    ids: Sequence[str]
    placements: Sequence[tuple[Placement, ...]]
    borrowed: Sequence[Resources]
    scores: Sequence[float]

    def __len__(self) -> int:
        return len(self.ids)

    def results(self) -> list[WorkloadResult]:
        """The rows as values, built column by column through their slots (``model.slots``):
        one C-level ``map`` of a slot setter per field, no Python frame per value."""
        out: list[WorkloadResult] = list(map(_new, repeat(WorkloadResult, len(self.ids))))
        _drain(map(_ID, out, self.ids))
        _drain(map(_DECISION, out, repeat(_PLACED)))
        _drain(map(_PLACEMENTS, out, self.placements))
        _drain(map(_REASONS, out, repeat(())))
        _drain(map(_BORROWED, out, self.borrowed))
        _drain(map(_VICTIMS, out, repeat(())))
        _drain(map(_SCORE, out, self.scores))
        _drain(map(_TEXT, out, repeat("")))
        return out


Part = PlacedColumns | tuple[WorkloadResult, ...]
"""A run of a batch's results: PLACED ones in columns, or any results as values."""


@dataclass(frozen=True, slots=True)
class ColumnarBatch:
    """The results of a Place batch in decision order, as ``parts`` (see ``Part``), with the
    generation they carry; ``len`` is the number of results."""

    generation: int
    parts: tuple[Part, ...]

    def __len__(self) -> int:
        return sum(map(len, self.parts))

    def batch_result(self) -> BatchResult:
        """The same results as values: what ``Engine.place`` answers."""
        out: list[WorkloadResult] = []
        for part in self.parts:
            out.extend(part.results() if isinstance(part, PlacedColumns) else part)
        return BatchResult(self.generation, tuple(out))

    def held_as_values(self) -> list[WorkloadResult]:
        """The results held as values (every one that is not in a ``PlacedColumns``)."""
        return [r for part in self.parts if not isinstance(part, PlacedColumns) for r in part]

    def placed_in_columns(self) -> int:
        """How many results are held in columns (all PLACED, without reasons)."""
        return sum(len(p) for p in self.parts if isinstance(p, PlacedColumns))
