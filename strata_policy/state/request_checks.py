"""Every check a request passes before it is decided: ids, sizes against the server's
``Limits``, each workload's fields against the cluster it targets, and placement options.

One module, so that a request's checks are found in one place and an Admit or a Place runs
them as one step: the servicer asks ``check_batch`` (ids and the batch size, before anything
is converted), the engine the rest (``check_new_workloads``, ``check_ids``, ``check_options``,
``Limits.check_batch`` with the replicas). Snapshots and deltas are checked field by field in
``state.validate``, which builds on the field checks here.

Every problem becomes a ``FieldViolation`` whose path reads like the request
(``workloads[3].request["cpu"]``), so a client can point at the exact field; the checks collect
every violation they can find rather than stopping at the first, and never build state: a call
that fails them changes nothing. A size over a limit is ``SizeLimitExceeded`` naming the limit.
The common case (nothing wrong) is decided with whole-batch passes first, for these run on every
call; a batch that may hold a problem is walked field by field.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from strata_policy.errors import FieldViolation, InvalidArgument, SizeLimitExceeded
from strata_policy.model.resources import GPU, MAX_AMOUNT, MILLI_PER_GPU
from strata_policy.quota.batch import representatives

if TYPE_CHECKING:  # kept light: the CLI reads ``Limits``' defaults for its flags
    from strata_policy.model import Workload
    from strata_policy.state.cluster import ClusterState
    from strata_policy.state.taskmix import TaskType

_ID = operator.attrgetter("id")
_SCOPE = operator.attrgetter("scope_id")
_REQUEST = operator.attrgetter("request")
_REPLICAS = operator.attrgetter("replicas")

MAX_REPLICAS = 10_000  # one gang; the largest training jobs are a few thousand replicas
MAX_ID_LENGTH = 253  # a Kubernetes object name: cluster, scope, node and workload ids
MAX_REQUEST_ID_LENGTH = 128  # a UUID is 36; room for a prefix, bounded for idempotency memory
MAX_WEIGHT = 1e9  # score weights and task-type weights


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits of one server; exceeding one is RESOURCE_EXHAUSTED naming the limit."""

    max_clusters: int = 1_000
    max_nodes: int = 200_000
    max_scopes: int = 100_000
    max_workloads: int = 2_000_000
    max_batch: int = 10_000
    max_batch_replicas: int = 100_000
    idempotency_entries: int = 10_000
    idempotency_results: int = 1_000_000  # results held by remembered answers, all clusters

    def check_sizes(self, nodes: int, scopes: int, workloads: int) -> None:
        """Raise ``SizeLimitExceeded`` for the first size above its limit."""
        for name, value, maximum in (
            ("max_nodes", nodes, self.max_nodes),
            ("max_scopes", scopes, self.max_scopes),
            ("max_workloads", workloads, self.max_workloads),
        ):
            if value > maximum:
                raise SizeLimitExceeded(name, value, maximum)

    def check_batch(self, size: int, replicas: int = 0) -> None:
        """Raise ``SizeLimitExceeded`` when a batch has too many workloads or replicas."""
        if size > self.max_batch:
            raise SizeLimitExceeded("max_batch", size, self.max_batch)
        if replicas > self.max_batch_replicas:
            raise SizeLimitExceeded("max_batch_replicas", replicas, self.max_batch_replicas)


def check(violations: list[FieldViolation]) -> None:
    """Raise ``InvalidArgument`` when there is anything to report."""
    if violations:
        raise InvalidArgument(violations)


def check_id(value: str, path: str, out: list[FieldViolation]) -> None:
    """An id: not empty, at most ``MAX_ID_LENGTH``."""
    if not value:
        out.append(FieldViolation(path, "must not be empty"))
    elif len(value) > MAX_ID_LENGTH:
        out.append(FieldViolation(path, f"longer than {MAX_ID_LENGTH} characters"))


