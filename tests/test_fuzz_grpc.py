"""Hypothesis over real gRPC: valid and invalid snapshots and calls never crash or half-apply."""

from __future__ import annotations

import uuid
from typing import Any

from cluster_invariants import violations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata_policy.service.client import Client, RpcError

EXPECTED_ERRORS = {"INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "NOT_FOUND", "ABORTED"}
ids = st.sampled_from(["a", "b", "c", "", "x" * 300])
amount = st.sampled_from([0, 1, 250, 500, 1000, 1500, 8000, 64000, -1, 2**62, 2**63 - 1])
gpu_capacity = st.sampled_from([0, 1000, 4000, 8000, 1500, -1000, 65000 * 1000])
gpu_request = st.sampled_from([0, 100, 250, 999, 1000, 1001, 2000, 8000, -5])


def resource_map(gpu: st.SearchStrategy[int]) -> st.SearchStrategy[dict[str, int]]:
    """A map with cpu, gpu and sometimes an odd resource name."""
    return st.fixed_dictionaries({"cpu": amount, "gpu": gpu}, optional={"": amount, "rdma": amount})


nodes = st.fixed_dictionaries(
    {"id": st.sampled_from(["n1", "n2", "n3", ""]), "capacity": resource_map(gpu_capacity)},
    optional={"unschedulable": st.booleans(), "gpuModel": st.sampled_from(["A100", "V100"])},
)
scopes = st.fixed_dictionaries(
    {"id": ids},
    optional={
        "parentId": ids,
        "guarantee": resource_map(gpu_request),
        "limit": resource_map(gpu_request),
        "weight": st.sampled_from([1.0, 0.5, 0.0, -1.0, "Infinity"]),
    },
)


def workloads(prefix: str) -> st.SearchStrategy[dict[str, Any]]:
    """A workload with mostly sane, sometimes invalid fields."""
    return st.fixed_dictionaries(
        {
            "id": st.builds(lambda n: f"{prefix}{n}", st.integers(0, 5)),
            "scopeId": ids,
            "request": resource_map(gpu_request),
        },
        optional={
            "replicas": st.sampled_from([1, 2, 3, 0, -1, 200_000]),
            "priority": st.integers(-3, 3),
            "preemptible": st.booleans(),
            "spread": st.just({"topologyKey": "kubernetes.io/hostname"}),
            "gpuModel": st.sampled_from(["A100", "A100|V100", "H100"]),
        },
    )


running = st.fixed_dictionaries(
    {"workload": workloads("r")},
    optional={
        "placements": st.lists(
            st.fixed_dictionaries(
                {"nodeId": st.sampled_from(["n1", "n2", "zz"])},
                optional={"gpuDevices": st.lists(st.integers(-1, 9), max_size=3)},
            ),
            max_size=3,
        )
    },
)
snapshots = st.fixed_dictionaries(
    {
        "nodes": st.lists(nodes, max_size=4),
        "scopes": st.lists(scopes, max_size=4),
        "workloads": st.lists(running, max_size=3),
    }
)
some_ids = st.lists(st.sampled_from(["w0", "w1", "r0", "?"]), max_size=3)
batch = st.lists(workloads("w"), max_size=3)
delta = st.fixed_dictionaries(
    {},
    optional={
        "upsertNodes": st.lists(nodes, max_size=2),
        "removeNodeIds": st.lists(st.sampled_from(["n1", "n2", "?"]), max_size=2),
        "upsertScopes": st.lists(scopes, max_size=2),
        "removeScopeIds": st.lists(ids, max_size=2),
    },
)
reclaim = st.fixed_dictionaries(
    {"workload": workloads("w"), "requirePlacement": st.booleans(), "dryRun": st.booleans()}
)
calls = st.one_of(
    st.tuples(st.just("Admit"), st.fixed_dictionaries({"workloads": batch})),
    st.tuples(st.just("Place"), st.fixed_dictionaries({"workloads": batch})),
    st.tuples(st.just("Place"), st.fixed_dictionaries({"workloadIds": some_ids})),
    st.tuples(st.just("Release"), st.fixed_dictionaries({"workloadIds": some_ids})),
    st.tuples(st.just("Reclaim"), reclaim),
    st.tuples(st.just("UpdateSnapshot"), delta),
)


def generation(client: Client, cluster_id: str) -> int | None:
    """The cluster's generation, or None when it does not exist."""
    try:
        return int(client.call("GetCluster", {"clusterId": cluster_id})["generation"])
    except RpcError as exc:
        code = exc.code
    assert code == "NOT_FOUND"
    return None


def checked(client: Client, method: str, request: dict[str, Any]) -> bool:
    """Make a call; True when it succeeded, False for an expected error; fail on anything else."""
    try:
        client.call(method, request)
    except RpcError as exc:
        failure = exc
    else:
        return True
    assert failure.code in EXPECTED_ERRORS, f"{method} answered {failure}"
    return False


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(snapshot=snapshots, plan=st.lists(calls, max_size=6))
def test_fuzzed_calls_keep_the_invariants(
    client: Client, snapshot: dict[str, Any], plan: list[tuple[str, dict[str, Any]]]
) -> None:
    """Any snapshot and calls: only expected errors, failures change nothing, invariants hold."""
    cid = f"fuzz-{uuid.uuid4().hex[:10]}"
    if not checked(client, "PushSnapshot", {"clusterId": cid, "snapshot": snapshot}):
        assert generation(client, cid) is None, "a refused push created the cluster"
        return
    limits_held = violations(client, cid, check_limits=True) == []
    for method, body in plan:
        before = generation(client, cid)
        ok = checked(client, method, {"clusterId": cid, **body})
        if not ok:
            assert generation(client, cid) == before, f"a failed {method} changed the cluster"
        assert violations(client, cid, check_limits=limits_held) == []
    client.call("DeleteCluster", {"clusterId": cid})
