"""Building the values a batch makes per workload (``Placement``, ``RunningWorkload``, a PLACED
``WorkloadResult``) through their slots.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``: about 0.3 µs a
field, so a ``WorkloadResult`` costs more than the kernel's whole work for one placement, and a
batch of 10,000 builds three values per workload. Here a value is ``object.__new__`` plus one
slot-descriptor call per field, about a third of the cost, and equal (``==``) to the value the
constructor builds. The ``*_many`` builders go one step further for a batch: they build the
values column by column, each column one C-level ``map`` of a slot setter over the objects, so
no Python frame runs per value (about 50 ns a field). Each builder sets every field: the field
names are checked against ``dataclasses.fields`` at import (``model.slots.setters``), so a field
added to one of these classes fails loudly instead of leaving a slot unset.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any

from strata_policy.model import (
    Decision,
    Placement,
    RunningWorkload,
    Workload,
    WorkloadResult,
    new_result,
)
from strata_policy.model.resources import Resources
from strata_policy.model.slots import setters

_new = object.__new__
_drain: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend  # runs an iterator in C


_P_NODE, _P_DEVICES = setters(Placement, ("node_id", "gpu_devices"))
_R_WORKLOAD, _R_PLACEMENTS, _R_AT = setters(
    RunningWorkload, ("workload", "placements", "admitted_at_ms")
)
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