def request_ids(cluster_id: str, request_id: str) -> list[FieldViolation]:
    """Every call's ``cluster_id`` (not empty, at most ``MAX_ID_LENGTH``) and ``request_id``
    (optional, at most ``MAX_REQUEST_ID_LENGTH``): both are kept as keys (clusters, remembered
    answers), so their length bounds what a caller can make the server hold."""
    out: list[FieldViolation] = []
    if not cluster_id or len(cluster_id) > MAX_ID_LENGTH:
        check_id(cluster_id, "cluster_id", out)
    if len(request_id) > MAX_REQUEST_ID_LENGTH:
        out.append(FieldViolation("request_id", f"longer than {MAX_REQUEST_ID_LENGTH} characters"))
    return out


def check_request_ids(cluster_id: str, request_id: str) -> None:
    """Raise ``InvalidArgument`` for ``request_ids``' violations; the common case (both fine)
    is decided inline, for this is on every call's path."""
    if not cluster_id or len(cluster_id) > MAX_ID_LENGTH or len(request_id) > MAX_REQUEST_ID_LENGTH:
        check(request_ids(cluster_id, request_id))


def check_batch(limits: Limits, cluster_id: str, request_id: str, size: int) -> None:
    """An Admit, Place or Release as the servicer gets it: ids, and the number of workloads
    against ``max_batch``, checked before the workloads are converted (converting costs in
    proportion to what was sent; the engine checks the same limit again, with the replicas,
    for in-process callers)."""
    check_request_ids(cluster_id, request_id)
    if size > limits.max_batch:
        limits.check_batch(size)


def id_list(ids: Sequence[str], path: str) -> list[FieldViolation]:
    """Ids named by a request (``workload_ids``): none empty or longer than ``MAX_ID_LENGTH``."""
    out: list[FieldViolation] = []
    if ids and (min(map(len, ids)) < 1 or max(map(len, ids)) > MAX_ID_LENGTH):
        for i, value in enumerate(ids):
            check_id(value, f"{path}[{i}]", out)
    return out


def check_ids(ids: Sequence[str], path: str) -> None:
    """Ids in a list are not empty."""
    check(
        [
            FieldViolation(f"{path}[{i}]", "must not be empty")
            for i, wid in enumerate(ids)
            if not wid
        ]
    )


def replicas(workloads: Sequence[Workload]) -> int:
    """Replicas a batch asks for, for the batch limit (out-of-range counts are the validator's
    to report, so each counts as at most ``MAX_REPLICAS`` here)."""
    if len(workloads) == 1:  # every Admit of one workload: no list, no min/max
        return min(max(workloads[0].replicas, 0), MAX_REPLICAS)
    counts = list(map(_REPLICAS, workloads))
    if counts and (min(counts) < 0 or max(counts) > MAX_REPLICAS):
        return sum(min(max(r, 0), MAX_REPLICAS) for r in counts)
    return sum(counts)


def amounts(values: Mapping[str, int], path: str, out: list[FieldViolation]) -> None:
    """Every amount is a non-negative integer below the overflow guard; names are not empty.

    Field paths are formatted only for a violation: this runs on every Admit.
    """
    for name, amount in values.items():
        if not name:
            out.append(FieldViolation(f'{path}["{name}"]', "resource name must not be empty"))
        if amount < 0:
            out.append(FieldViolation(f'{path}["{name}"]', f"must not be negative, got {amount}"))
        elif amount > MAX_AMOUNT:
            out.append(
                FieldViolation(f'{path}["{name}"]', f"{amount} is above the maximum {MAX_AMOUNT}")
            )


def valid_gpu_request(gpu_milli: int) -> bool:
    """Below 1000 (a share of one device) or a whole number of devices."""
    return gpu_milli >= 0 and (gpu_milli < MILLI_PER_GPU or gpu_milli % MILLI_PER_GPU == 0)


