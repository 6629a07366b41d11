"""Which policy a replay runs, by name, and the PlacementOptions the engine gets for it.

A policy is named on the command line as ``NAME`` or ``NAME:variant``:

- ``NAME`` is any ``model.Policy`` (``FIRST_FIT``, ``BEST_FIT``, ``RANDOM``, ...) with the engine's
  own defaults; ``FRAGMENTATION_AWARE`` is the engine's default FGD, the refined score.
- ``BEST_FIT:paper`` weighs cpu and gpu 0.5 each, normalised by the largest node of the trace, as
  the FGD paper's Best-fit does (its memory term is absent: memory only filters there).
- ``FRAGMENTATION_AWARE:paper`` truncates the score to an integer like the paper's FGD
  (``int(100 · sigmoid(ΔF / 1000))``), ties going to the first node of the seed's order;
  ``FRAGMENTATION_AWARE:untruncated`` scores the strict ``−ΔF``; ``FRAGMENTATION_AWARE:refined``
  adds CPU-stranded GPU milli to ΔF and breaks ties by device best fit (``FgdScore``).

FGD needs the workload mix: the replay passes the trace's typical shapes explicitly
(``task_types``), the same 35 shapes on the openb default trace as the paper uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strata_policy.errors import InvalidArgument
from strata_policy.model import Policy
from strata_policy.model.resources import CPU, GPU
from strata_policy.placement.place import FgdScore, PlacementOptions
from strata_policy.simulate.metrics import Shape
from strata_policy.state.taskmix import TaskType

_FGD_VARIANTS = {
    "paper": FgdScore.PAPER,
    "untruncated": FgdScore.UNTRUNCATED,
    "refined": FgdScore.REFINED,
}
VARIANTS = {
    Policy.BEST_FIT: frozenset({"paper"}),
    Policy.FRAGMENTATION_AWARE: frozenset(_FGD_VARIANTS),
}
DEFAULT_POLICIES = (
    "RANDOM,BEST_FIT:paper,FRAGMENTATION_AWARE:paper,FRAGMENTATION_AWARE:untruncated,"
    "FRAGMENTATION_AWARE"
)


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy and its variant; ``label`` is how tables and plots name it."""

    policy: Policy
    variant: str = ""

    @property
    def label(self) -> str:
        """``NAME`` or ``NAME:variant``."""
        return f"{self.policy.value}:{self.variant}" if self.variant else self.policy.value


def parse_policy(text: str) -> PolicySpec:
    """``BEST_FIT`` or ``BEST_FIT:paper`` (case-insensitive) into a spec; bad names raise."""
    name, _, variant = text.strip().partition(":")
    try:
        policy = Policy[name.strip().upper()]
    except KeyError:
        names = ", ".join(p.value for p in Policy)
        raise InvalidArgument.one("policies", f"unknown policy {name!r} (one of {names})") from None
    variant = variant.strip().lower()
    if variant and variant not in VARIANTS.get(policy, ()):
        raise InvalidArgument.one(
            "policies",
            f"unknown variant {text!r}: only BEST_FIT:paper, FRAGMENTATION_AWARE:paper, "
            "FRAGMENTATION_AWARE:untruncated, FRAGMENTATION_AWARE:refined",
        )
    return PolicySpec(policy, variant)


def parse_policies(text: str) -> tuple[PolicySpec, ...]:
    """A comma-separated list of policies, duplicates dropped, order kept."""
    specs = [parse_policy(p) for p in text.split(",") if p.strip()]
    if not specs:
        raise InvalidArgument.one("policies", "no policy named")
    return tuple(dict.fromkeys(specs))


def task_types(shapes: Sequence[Shape]) -> tuple[TaskType, ...]:
    """The engine's FGD mix from the trace's typical shapes."""
    return tuple(TaskType(s.cpu, s.gpu, s.gpu_model, s.weight) for s in shapes)


def placement_options(spec: PolicySpec, seed: int, shapes: Sequence[Shape]) -> PlacementOptions:
    """The options one replay places with (RANDOM is seeded by the replay's seed)."""
    # The engine's BEST_FIT already measures leftovers against the cluster's largest node per
    # resource, so the paper's Best-fit is plain weights: cpu 0.5, gpu 0.5, memory 0.
    paper_best_fit = spec.policy is Policy.BEST_FIT and spec.variant == "paper"
    weights = {CPU: 0.5, GPU: 0.5} if paper_best_fit else {}
    fgd = spec.policy is Policy.FRAGMENTATION_AWARE
    return PlacementOptions(
        policy=spec.policy,
        resource_weights=weights,
        seed=seed,
        task_types=task_types(shapes) if fgd else (),
        fgd_score=_FGD_VARIANTS.get(spec.variant, FgdScore.REFINED) if fgd else FgdScore.REFINED,
    )
