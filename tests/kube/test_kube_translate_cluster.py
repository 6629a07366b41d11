"""Node, scope tree, Kueue, CloudNativePG and KServe translation tables."""

from __future__ import annotations

from typing import Any

import pytest

from strata_policy.kube.conventions import GpuConventions, TranslationError
from strata_policy.kube.nodes import node_to_strata
from strata_policy.kube.platforms import cnpg_cluster_to_workload, inference_service_to_workloads
from strata_policy.kube.scopes import kueue_to_scopes, namespace_scope, scope_tree
from strata_policy.kube.testing import namespace, node, strata_scope

GI = 1024**3


@pytest.mark.parametrize(
    ("built", "want"),
    [
        pytest.param(
            node("n1", cpu="3500m", memory="16Gi"),
            {"capacity": {"cpu": 3500, "memory": 16 * GI, "pods": 110}, "unschedulable": False},
            id="cpu and memory in base units, pods pass through",
        ),
        pytest.param(
            node("n1", gpus=8, product="A100-SXM4-80GB"),
            {"gpu": 8000, "gpuModel": "A100-SXM4-80GB"},
            id="whole GPUs and the GFD product",
        ),
        pytest.param(
            node(
                "n1",
                gpus=16,
                product="Tesla-T4-SHARED",
                labels={"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "4"},
            ),
            {"gpu": 4000, "gpuModel": "Tesla-T4"},
            id="time-slicing: replicas divided out, -SHARED dropped",
        ),
        pytest.param(
            node("n1", gpus=80, labels={"nvidia.com/gpu.count": "8"}),
            {"gpu": 8000},
            id="HAMi vGPUs: capped by the GFD device count",
        ),
        pytest.param(
            node("n1", extra={"aliyun.com/gpu-count": "2", "aliyun.com/gpu-mem": "32"}),
            {"gpu": 2000},
            id="gpushare: device count",
        ),
        pytest.param(node("n1", unschedulable=True), {"unschedulable": True}, id="cordoned"),
        pytest.param(
            node("n1", taints=[("maintenance", "NoSchedule")]),
            {"unschedulable": True},
            id="NoSchedule",
        ),
        pytest.param(
            node("n1", taints=[("node.kubernetes.io/unreachable", "NoExecute")]),
            {"unschedulable": True},
            id="NoExecute",
        ),
        pytest.param(
            node("n1", taints=[("spot", "PreferNoSchedule")]),
            {"unschedulable": False},
            id="PreferNoSchedule does not count",
        ),
        pytest.param(
            node("n1", gpus=1, taints=[("nvidia.com/gpu", "NoSchedule")]),
            {"unschedulable": False},
            id="the GPU taint is tolerated by convention",
        ),
    ],
)
def test_node_to_strata(built: dict[str, Any], want: dict[str, Any]) -> None:
    """Allocatable, GPUs, model and schedulability as the table says."""
    got = node_to_strata(built)
    for key, value in want.items():
        if key in ("gpu",):
            assert got["capacity"].get("gpu", 0) == value
        else:
            assert got[key] == value
    assert got["labels"]["kubernetes.io/hostname"] == "n1"


def test_node_bad_quantity() -> None:
    """A node whose allocatable is garbage is one TranslationError naming it."""
    bad = node("n1")
    bad["status"]["allocatable"]["cpu"] = "lots"
    with pytest.raises(TranslationError, match="node n1"):
        node_to_strata(bad)


def test_scope_tree_sources() -> None:
    """CRD scopes, namespace-defined scopes and implicit scopes, with quantities converted."""
    crds = [
        strata_scope("org", kind="org", guarantee={"nvidia.com/gpu": "8"}, weight=2.0),
        strata_scope("team-a", parent="org", limit={"cpu": "64", "memory": "256Gi"}),
    ]
    namespaces = [
        namespace(
            "ml", annotations={"strata.dev/parent": "team-a", "strata.dev/guarantee": "cpu=8"}
        ),
        namespace("web", labels={"strata.dev/scope": "frontend"}),
    ]
    scopes, problems = scope_tree(crds, namespaces, referenced=["frontend", "ml"])
    assert problems == []
    by_id = {s["id"]: s for s in scopes}
    assert sorted(by_id) == ["frontend", "ml", "org", "team-a"]
    assert by_id["org"]["guarantee"] == {"gpu": 8000}
    assert by_id["org"]["weight"] == 2.0
    assert by_id["team-a"]["limit"] == {"cpu": 64000, "memory": 256 * GI}
    assert by_id["ml"] == {
        "id": "ml",
        "parentId": "team-a",
        "kind": "namespace",
        "guarantee": {"cpu": 8000},
        "limit": {},
        "weight": 1.0,
    }
    assert by_id["frontend"]["parentId"] == ""
    assert namespace_scope(namespaces[1], "web") == "frontend"
    assert namespace_scope(None, "other") == "other"


def test_scope_tree_problems() -> None:
    """A loop is cut and reported; a bad object is skipped and reported; nothing else changes."""
    crds = [
        strata_scope("a", parent="b"),
        strata_scope("b", parent="a"),
        strata_scope("bad", guarantee={"cpu": "lots"}),
        strata_scope("neg", weight=-1.0),
    ]
    scopes, problems = scope_tree(crds, [])
    assert [s["id"] for s in scopes] == ["a", "b"]
    assert sum(s["parentId"] == "" for s in scopes) == 1
    assert len(problems) == 3


def test_kueue_to_scopes() -> None:
    """Nominal quota is the guarantee; nominal + borrowingLimit the limit; cohorts are parents."""
    cq = {
        "metadata": {"name": "team-a"},
        "spec": {
            "cohortName": "research",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "a100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "32", "borrowingLimit": "8"},
                                {"name": "nvidia.com/gpu", "nominalQuota": 4},
                            ],
                        },
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "16", "borrowingLimit": "0"},
                                {"name": "nvidia.com/gpu", "nominalQuota": 2, "borrowingLimit": 2},
                            ],
                        },
                    ],
                }
            ],
        },
    }
    cohort = {"metadata": {"name": "research"}, "spec": {"parentName": "company"}}
    scopes = {s["id"]: s for s in kueue_to_scopes([cq], [cohort])}
    assert sorted(scopes) == ["cohort-company", "cohort-research", "team-a"]
    team = scopes["team-a"]
    assert team["parentId"] == "cohort-research"
    assert team["guarantee"] == {"cpu": 48000, "gpu": 6000}
    assert team["limit"] == {"cpu": 56000}  # one GPU flavor borrows without bound
    assert scopes["cohort-research"]["parentId"] == "cohort-company"