def resource_request(request: Mapping[str, int], path: str, out: list[FieldViolation]) -> None:
    """Valid amounts, and a GPU request that is a share of one device or whole devices."""
    amounts(request, path, out)
    gpu = request.get(GPU, 0)
    if gpu > 0 and not valid_gpu_request(gpu):
        out.append(
            FieldViolation(
                f'{path}["gpu"]',
                f"{gpu} is neither a share of one device (< 1000) nor whole devices (k × 1000)",
            )
        )


def workload(
    w: Workload, path: str, scopes: Mapping[str, object], out: list[FieldViolation]
) -> None:
    """A workload: id, known scope, valid amounts and GPU request, sane replicas.

    Field paths are formatted only for a violation: this runs on every Admit. A rule added here
    must be added to ``workloads_plainly_valid`` too (batches are asked that first).
    """
    if not w.id or len(w.id) > MAX_ID_LENGTH:
        check_id(w.id, f"{path}.id", out)
    if not w.scope_id:
        out.append(FieldViolation(f"{path}.scope_id", "must not be empty"))
    elif w.scope_id not in scopes:
        out.append(FieldViolation(f"{path}.scope_id", f"unknown scope {w.scope_id!r}"))
    request = w.request
    resource_request(request, f"{path}.request", out)
    replicas = w.replicas
    if replicas < 1 or replicas > MAX_REPLICAS:
        out.append(
            FieldViolation(f"{path}.replicas", f"must be 1 to {MAX_REPLICAS}, got {replicas}")
        )
    elif replicas > 1:
        for name, amount in request.items():
            if 0 <= amount <= MAX_AMOUNT and amount * replicas > MAX_AMOUNT:
                out.append(
                    FieldViolation(
                        f'{path}.request["{name}"]',
                        "request × replicas overflows the maximum amount",
                    )
                )


def workloads_plainly_valid(
    workloads: Sequence[Workload], scopes: Mapping[str, object], held: Mapping[str, object]
) -> bool:
    """True only when the field-by-field check would find nothing; False sends the batch to it.

    The same rules as ``workload`` (kept beside it: a rule added there must be added here) plus
    the batch's (ids distinct and new to ``held``), asked of the whole batch at once with
    C-level passes (sets, ``map``, ``min``/``max``) instead of a call per workload: a batch of
    10,000 costs well under a microsecond a workload. A Hypothesis property keeps it from
    accepting anything the walk would refuse.
    """
    ids = list(map(_ID, workloads))
    if len(set(ids)) != len(ids) or not held.keys().isdisjoint(ids):
        return False
    lengths = list(map(len, ids))
    if min(lengths) < 1 or max(lengths) > MAX_ID_LENGTH:
        return False
    named = set(map(_SCOPE, workloads))
    if "" in named or not all(s in scopes for s in named):
        return False
    replicas = list(map(_REPLICAS, workloads))
    most = max(replicas)
    if min(replicas) < 1 or most > MAX_REPLICAS:
        return False
    requests = list(map(_REQUEST, workloads))
    if "" in set().union(*requests):
        return False
    quantities = [a for r in requests for a in r.values()]
    if not all(0 <= a <= MAX_AMOUNT for a in quantities):
        return False
    if most > 1 and quantities and max(quantities) * most > MAX_AMOUNT:
        return False  # an overflow is possible: the walk checks each gang
    gpus = {r.get(GPU, 0) for r in requests}
    return all(valid_gpu_request(g) for g in gpus if g > 0)


