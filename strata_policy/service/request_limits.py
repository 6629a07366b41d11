"""Checks a request passes before it is converted: its ids and the counts of its lists.

Converting costs in proportion to what was sent (a PushSnapshot of a million scopes took 5-12 s
of CPU and 300-430 MiB before the engine refused it as too big), so the size limits are checked
first from the repeated fields' lengths on the protobuf message, which protobuf already knows,
and the ids (kept as keys: clusters, remembered answers) from their lengths. The engine checks
the same limits again on what it is given, for in-process callers; here they only come sooner.
"""

from __future__ import annotations

from strata.policy.v1 import policy_service_pb2 as svc

from strata_policy.state import validate
from strata_policy.state.limits import Limits


def check_ids(cluster_id: str, request_id: str) -> None:
    """``InvalidArgument`` for an empty or overlong cluster id or an overlong request id."""
    validate.check_request_ids(cluster_id, request_id)


def check_push(limits: Limits, request: svc.PushSnapshotRequest) -> None:
    """A PushSnapshot's ids, and its node, scope and workload counts against the limits."""
    check_ids(request.cluster_id, request.request_id)
    snap = request.snapshot
    limits.check_sizes(len(snap.nodes), len(snap.scopes), len(snap.workloads))


def check_update(limits: Limits, request: svc.UpdateSnapshotRequest) -> None:
    """An UpdateSnapshot's ids, and each list of its delta against the limit of its kind (no
    cluster can hold more, so no delta needs more upserts or removals)."""
    check_ids(request.cluster_id, request.request_id)
    limits.check_sizes(
        max(len(request.upsert_nodes), len(request.remove_node_ids)),
        max(len(request.upsert_scopes), len(request.remove_scope_ids)),
        max(len(request.upsert_workloads), len(request.remove_workload_ids)),
    )


def check_batch(limits: Limits, cluster_id: str, request_id: str, size: int) -> None:
    """An Admit, Place or Release: ids, and the number of workloads against ``max_batch``."""
    check_ids(cluster_id, request_id)
    if size > limits.max_batch:
        limits.check_batch(size)
