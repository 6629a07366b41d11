"""Validation of the workloads a request carries, against the cluster they target."""

from __future__ import annotations

import operator
from collections.abc import Sequence

from strata_policy.errors import FieldViolation, InvalidArgument
from strata_policy.model import Workload
from strata_policy.model.resources import GPU, MAX_AMOUNT, valid_gpu_request
from strata_policy.state import validate
from strata_policy.state.cluster import ClusterState

_ID = operator.attrgetter("id")
_SCOPE = operator.attrgetter("scope_id")
_REQUEST = operator.attrgetter("request")
_REPLICAS = operator.attrgetter("replicas")


def check_new_workloads(state: ClusterState, workloads: Sequence[Workload], path: str) -> None:
    """Each workload is valid, names a known scope, and its id is new to batch and cluster.

    A batch is first checked as a whole (``_plainly_valid``); only one that may hold a problem
    is walked field by field, to name every violation. This runs on every Admit and Place: the
    state's tables are looked up once, not per workload.
    """
    if len(workloads) > 1 and _plainly_valid(state, workloads):
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


def _plainly_valid(state: ClusterState, workloads: Sequence[Workload]) -> bool:
    """True only when the field-by-field check would find nothing; False sends the batch to it.

    The same rules as ``validate.workload`` plus the batch's (new, distinct ids), asked of the
    whole batch at once with C-level passes (sets, ``map``, ``min``/``max``) instead of a call
    per workload: a batch of 10,000 costs well under a microsecond a workload. A Hypothesis
    property keeps it from accepting anything the walk would refuse.
    """
    ids = list(map(_ID, workloads))
    if len(set(ids)) != len(ids) or not state.workloads.keys().isdisjoint(ids):
        return False
    lengths = list(map(len, ids))
    if min(lengths) < 1 or max(lengths) > validate.MAX_ID_LENGTH:
        return False
    scopes = set(map(_SCOPE, workloads))
    known = state.tree.scopes
    if "" in scopes or not all(s in known for s in scopes):
        return False
    replicas = list(map(_REPLICAS, workloads))
    most = max(replicas)
    if min(replicas) < 1 or most > validate.MAX_REPLICAS:
        return False
    requests = list(map(_REQUEST, workloads))
    if "" in set().union(*requests):
        return False
    amounts = [a for r in requests for a in r.values()]
    if not all(0 <= a <= MAX_AMOUNT for a in amounts):
        return False
    if most > 1 and amounts and max(amounts) * most > MAX_AMOUNT:
        return False  # an overflow is possible: the walk checks each gang
    gpus = {r.get(GPU, 0) for r in requests}
    return all(valid_gpu_request(g) for g in gpus if g > 0)


def check_ids(ids: Sequence[str], path: str) -> None:
    """Ids in a list are not empty."""
    validate.check(
        [
            FieldViolation(f"{path}[{i}]", "must not be empty")
            for i, wid in enumerate(ids)
            if not wid
        ]
    )
