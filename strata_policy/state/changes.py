"""Deltas and committed changes: what UpdateSnapshot applies and what the journal records.

Every committed change is one ``Change``: a whole snapshot (PushSnapshot), a ``Delta`` (an
UpdateSnapshot, or the workload upserts/removals an Admit, Place, Release or Reclaim committed),
or a deletion. Replaying a cluster's changes in generation order rebuilds it exactly, so the
journal never re-runs a policy.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from strata_policy.errors import FieldViolation
from strata_policy.model import Node, RunningWorkload, Scope, Snapshot
from strata_policy.state import validate

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Delta:
    """Upserts and removals; removals apply first, then upserts (replace by id or append)."""

    upsert_nodes: tuple[Node, ...] = ()
    remove_node_ids: tuple[str, ...] = ()
    upsert_scopes: tuple[Scope, ...] = ()
    remove_scope_ids: tuple[str, ...] = ()
    upsert_workloads: tuple[RunningWorkload, ...] = ()
    remove_workload_ids: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the delta changes nothing."""
        return not any(
            (
                self.upsert_nodes,
                self.remove_node_ids,
                self.upsert_scopes,
                self.remove_scope_ids,
                self.upsert_workloads,
                self.remove_workload_ids,
            )
        )


class ChangeKind(enum.Enum):
    """What a committed change replaces."""

    PUSH = "push"
    DELTA = "delta"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Change:
    """One committed change to one cluster, at the generation it produced."""

    cluster_id: str
    generation: int
    kind: ChangeKind
    snapshot: Snapshot | None = None
    delta: Delta | None = None


def _apply(
    items: Sequence[T],
    key_of: Callable[[T], str],
    remove: Sequence[str],
    upsert: Sequence[T],
    path: str,
    out: list[FieldViolation],
) -> tuple[T, ...]:
    """Remove by id (unknown ids are violations), then replace in place or append."""
    by_id = {key_of(item): item for item in items}
    for i, rid in enumerate(remove):
        if rid not in by_id:
            out.append(FieldViolation(f"{path}[{i}]", f"unknown id {rid!r}"))
        by_id.pop(rid, None)
    for item in upsert:
        by_id[key_of(item)] = item
    return tuple(by_id.values())


def _node_id(n: Node) -> str:
    return n.id


def _scope_id(s: Scope) -> str:
    return s.id


def _workload_id(rw: RunningWorkload) -> str:
    return rw.workload.id


def apply_delta(snap: Snapshot, delta: Delta) -> tuple[Snapshot, list[FieldViolation]]:
    """The snapshot after ``delta``, and what is wrong with the delta itself.

    Upserted items are validated with the delta's own field paths; the structure of the result
    (parents, cycles, references) is validated by the caller with ``validate.snapshot_shape``.
    Removing a scope that still has children or workloads, or a node that still runs replicas, is
    a violation unless the same delta removes or moves those too.
    """
    out: list[FieldViolation] = []
    for i, n in enumerate(delta.upsert_nodes):
        validate.node(n, f"upsert_nodes[{i}]", out)
    validate.unique((n.id for n in delta.upsert_nodes), "upsert_nodes", "node", out)
    for i, s in enumerate(delta.upsert_scopes):
        validate.scope(s, f"upsert_scopes[{i}]", out)
    validate.unique((s.id for s in delta.upsert_scopes), "upsert_scopes", "scope", out)
    validate.unique(
        (rw.workload.id for rw in delta.upsert_workloads), "upsert_workloads", "workload", out
    )
    nodes = _apply(
        snap.nodes, _node_id, delta.remove_node_ids, delta.upsert_nodes, "remove_node_ids", out
    )
    scopes = _apply(
        snap.scopes, _scope_id, delta.remove_scope_ids, delta.upsert_scopes, "remove_scope_ids", out
    )
    workloads = _apply(
        snap.workloads,
        _workload_id,
        delta.remove_workload_ids,
        delta.upsert_workloads,
        "remove_workload_ids",
        out,
    )
    result = Snapshot(nodes, scopes, workloads)
    scope_ids = {s.id for s in scopes}
    for i, sid in enumerate(delta.remove_scope_ids):
        if sid in scope_ids:
            continue
        if any(s.parent_id == sid for s in scopes):
            out.append(
                FieldViolation(f"remove_scope_ids[{i}]", f"scope {sid!r} still has child scopes")
            )
        if any(rw.workload.scope_id == sid for rw in workloads):
            out.append(
                FieldViolation(f"remove_scope_ids[{i}]", f"scope {sid!r} still has workloads")
            )
    node_ids = {n.id for n in nodes}
    for i, nid in enumerate(delta.remove_node_ids):
        if nid in node_ids:
            continue
        if any(p.node_id == nid for rw in workloads for p in rw.placements):
            out.append(
                FieldViolation(
                    f"remove_node_ids[{i}]",
                    f"node {nid!r} still runs workloads; release them first",
                )
            )
    return result, out