def tagged_plainly_valid(
    workloads: Sequence[Workload],
    tags: Sequence[object] | None,
    scopes: Mapping[str, object],
    held: Mapping[str, object],
) -> bool:
    """True only when ``check_new_workloads`` would find nothing, asked of a tagged batch
    (False without tags: it is checked as usual).

    ``tags[i]`` is workload ``i``'s (the Place request decoder's): workloads whose tags are the
    same object differ only in id and ``queued_at_ms``, which no rule but the id's reads. So
    the ids are checked for the whole batch (distinct, new to the cluster, of a valid length:
    ``workloads_plainly_valid``'s id rules), the other fields only for the first workload of
    each distinct tag (``quota.batch.representatives``)."""
    if tags is None or len(workloads) < 2:
        return False
    ids = list(map(_ID, workloads))
    if len(set(ids)) != len(ids) or not held.keys().isdisjoint(ids):
        return False
    lengths = list(map(len, ids))
    if min(lengths) < 1 or max(lengths) > MAX_ID_LENGTH:
        return False
    firsts = [workloads[i] for i in representatives(tags)]
    return workloads_plainly_valid(firsts, scopes, held)


def check_new_workloads(
    state: ClusterState,
    workloads: Sequence[Workload],
    path: str,
    tags: Sequence[object] | None = None,
) -> None:
    """Each workload is valid, names a known scope, and its id is new to batch and cluster.

    A batch is first checked as a whole (``workloads_plainly_valid``, or with ``tags``
    ``tagged_plainly_valid``); only one that may hold a problem is walked field by field, to
    name every violation. This runs on every Admit and Place: the state's tables are looked up
    once, not per workload.
    """
    scopes, held = state.tree.scopes, state.workloads
    if tagged_plainly_valid(workloads, tags, scopes, held) or (
        len(workloads) > 1 and workloads_plainly_valid(workloads, scopes, held)
    ):
        return
    out: list[FieldViolation] = []
    seen: set[str] = set()
    for i, w in enumerate(workloads):
        where = f"{path}[{i}]" if path == "workloads" else path
        workload(w, where, scopes, out)
        wid = w.id
        if wid in seen:
            out.append(FieldViolation(f"{where}.id", f"duplicate workload id {wid!r} in the batch"))
        elif wid in held:
            out.append(FieldViolation(f"{where}.id", f"workload {wid!r} is already admitted"))
        seen.add(wid)
    if out:
        raise InvalidArgument(out)


class Options(Protocol):
    """What ``check_options`` reads of a request's placement options
    (``placement.PlacementOptions``)."""

    @property
    def resource_weights(self) -> Mapping[str, float]: ...

    @property
    def coverage(self) -> float: ...

    @property
    def task_types(self) -> Sequence[TaskType]: ...


def check_options(options: Options) -> None:
    """Resource weights, coverage and task types are valid (``placement_options``)."""
    check(placement_options(options.resource_weights, options.coverage, options.task_types))


def placement_options(
    weights: Mapping[str, float], coverage: float, task_types: Sequence[TaskType]
) -> list[FieldViolation]:
    """Placement options a request may set: score weights, FGD coverage and task types.

    Weights are finite numbers from 0 to ``MAX_WEIGHT`` (a NaN or an infinity would make every
    score NaN, and a negative one would reward using up a resource); coverage is a share in
    (0, 1]; task types have valid requests and a finite non-negative weight.
    """
    out: list[FieldViolation] = []
    for name, weight in weights.items():
        if not name:
            out.append(
                FieldViolation(f'resource_weights["{name}"]', "resource name must not be empty")
            )
        _weight(weight, f'resource_weights["{name}"]', out)
    if not (0 < coverage <= 1):  # also refuses NaN
        out.append(
            FieldViolation(
                "fragmentation.coverage", f"must be above 0 and at most 1, got {coverage}"
            )
        )
    for i, t in enumerate(task_types):
        where = f"fragmentation.task_types[{i}]"
        resource_request({"cpu": t.cpu_milli, "gpu": t.gpu_milli}, f"{where}.request", out)
        _weight(t.weight, f"{where}.weight", out)
    return out


def _weight(value: float, path: str, out: list[FieldViolation]) -> None:
    if not (math.isfinite(value) and 0 <= value <= MAX_WEIGHT):
        out.append(
            FieldViolation(path, f"must be a finite number from 0 to {MAX_WEIGHT:g}, got {value}")
        )
