"""deploy/kubernetes/kube: manifests schema-valid, least-privilege RBAC, the CRD's own schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from admit_harness import validate

from strata_policy.kube.scopes import strata_scope_to_scope
from strata_policy.kube.testing import strata_scope

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "kube"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _crd_schema() -> dict[str, Any]:
    [crd] = _docs("crd-stratascope.yaml")
    [version] = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("name", ["crd-stratascope.yaml", "rbac.yaml", "controller.yaml"])
def test_manifests_are_valid(name: str) -> None:
    """Every manifest validates strictly against the pinned Kubernetes OpenAPI schema."""
    for doc in _docs(name):
        validate(doc)


def test_kustomization_lists_the_manifests() -> None:
    """The kustomization applies the CRD, RBAC and controller, and nothing missing."""
    [kustomization] = _docs("kustomization.yaml")
    assert kustomization["resources"] == ["crd-stratascope.yaml", "rbac.yaml", "controller.yaml"]
    assert all((DEPLOY / r).exists() for r in kustomization["resources"])


def test_rbac_is_least_privilege() -> None:
    """Exactly the verbs the controllers use: no wildcard, delete, secrets or binding."""
    role = next(d for d in _docs("rbac.yaml") if d["kind"] == "ClusterRole")
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    read = {"get", "list", "watch"}
    expected = (
        {("", r, v) for r in ("nodes", "namespaces", "pods") for v in read}
        | {("", "pods", "patch"), ("", "pods/status", "patch"), ("", "pods/eviction", "create")}
        | {("", "events", "create"), ("batch", "jobs", "get")}
        | {("strata.dev", "stratascopes", v) for v in read}
    )
    assert granted == expected


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(strata_scope("org"), id="empty spec"),
        pytest.param(
            strata_scope("t", parent="org", guarantee={"cpu": "500m", "nvidia.com/gpu": "4"}),
            id="quantities",
        ),
        pytest.param(strata_scope("t", limit={"memory": "64Gi"}, weight=2.5), id="limit, weight"),
        *[
            pytest.param(d, id=f"example {d['metadata']['name']}")
            for d in _docs("example-scopes.yaml")
        ],
    ],
)
def test_scopes_match_the_crd(obj: dict[str, Any]) -> None:
    """StrataScopes we build or ship validate against the CRD's schema and translate."""
    jsonschema.validate(obj, _crd_schema())
    strata_scope_to_scope(obj)


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(strata_scope("t", guarantee={"cpu": "lots"}), id="not a quantity"),
        pytest.param(strata_scope("t", weight=0.0), id="zero weight"),
        pytest.param(strata_scope("t", guarantee={"cpu": "-1"}), id="negative"),
        pytest.param(
            {"apiVersion": "strata.dev/v1alpha1", "kind": "StrataScope", "metadata": {}},
            id="no spec",
        ),
    ],
)
def test_crd_rejects_bad_scopes(obj: dict[str, Any]) -> None:
    """The CRD's schema refuses what the translator would refuse."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, _crd_schema())
