"""Validation of what a request carries: its workloads against the cluster they target, its
ids, its placement options, and how many replicas it asks for."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import Workload
from strata_policy.placement.place import PlacementOptions
from strata_policy.state import validate
from strata_policy.state.cluster import ClusterState

_REPLICAS = operator.attrgetter("replicas")


def check_new_workloads(state: ClusterState, workloads: Sequence[Workload], path: str) -> None:
    """Each workload is valid, names a known scope, and its id is new to batch and cluster.

    A batch is first checked as a whole (``validate.workloads_plainly_valid``); only one that
    may hold a problem is walked field by field, to name every violation. This runs on every
    Admit and Place: the state's tables are looked up once, not per workload.
    """
    if len(workloads) > 1 and validate.workloads_plainly_valid(
        workloads, state.tree.scopes, state.workloads
    ):
        return
    out: list[FieldViolation] = []
    seen: set[str] = set()
    scopes, held = state.tree.scopes, state.workloads
    for i, w in enumerate(workloads):
        where = f"{path}[{i}]" if path == "workloads" else path
        validate.workload(w, where, scopes, out)
        wid = w.id
        if wid in seen:
            out.append(FieldViolation(f"{where}.id", f"duplicate workload id {wid!r} in the batch"))
        elif wid in held:
            out.append(FieldViolation(f"{where}.id", f"workload {wid!r} is already admitted"))
        seen.add(wid)
    if out:
        raise InvalidArgument(out)


def check_ids(ids: Sequence[str], path: str) -> None:
    """Ids in a list are not empty."""
    validate.check(
        [
            FieldViolation(f"{path}[{i}]", "must not be empty")
            for i, wid in enumerate(ids)
            if not wid
        ]
    )


def check_options(options: PlacementOptions) -> None:
    """Resource weights, coverage and task types are valid (``state.validate``)."""
    validate.check(
        validate.placement_options(options.resource_weights, options.coverage, options.task_types)
    )


def replicas(workloads: Sequence[Workload]) -> int:
    """Replicas a batch asks for, for the batch limit (out-of-range counts are the validator's
    to report, so each counts as at most ``MAX_REPLICAS`` here)."""
    if len(workloads) == 1:  # every Admit of one workload: no list, no min/max
        return min(max(workloads[0].replicas, 0), validate.MAX_REPLICAS)
    counts = list(map(_REPLICAS, workloads))
    if counts and (min(counts) < 0 or max(counts) > validate.MAX_REPLICAS):
        return sum(min(max(r, 0), validate.MAX_REPLICAS) for r in counts)
    return sum(counts)