def test_cnpg_cluster() -> None:
    """Instances are replicas of spec.resources, spread by topologyKey, never preemptible."""
    cluster = {
        "apiVersion": "postgresql.cnpg.io/v1",
        "kind": "Cluster",
        "metadata": {"name": "pg", "namespace": "db", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "instances": 3,
            "resources": {"requests": {"cpu": "2", "memory": "8Gi"}},
            "affinity": {
                "topologyKey": "topology.kubernetes.io/zone",
                "nodeSelector": {"pool": "db"},
            },
        },
    }
    w = cnpg_cluster_to_workload(cluster, "db", priority=1000)
    assert w["id"] == "db/cnpg-pg"
    assert w["replicas"] == 3
    assert w["request"] == {"cpu": 2000, "memory": 8 * GI, "pods": 1}
    assert w["preemptible"] is False
    assert w["spread"] == {"topologyKey": "topology.kubernetes.io/zone"}
    assert w["nodeSelector"] == {"pool": "db"}
    cluster["spec"]["affinity"] = {"enablePodAntiAffinity": False}
    assert "spread" not in cnpg_cluster_to_workload(cluster, "db")


@pytest.mark.parametrize(
    ("low", "high", "ids"),
    [
        pytest.param(
            1, 3, ["ml/isvc-llm", "ml/isvc-llm-burst-1", "ml/isvc-llm-burst-2"], id="1..3"
        ),
        pytest.param(0, 1, ["ml/isvc-llm-burst-1"], id="scale to zero: all burst"),
        pytest.param(2, 2, ["ml/isvc-llm"], id="fixed: no burst"),
    ],
)
def test_inference_service(low: int, high: int, ids: list[str]) -> None:
    """minReplicas guaranteed (not preemptible), each replica above it a preemptible burst."""
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llm", "namespace": "ml"},
        "spec": {
            "predictor": {
                "minReplicas": low,
                "maxReplicas": high,
                "model": {
                    "modelFormat": {"name": "huggingface"},
                    "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}},
                },
            }
        },
    }
    out = inference_service_to_workloads(isvc, "ml", priority=10)
    assert [w["id"] for w in out] == ids
    for w in out:
        assert w["request"] == {"cpu": 4000, "gpu": 1000, "pods": 1}
        burst = "burst" in w["id"]
        assert w["preemptible"] is burst
        assert w["priority"] == (9 if burst else 10)
        assert w["replicas"] == (1 if burst else low)


def test_gpu_conventions_reject_nonsense() -> None:
    """Conventions are checked when built."""
    with pytest.raises(ValueError, match="shared_replicas"):
        GpuConventions(shared_replicas=0)
