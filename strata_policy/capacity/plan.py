"""A capacity plan's values (DESIGN §4 ``PlanCapacity``, §8): what to add, what can go, what is
short, what it costs and how far that is from the LP optimum. Frozen values, no behaviour."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from strata_policy.model import Reason
from strata_policy.model.decisions import Policy
from strata_policy.placement.place import PlacementOptions

DEFAULT_DISRUPTION_BUDGET = 1
"""``disruption_budget`` 0 means this many nodes: one node at a time, Karpenter's own pace
(one disruption command per pass) and the safest choice when the caller did not say."""


class ConsolidationAction(enum.Enum):
    """REMOVE: the node goes, its replicas move to nodes that stay. REPLACE: the node goes and
    one new node of a cheaper group takes every replica."""

    REMOVE = "REMOVE"
    REPLACE = "REPLACE"


class CheckKind(enum.Enum):
    """GUARANTEE_BACKED: a scope's effective guarantee can be placed. N_PLUS_ONE: what a
    failure domain runs within guarantees re-places on the rest."""

    GUARANTEE_BACKED = "GUARANTEE_BACKED"
    N_PLUS_ONE = "N_PLUS_ONE"


@dataclass(frozen=True, slots=True)
class ScaleUp:
    """``count`` new nodes of a group (not its target size) and the workloads that land there."""

    node_group_id: str
    count: int
    workload_ids: tuple[str, ...]
    node_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Move:
    """One replica's new node."""

    workload_id: str
    node_id: str


@dataclass(frozen=True, slots=True)
class Consolidation:
    """A node to remove or replace, where each of its replicas goes, and what that saves."""

    node_id: str
    action: ConsolidationAction
    replacement_group_id: str
    moves: tuple[Move, ...]
    saving_per_hour: float
    evictions: int


@dataclass(frozen=True, slots=True)
class Unplaceable:
    """A pending workload no plan can hold, and why (Place's reasons, or LIMIT_EXCEEDED)."""

    workload_id: str
    reasons: tuple[Reason, ...]


@dataclass(frozen=True, slots=True)
class CapacityCheck:
    """One shortfall: ``short`` of ``resource`` for ``scope_id`` in ``domain`` ("" = cluster)."""

    kind: CheckKind
    domain: str
    scope_id: str
    resource: str
    short: int


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    """The whole answer; ``cost_per_hour`` ≥ ``lower_bound_per_hour`` ≥ 0."""

    scale_up: tuple[ScaleUp, ...] = ()
    consolidation: tuple[Consolidation, ...] = ()
    unplaceable: tuple[Unplaceable, ...] = ()
    checks: tuple[CapacityCheck, ...] = ()
    cost_per_hour: float = 0.0
    lower_bound_per_hour: float = 0.0
    placements: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Pending workload id → node id per replica, as the plan places it (new nodes included)."""

    def added_node_ids(self) -> tuple[str, ...]:
        """The scale-up's new nodes, in the order a client appends them to its snapshot."""
        return tuple(nid for s in self.scale_up for nid in s.node_ids)


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """How to plan: the placement options (policy and FGD mix) every placement uses, the
    disruption budget (0 = ``DEFAULT_DISRUPTION_BUDGET``), and what to compute.
    ``fill_by_mix`` chooses new nodes' groups by how well their shape holds the pending mix
    rather than by what is cheapest for the replicas pending now (``estimate``); off for a
    one-shot plan (least cost per hour now, DESIGN §8), on for a controller that keeps a
    cluster over time (the replay's Strata autoscaler). ``arrange`` below likewise.

    The default policy is FRAGMENTATION_AWARE: a packing policy (MOST_ALLOCATED) puts CPU-only
    work on a new GPU node's spare CPU and strands its GPUs (on the ``make bench`` case it
    needs 499 new T4 nodes where FGD needs the estimator's 375)."""

    placement: PlacementOptions = field(
        default_factory=lambda: PlacementOptions(policy=Policy.FRAGMENTATION_AWARE)
    )
    disruption_budget: int = 0
    consolidate: bool = True
    checks: bool = True
    max_candidates: int = 100
    """Consolidation tries at most this many candidates, in its order. Karpenter bounds its
    search by time (1 min multi-node, 3 min single-node); a bound in count keeps the plan
    deterministic and its cost independent of the cluster's size."""
    fill_by_mix: bool = False
    arrange: bool = False
    keep: frozenset[str] = frozenset()
    """Node ids consolidation never names: a controller's nodes that work it placed itself
    waits for (the replay's Strata autoscaler: a node a nominated workload awaits is empty at
    plan time, and removing it would evict that workload when it lands)."""
    """Place pending work with ``arrange.arrange`` (steady CPU work last, into the spare room of
    GPU nodes that stay, their GPUs' CPU reserved) instead of one ``place_batch``: off for a
    one-shot plan, on for a controller that also places what it planned (the replay's Strata
    autoscaler, whose cluster places pending work as the plan says, DESIGN §9)."""

    @property
    def budget(self) -> int:
        """The disruption budget in nodes."""
        return self.disruption_budget or DEFAULT_DISRUPTION_BUDGET
