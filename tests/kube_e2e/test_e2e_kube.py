"""End to end against a REAL cluster (kind or k3d) named by KUBECONFIG: sync, admit, deny, reclaim.

Run with `make e2e-kube`. It needs a cluster at Kubernetes >= 1.30, permission to create
namespaces, pods and CRDs, and pulls registry.k8s.io/pause. Skipped, with the reason, when
KUBECONFIG is unset. The Strata server is the in-process one from tests/conftest.py; the
controllers run in this process against the real API server.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from strata_policy.kube.admit import AdmitConfig, Admitter
from strata_policy.kube.api import ApiError, HttpKubeApi
from strata_policy.kube.mirror import PATHS
from strata_policy.kube.reflector import object_key
from strata_policy.kube.sync import Syncer
from strata_policy.service.client import Client

pytestmark = pytest.mark.skipif(
    not os.environ.get("KUBECONFIG"), reason="KUBECONFIG is unset: no real cluster to test against"
)
CRD = (
    Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "kube" / "crd-stratascope.yaml"
)
PAUSE = "registry.k8s.io/pause:3.10"


def _until(condition: Callable[[], bool], timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(1.0)
    return condition()


@pytest.fixture(scope="module")
def api() -> Iterator[HttpKubeApi]:
    """A client of the real API server, with the StrataScope CRD installed."""
    kube = HttpKubeApi.from_environment()
    crd = yaml.safe_load(CRD.read_text())
    try:
        kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    except ApiError as exc:
        if exc.status != 409:
            raise

    def established() -> bool:
        try:
            kube.list("/apis/strata.dev/v1alpha1/stratascopes")
        except ApiError:
            return False
        return True

    assert _until(established, 60), "the StrataScope CRD was not established"
    yield kube
    kube.close()


@pytest.fixture
def ns(api: HttpKubeApi) -> Iterator[str]:
    """A fresh namespace (scope: its own name), deleted afterwards."""
    name = f"strata-e2e-{uuid.uuid4().hex[:6]}"
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    api.request("DELETE", f"/api/v1/namespaces/{name}")


def _objects(api: HttpKubeApi) -> dict[str, dict[str, Any]]:
    return {kind: {object_key(o): o for o in api.list(path)[0]} for kind, path in PATHS.items()}


def _pod(ns: str, name: str, cpu: str, gated: bool, priority_class: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": PAUSE, "resources": {"requests": {"cpu": cpu}}}],
        "terminationGracePeriodSeconds": 0,
    }
    if gated:
        spec["schedulingGates"] = [{"name": "strata.dev/admission"}]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def _get(api: HttpKubeApi, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return api.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def _round(api: HttpKubeApi, syncer: Syncer, admitter: Admitter) -> None:
    syncer.push(_objects(api))
    admitter.step(_objects(api))


@pytest.fixture
def controllers(api: HttpKubeApi, client: Client, cluster_id: str) -> tuple[Syncer, Admitter]:
    """A syncer and an admitter for a fresh Strata cluster."""
    syncer = Syncer(client, cluster_id, cache=None)  # type: ignore[arg-type]  # push() only
    return syncer, Admitter(api, client, AdmitConfig(cluster_id))


def test_sync_mirrors_the_nodes(
    api: HttpKubeApi, client: Client, cluster_id: str, controllers: Any
) -> None:
    """Every schedulable node of the cluster is in Strata after one sync."""
    syncer, _ = controllers
    syncer.push(_objects(api))
    nodes = api.list("/api/v1/nodes")[0]
    assert client.call("GetCluster", {"clusterId": cluster_id})["nodeCount"] == len(nodes)


def test_gated_pod_admitted_and_pinned(api: HttpKubeApi, ns: str, controllers: Any) -> None:
    """A gated pod is pinned by Strata, ungated, and bound by kube-scheduler to that node."""
    syncer, admitter = controllers
    api.request("POST", f"/api/v1/namespaces/{ns}/pods", _pod(ns, "small", "10m", gated=True))
    _round(api, syncer, admitter)
    pod = _get(api, ns, "small")
    assert pod is not None
    assert not pod["spec"].get("schedulingGates")
    chosen = pod["spec"]["nodeSelector"]["kubernetes.io/hostname"]
    assert _until(lambda: (_get(api, ns, "small") or {}).get("spec", {}).get("nodeName") == chosen)


def test_denied_pod_held_with_reasons(api: HttpKubeApi, ns: str, controllers: Any) -> None:
    """A pod over its scope's limit stays gated with the StrataAdmission condition."""
    syncer, admitter = controllers
    scope = {
        "apiVersion": "strata.dev/v1alpha1",
        "kind": "StrataScope",
        "metadata": {"name": ns},
        "spec": {"limit": {"cpu": "100m"}},
    }
    api.request("POST", "/apis/strata.dev/v1alpha1/stratascopes", scope)
    try:
        api.request("POST", f"/api/v1/namespaces/{ns}/pods", _pod(ns, "big", "1", gated=True))
        _round(api, syncer, admitter)
        pod = _get(api, ns, "big")
        assert pod is not None
        assert pod["spec"]["schedulingGates"]
        conditions = {c["type"]: c for c in pod["status"].get("conditions") or ()}
        assert "LIMIT_EXCEEDED" in conditions["StrataAdmission"]["message"]
    finally:
        api.request("DELETE", f"/apis/strata.dev/v1alpha1/stratascopes/{ns}")


def test_reclaim_evicts_the_victim(api: HttpKubeApi, ns: str, controllers: Any) -> None:
    """Within a scope's limit, a higher-priority gated pod evicts a lower one, then runs."""
    syncer, admitter = controllers
    for name, value in (("strata-e2e-low", 1), ("strata-e2e-high", 1000)):
        try:
            api.request(
                "POST",
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": name}, "value": value},
            )
        except ApiError as exc:
            if exc.status != 409:
                raise
    scope = {
        "apiVersion": "strata.dev/v1alpha1",
        "kind": "StrataScope",
        "metadata": {"name": ns},
        "spec": {"limit": {"cpu": "300m"}},
    }
    api.request("POST", "/apis/strata.dev/v1alpha1/stratascopes", scope)
    try:
        api.request(
            "POST",
            f"/api/v1/namespaces/{ns}/pods",
            _pod(ns, "low", "200m", False, "strata-e2e-low"),
        )
        assert _until(
            lambda: (_get(api, ns, "low") or {}).get("spec", {}).get("nodeName") is not None
        )
        api.request(
            "POST",
            f"/api/v1/namespaces/{ns}/pods",
            _pod(ns, "high", "200m", True, "strata-e2e-high"),
        )
        _round(api, syncer, admitter)
        assert _until(lambda: _get(api, ns, "low") is None)
        high = _get(api, ns, "high")
        assert high is not None
        assert not high["spec"].get("schedulingGates")
    finally:
        api.request("DELETE", f"/apis/strata.dev/v1alpha1/stratascopes/{ns}")
