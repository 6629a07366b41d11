"""What the engine answers: decisions, reasons, victims, per-workload results, scope status.

A denial is a value, never an exception: every "no" carries ordered, machine-readable reasons.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from strata_policy.model.objects import Placement
from strata_policy.model.resources import Resources
from strata_policy.model.slots import setters


class Decision(enum.Enum):
    """The outcome for one workload."""

    ADMITTED = "ADMITTED"
    DENIED = "DENIED"
    NEEDS_RECLAIM = "NEEDS_RECLAIM"
    PLACED = "PLACED"
    UNPLACED = "UNPLACED"


class Order(enum.Enum):
    """The order a batch is decided in."""

    FIFO = "FIFO"
    PRIORITY = "PRIORITY"
    FAIR = "FAIR"


class Policy(enum.Enum):
    """How a node is chosen among the feasible ones (DESIGN §3)."""

    FIRST_FIT = "FIRST_FIT"
    BEST_FIT = "BEST_FIT"
    LEAST_ALLOCATED = "LEAST_ALLOCATED"
    MOST_ALLOCATED = "MOST_ALLOCATED"
    BALANCED_ALLOCATION = "BALANCED_ALLOCATION"
    DOT_PRODUCT = "DOT_PRODUCT"
    FRAGMENTATION_AWARE = "FRAGMENTATION_AWARE"
    RANDOM = "RANDOM"


class VictimReason(enum.Enum):
    """Why a running workload was chosen for eviction."""

    RECLAIM_BORROWED = "RECLAIM_BORROWED"
    LOWER_PRIORITY = "LOWER_PRIORITY"


class ReasonCode(enum.StrEnum):
    """Machine-readable reason codes (UPPER_SNAKE on the wire)."""

    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    NO_HEADROOM = "NO_HEADROOM"
    NO_VICTIMS = "NO_VICTIMS"
    NODES_UNFIT = "NODES_UNFIT"
    NOT_ADMITTED = "NOT_ADMITTED"
    ALREADY_PLACED = "ALREADY_PLACED"
    QUOTA_DENIED = "QUOTA_DENIED"


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason behind a decision; numeric fields are 0 where they do not apply."""

    code: str
    message: str
    scope_id: str = ""
    resource: str = ""
    usage: int = 0
    limit: int = 0
    request: int = 0
    available: int = 0
    node_counts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Victim:
    """A running workload to evict, why, and what evicting it frees."""

    workload_id: str
    scope_id: str
    reason: VictimReason
    freed: Resources
    priority: int = 0


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    """The decision for one workload of a batch."""

    workload_id: str
    decision: Decision
    placements: tuple[Placement, ...] = ()
    reasons: tuple[Reason, ...] = ()
    borrowed: Resources = field(default_factory=dict)
    victims: tuple[Victim, ...] = ()
    score: float = 0.0
    explanation: str = ""


RESULT_SETTERS = setters(
    WorkloadResult,
    ("workload_id", "decision", "placements", "reasons", "borrowed", "victims", "score",
     "explanation"),
)  # fmt: skip
"""``WorkloadResult``'s slot setters in field order, for builders that skip its ``__init__``."""
_R_ID, _R_DECISION, _R_PLACEMENTS, _R_REASONS, _R_BORROWED, _R_VICTIMS, _R_SCORE, _R_TEXT = (
    RESULT_SETTERS
)


def new_result(
    workload_id: str,
    decision: Decision,
    placements: tuple[Placement, ...],
    borrowed: Resources,
    score: float,
) -> WorkloadResult:
    """``WorkloadResult(workload_id, decision, placements, borrowed=borrowed, score=score)``,
    built through its slots (``model.slots``): the result of each admitted or placed workload,
    one of the commonest values the engine makes (no reasons, victims or explanation)."""
    out: WorkloadResult = object.__new__(WorkloadResult)
    _R_ID(out, workload_id)
    _R_DECISION(out, decision)
    _R_PLACEMENTS(out, placements)
    _R_REASONS(out, ())
    _R_BORROWED(out, borrowed)
    _R_VICTIMS(out, ())
    _R_SCORE(out, score)
    _R_TEXT(out, "")
    return out


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    """What a Release freed and what it did not know."""

    generation: int
    released: tuple[str, ...]
    not_found: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The results of an Admit or Place batch, in decision order."""

    generation: int
    results: tuple[WorkloadResult, ...]


@dataclass(frozen=True, slots=True)
class ReclaimResult:
    """Victims for a pending workload; with a commit, the workload's own result."""

    generation: int
    satisfiable: bool
    victims: tuple[Victim, ...] = ()
    reasons: tuple[Reason, ...] = ()
    result: WorkloadResult | None = None


@dataclass(frozen=True, slots=True)
class ScopeStatus:
    """A scope as the engine sees it, for GetCluster and the CLI.

    ``guarantee`` is what the scope sets; ``effective_guarantee`` is the ``G`` every quota rule
    uses (DESIGN §2: the set value, else the children's sum, else 0), and ``borrowed`` is usage
    above ``G``. ``oversubscribed`` lists the resources whose set guarantee is below the sum of
    the children's ``G``, sorted by name.
    """

    id: str
    parent_id: str
    kind: str
    usage: Resources
    guarantee: Resources
    limit: Resources
    borrowed: Resources
    weight: float
    at_limit: tuple[str, ...]
    workload_count: int
    effective_guarantee: Resources = field(default_factory=dict)
    oversubscribed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GetCluster's answer."""

    generation: int
    node_count: int
    scope_count: int
    workload_count: int
    scopes: tuple[ScopeStatus, ...]
    capacity: Resources
    allocated: Resources
