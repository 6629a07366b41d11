"""A batch's results as the batch lane makes them: runs of PLACED results in columns.

A Place of 1,000 workloads placed through the batch lane (``engine.place``) has its
results in four columns — ids, placement tuples, borrowed amounts, scores — before any
``WorkloadResult`` exists, and building those 1,000 values (eight slots each, and as many
objects for the cyclic collector to walk) costs about a tenth of placing them. ``Engine.place``
answers the values, as embedders read them; the Place RPC's encoder
(``service.result_encoder.columnar_bytes``) writes the columns straight to the wire and builds none.

``ColumnarBatch.batch_result()`` is exactly the ``BatchResult`` the engine answered before this
existed (``tests/test_columnar.py``: arbitrary columns, and the engine's answers, both ways).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from strata_policy.model.decisions import RESULT_SETTERS, BatchResult, Decision, WorkloadResult
from strata_policy.model.objects import Placement
from strata_policy.model.resources import Resources

_new = object.__new__
_drain: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend  # runs an iterator in C
_ID, _DECISION, _PLACEMENTS, _REASONS, _BORROWED, _VICTIMS, _SCORE, _TEXT = RESULT_SETTERS
_PLACED = Decision.PLACED


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
