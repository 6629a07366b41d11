"""The workload mix a cluster has seen, for fragmentation-aware placement (FGD).

FGD (Weng et al., USENIX ATC 2023) measures a node's GPU fragmentation against the *typical*
task shapes: tasks grouped by (cpu, gpu request, allowed GPU models), most common first, until
they cover 95 % of the tasks seen, with their shares renormalised. ``TaskMix`` keeps those counts.
It counts replicas (each replica is one pod in the paper's terms), so a gang of 8 weighs as much
as 8 single pods. ``observe`` is a dict increment; ``typical`` is cached until the next change.

Only FGD reads the mix, but every commit feeds it. So that a commit under any other policy runs
no code of this module, a commit appends the workloads it upserted to ``pending`` (a C-level
``list.append`` of a lazy ``map``; ``engine.commit``) and the mix counts them when it is next
read or changed: every method but ``observe_many`` folds ``pending`` in first, so each answers
exactly what observing every commit at once would have (the counts do not depend on the order
they come in). The commit folds them in itself every ``MAX_PENDING`` commits, so a cluster
whose mix is never read holds at most that many batches. Like the counts, ``pending`` is read
and written under the cluster's lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from strata_policy.model.objects import Workload
from strata_policy.model.resources import CPU, GPU

Shape = tuple[int, int, str]  # (cpu milli, gpu milli per replica, allowed models "A|B" sorted)
MAX_PENDING = 64


@dataclass(frozen=True, slots=True)
class TaskType:
    """One typical task shape and its share of the mix.

    ``gpu_milli`` is the per-replica GPU request: a share (< 1000) of one device or ``k × 1000``
    whole devices; 0 for a CPU-only shape. ``gpu_model`` is the allowed models (``A|B``; empty =
    any). ``weight`` is the shape's probability among the typical shapes (they sum to 1).
    """

    cpu_milli: int
    gpu_milli: int
    gpu_model: str = ""
    weight: float = 1.0

    @property
    def request(self) -> dict[str, int]:
        """The per-replica request this shape stands for (zero entries left out)."""
        return {k: v for k, v in ((CPU, self.cpu_milli), (GPU, self.gpu_milli)) if v}

    @property
    def shape(self) -> Shape:
        """The grouping key, without the weight."""
        return (self.cpu_milli, self.gpu_milli, self.gpu_model)


def shape_of(workload: Workload) -> Shape:
    """The FGD grouping key of one replica of ``workload``."""
    spec = workload.gpu_model
    models = "|".join(sorted(workload.gpu_models)) if "|" in spec else spec
    return (int(workload.request.get(CPU, 0)), int(workload.request.get(GPU, 0)), models)


class TaskMix:
    """Replica counts per task shape; ``typical()`` gives the shapes FGD measures against."""

    __slots__ = ("_cache", "_counts", "_total", "pending")

    def __init__(self) -> None:
        self._counts: dict[Shape, int] = {}
        self._total = 0
        self._cache: dict[float, tuple[TaskType, ...]] = {}
        self.pending: list[Iterable[Workload]] = []
        """Workloads committed but not counted yet, a batch per commit (module docs)."""

    def fold(self) -> None:
        """Count the ``pending`` batches (``observe_many`` of each) and empty it."""
        pending = self.pending
        while pending:
            self.observe_many(pending.pop())

    def observe(self, workload: Workload) -> None:
        """Count the workload's replicas under its shape (``observe_many`` of one)."""
        self.fold()
        key = shape_of(workload)
        self._counts[key] = self._counts.get(key, 0) + workload.replicas
        self._total += workload.replicas
        self._cache.clear()

    def observe_many(self, workloads: Iterable[Workload]) -> None:
        """``observe`` each workload; the shape is worked out once per distinct (cpu, gpu,
        model) as the workload states them (``shape_of`` is a function of those three alone:
        it normalises the amounts' type and the order of the models), so a big batch of a
        handful of shapes costs two dict reads and a tuple per workload."""
        counts = self._counts
        shapes: dict[tuple[object, object, str], Shape] = {}
        added = 0
        for w in workloads:
            request = w.request
            seen = (request.get(CPU, 0), request.get(GPU, 0), w.gpu_model)
            key = shapes.get(seen)
            if key is None:
                key = shapes[seen] = shape_of(w)
            counts[key] = counts.get(key, 0) + w.replicas
            added += w.replicas
        if added:
            self._total += added
            self._cache.clear()

    def forget(self, workload: Workload) -> None:
        """Undo one ``observe`` of ``workload`` (counts never go below zero)."""
        self.fold()
        key = shape_of(workload)
        have = self._counts.get(key, 0)
        take = min(have, workload.replicas)
        if have - take:
            self._counts[key] = have - take
        else:
            self._counts.pop(key, None)
        self._total -= take
        self._cache.clear()

    @property
    def total(self) -> int:
        """Replicas observed."""
        self.fold()
        return self._total

    def typical(self, coverage: float = 0.95) -> tuple[TaskType, ...]:
        """The most common shapes until they cover ``coverage`` of the replicas seen.

        Most common first (ties by shape, so the answer is deterministic); the shape that
        crosses the coverage is included; weights renormalised to sum to 1. Empty when nothing
        was observed.
        """
        self.fold()
        found = self._cache.get(coverage)
        if found is not None:
            return found
        ranked = sorted(self._counts.items(), key=lambda kv: (-kv[1], kv[0]))
        chosen: list[tuple[Shape, int]] = []
        covered = 0
        for key, count in ranked:
            chosen.append((key, count))
            covered += count
            if covered >= coverage * self._total:
                break
        result = tuple(
            TaskType(cpu, gpu, models, count / covered) for (cpu, gpu, models), count in chosen
        )
        self._cache[coverage] = result
        return result

    def copy(self) -> TaskMix:
        """An independent copy."""
        self.fold()
        other = TaskMix()
        other._counts = dict(self._counts)
        other._total = self._total
        return other
