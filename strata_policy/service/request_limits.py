"""The size checks of UpdateSnapshot, made on the protobuf message before it is converted
(PushSnapshot's are made on the counts its byte reader takes, ``snapshot_decoder.decode_push``).

Converting costs in proportion to what was sent (a PushSnapshot of a million scopes took 5-12 s
of CPU and 300-430 MiB before the engine refused it as too big), so the size limits are checked
first from the repeated fields' lengths on the message, which protobuf already knows. Only these
read a message (so they live in ``service``); every other check of a request, including an
Admit's, Place's or Release's ids and batch size (``check_batch``), is ``state.request_checks``'.
The engine checks the same limits again on what it is given, for in-process callers; here they
only come sooner.
"""

from __future__ import annotations

from strata.policy.v1 import policy_service_pb2 as svc

from strata_policy.state.request_checks import Limits, check_request_ids


def check_update(limits: Limits, request: svc.UpdateSnapshotRequest) -> None:
    """An UpdateSnapshot's ids, and each list of its delta against the limit of its kind (no
    cluster can hold more, so no delta needs more upserts or removals)."""
    check_request_ids(request.cluster_id, request.request_id)
    limits.check_sizes(
        max(len(request.upsert_nodes), len(request.remove_node_ids)),
        max(len(request.upsert_scopes), len(request.remove_scope_ids)),
        max(len(request.upsert_workloads), len(request.remove_workload_ids)),
    )
