"""The gated-pod update checker (a model of the API server's rules) and the produced objects."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from admit_harness import admit_run, validate
from kubernetes_validate.utils import ValidationError
from protocol_fake import merge_patch

from strata_policy.kube.conventions import GpuConventions, TranslationError
from strata_policy.kube.gated import update_violations
from strata_policy.kube.patches import (
    condition_patch,
    device_annotations,
    event,
    eviction,
    release_patch,
)
from strata_policy.kube.testing import container, node, pod
from strata_policy.service.client import Client

NOW = datetime(2026, 1, 1, tzinfo=UTC)
GATED = pod("p", "ns", containers=[container(cpu="1")], gated=True, node_selector={"pool": "a"})


def _with(change: dict[str, Any], base: dict[str, Any] = GATED) -> dict[str, Any]:
    return merge_patch(copy.deepcopy(base), change)


@pytest.mark.parametrize(
    ("new", "problem"),
    [
        pytest.param(_with({"spec": {"schedulingGates": None}}), None, id="remove the gate"),
        pytest.param(
            _with({"spec": {"nodeSelector": {"zone": "z"}}}), None, id="add a selector key"
        ),
        pytest.param(_with({"metadata": {"annotations": {"x": "y"}}}), None, id="annotations free"),
        pytest.param(
            _with({"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}),
            None,
            id="add a toleration",
        ),
        pytest.param(
            _with({"spec": {"nodeSelector": {"pool": "b"}}}),
            "only additions to spec.nodeSelector",
            id="change a selector value",
        ),
        pytest.param(
            _with({"spec": {"nodeSelector": None}}),
            "only additions to spec.nodeSelector",
            id="remove the selector",
        ),
        pytest.param(
            _with({"spec": {"schedulingGates": [{"name": "strata.dev/admission"}, {"name": "x"}]}}),
            "gates may only be removed",
            id="add a gate",
        ),
        pytest.param(_with({"spec": {"nodeName": "n1"}}), "spec.nodeName", id="set nodeName"),
        pytest.param(_with({"spec": {"priority": 7}}), "spec.priority", id="other spec field"),
        pytest.param(
            _with({"spec": {"containers": [{"name": "main", "image": "other"}]}}),
            "only images may change",
            id="container resources changed",
        ),
        pytest.param(
            _with(
                {"spec": {"nodeSelector": {"zone": "z"}}},
                _with({"spec": {"schedulingGates": None}}),
            ),
            "may not change once the pod is not gated",
            id="selector after ungating",
        ),
        pytest.param(
            _with({"spec": {"affinity": {"nodeAffinity": {"x": 1}}}}),
            None,
            id="set node affinity while gated",
        ),
    ],
)
def test_update_rules(new: dict[str, Any], problem: str | None) -> None:
    """Selector additions, gate removal and free metadata pass; everything else is named."""
    old = GATED
    if problem == "may not change once the pod is not gated":
        old = _with({"spec": {"schedulingGates": None}})
    found = update_violations(old, new)
    if problem is None:
        assert found == []
    else:
        assert any(problem in f for f in found), found


def test_release_patch_is_legal_and_valid() -> None:
    """The release patch passes the checker and yields a schema-valid pod (strict, pinned)."""
    patch = release_patch(
        GATED, "ns/p", {"nodeId": "n1", "gpuDevices": []}, GpuConventions(), {}, NOW
    )
    patched = merge_patch(GATED, patch)
    assert update_violations(GATED, patched) == []
    validate(patched)
    assert patched["spec"]["nodeSelector"] == {"pool": "a", "kubernetes.io/hostname": "n1"}


def test_produced_objects_are_valid() -> None:
    """Events, Evictions and condition-patched pods validate strictly; garbage does not."""
    validate(event(GATED, "Warning", "StrataDenied", "NO_HEADROOM: short", NOW, "i"))
    validate(eviction(GATED))
    conditioned = copy.deepcopy(GATED)
    conditioned["status"] = condition_patch("False", "StrataDenied", "why", NOW)["status"]
    validate(conditioned)
    bad = event(GATED, "Warning", "R", "m", NOW, "i")
    bad["involvedObject"]["bogus"] = 1
    with pytest.raises(ValidationError):
        validate(bad)


def test_gpushare_annotations() -> None:
    """gpushare pins one device through ALIYUN_COM_GPU_MEM_IDX; two devices are refused."""
    style = GpuConventions(device_style="gpushare")
    notes = device_annotations([1], style, node("n1"), NOW)
    assert notes["ALIYUN_COM_GPU_MEM_IDX"] == "1"
    assert notes["ALIYUN_COM_GPU_MEM_ASSIGNED"] == "false"
    with pytest.raises(TranslationError):
        device_annotations([0, 1], style, node("n1"), NOW)


def test_illegal_update_is_never_sent(client: Client, cluster_id: str) -> None:
    """When the checker refuses the update, nothing is patched and Strata's hold is released."""
    with admit_run(client, cluster_id) as run:
        run.admitter.check = lambda old, new: ["spec.nodeName: may not be set"]
        run.fake.put("/api/v1/nodes", node("n1", cpu="4", memory="8Gi"))
        run.fake.put("/api/v1/pods", pod("p", "ns", containers=[container(cpu="1")], gated=True))
        [outcome] = run.round()
        assert outcome.decision == "DENIED"
        assert run.pod("ns/p")["spec"]["schedulingGates"]
        assert not [w for w in run.writes() if w[0] == "PATCH" and not w[1].endswith("/status")]
        assert run.admitter.held == {}
