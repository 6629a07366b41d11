"""Pod → workload translation: PodRequests as a table, GPU conventions, quantities."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strata_policy.kube.conventions import GpuConventions, TranslationError
from strata_policy.kube.pods import (
    PodState,
    gang_of,
    pod_requests,
    pod_state,
    pod_to_workload,
    strata_request,
)
from strata_policy.kube.quantities import QuantityError, parse_quantity, resource_units
from strata_policy.kube.testing import container, pod, sidecar

GI = 1024**3


def _request(p: dict[str, Any]) -> dict[str, int]:
    return strata_request(pod_requests(p["spec"]))


@pytest.mark.parametrize(
    ("built", "want"),
    [
        pytest.param(
            pod("a", containers=[container("a", cpu="1"), container("b", cpu="500m")]),
            {"cpu": 1500},
            id="containers: summed",
        ),
        pytest.param(
            pod("a", containers=[container(cpu="1")], init=[container("i", cpu="2")]),
            {"cpu": 2000},
            id="init larger than containers: the init wins",
        ),
        pytest.param(
            pod("a", containers=[container(cpu="3")], init=[container("i", cpu="2")]),
            {"cpu": 3000},
            id="init smaller than containers: the containers win",
        ),
        pytest.param(
            pod("a", containers=[container(cpu="1")], init=[sidecar(cpu="500m")]),
            {"cpu": 1500},
            id="sidecar: added to the containers",
        ),
        pytest.param(
            pod(
                "a",
                containers=[container(cpu="1")],
                init=[sidecar(cpu="500m"), container("i", cpu="2")],
            ),
            {"cpu": 2500},
            id="init after a sidecar: runs beside it",
        ),
        pytest.param(
            pod(
                "a",
                containers=[container(cpu="1")],
                init=[container("i", cpu="2"), sidecar(cpu="500m")],
            ),
            {"cpu": 2000},
            id="init before a sidecar: runs alone",
        ),
        pytest.param(
            pod(
                "a",
                containers=[container(cpu="1", memory="1Gi")],
                init=[
                    sidecar("s1", cpu="100m"),
                    sidecar("s2", memory="1Gi"),
                    container("i", memory="3Gi"),
                ],
            ),
            {"cpu": 1100, "memory": 4 * GI},
            id="two sidecars then an init: per-resource maximum",
        ),
        pytest.param(
            pod("a", containers=[container(cpu="1")], overhead={"cpu": "250m", "memory": "120Mi"}),
            {"cpu": 1250, "memory": 120 * 1024**2},
            id="overhead: added after the maximum",
        ),
        pytest.param(
            pod(
                "a",
                containers=[container(cpu="1", memory="1Gi")],
                init=[container("i", cpu="8")],
                overhead={"cpu": "100m"},
            ),
            {"cpu": 8100, "memory": GI},
            id="init larger, then overhead on top",
        ),
        pytest.param(
            pod(
                "a",
                containers=[container(cpu="1", memory="1Gi")],
                pod_requests={"cpu": "4"},
                overhead={"cpu": "100m"},
            ),
            {"cpu": 4100, "memory": GI},
            id="pod-level requests override cpu, then overhead",
        ),
        pytest.param(
            pod("a", containers=[container(limits={"cpu": "2"})]),
            {"cpu": 2000},
            id="limits stand in for missing requests",
        ),
        pytest.param(
            pod("a", containers=[container(cpu="0.1m")]),
            {"cpu": 1},
            id="sub-millicore rounds up, never to zero",
        ),
        pytest.param(
            pod("a", containers=[container(**{"nvidia.com/gpu": "2", "ephemeral-storage": "1G"})]),
            {"gpu": 2000, "ephemeral-storage": 10**9},
            id="whole GPUs in milli; other resources pass through",
        ),
    ],
)
def test_pod_requests(built: dict[str, Any], want: dict[str, int]) -> None:
    """The effective request is PodRequests' (containers, init, sidecars, pod-level, overhead)."""
    assert _request(built) == want


HAMI = GpuConventions(device_memory_mib=16000)


@pytest.mark.parametrize(
    ("requests", "gpu", "want"),
    [
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"}, HAMI, 300, id="hami cores"
        ),
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"}, HAMI, 500, id="hami mem"
        ),
        pytest.param(
            {"nvidia.com/gpu.shared": "1"}, GpuConventions(shared_replicas=4), 250, id="time-slice"
        ),
        pytest.param(
            {"aliyun.com/gpu-mem": "4"},
            GpuConventions(device_memory_mib=16384),
            250,
            id="gpushare mem",
        ),
        pytest.param({"aliyun.com/gpu-count": "2"}, HAMI, 2000, id="gpushare count"),
        pytest.param({"nvidia.com/gpu": "4"}, HAMI, 4000, id="whole devices"),
    ],
)
def test_gpu_conventions(requests: dict[str, str], gpu: GpuConventions, want: int) -> None:
    """Sharing plugins' resources become one device share, whole devices a multiple of 1000."""
    exact = {k: parse_quantity(v) for k, v in requests.items()}
    assert strata_request(exact, gpu) == {"gpu": want}


@pytest.mark.parametrize(
    ("requests", "gpu"),
    [
        pytest.param(
            {"nvidia.com/gpu": "2", "nvidia.com/gpucores": "30"}, HAMI, id="hami share of 2"
        ),
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"}, GpuConventions(), id="mem no size"
        ),
        pytest.param({"nvidia.com/gpu": "1.5"}, HAMI, id="fractional whole"),
        pytest.param({"nvidia.com/gpu.shared": "2"}, HAMI, id="two shared replicas"),
        pytest.param(
            {"aliyun.com/gpu-mem": "20"},
            GpuConventions(device_memory_mib=16384),
            id="gpushare > device",
        ),
    ],
)
def test_gpu_untranslatable(requests: dict[str, str], gpu: GpuConventions) -> None:
    """A GPU request Strata cannot represent is one clear error, not a guess."""
    exact = {k: parse_quantity(v) for k, v in requests.items()}
    with pytest.raises(TranslationError):
        strata_request(exact, gpu)


def test_pod_to_workload_fields() -> None:
    """Id, scope, priority, selector, model, preemptible, queued time and the pod slot."""
    p = pod(
        "train",
        "team-a",
        containers=[container(cpu="2", **{"nvidia.com/gpu": "1"})],
        priority=100,
        node_selector={"nvidia.com/gpu.product": "A100", "zone": "z1"},
        annotations={"strata.dev/preemptible": "false"},
        created="2026-01-01T00:00:01Z",
    )
    w = pod_to_workload(p, "scope-a")
    assert w == {
        "id": "team-a/train",
        "scopeId": "scope-a",
        "request": {"cpu": 2000, "gpu": 1000, "pods": 1},
        "replicas": 1,
        "priority": 100,
        "nodeSelector": {"zone": "z1"},
        "gpuModel": "A100",
        "queuedAtMs": 1767225601000,
        "preemptible": False,
    }


@pytest.mark.parametrize(
    ("built", "state"),
    [
        pytest.param(pod("a", gated=True), PodState.GATED, id="gated"),
        pytest.param(pod("a", node_name="n1"), PodState.BOUND, id="bound"),
        pytest.param(pod("a", annotations={"strata.dev/node": "n1"}), PodState.PINNED, id="pinned"),
        pytest.param(pod("a"), PodState.PENDING, id="pending"),
        pytest.param(pod("a", node_name="n1", phase="Succeeded"), PodState.FINISHED, id="finished"),
    ],
)
def test_pod_state(built: dict[str, Any], state: PodState) -> None:
    """A pod's state for Strata; a finished phase wins."""
    assert pod_state(built) == state


@pytest.mark.parametrize(
    ("built", "gang"),
    [
        pytest.param(pod("a", "ns", labels={"strata.dev/gang": "g"}), "ns/gang-g", id="label"),
        pytest.param(pod("a", "ns", owner_job="j"), "ns/job-j", id="owning job"),
        pytest.param(pod("a", "ns"), "", id="none"),
    ],
)
def test_gang_of(built: dict[str, Any], gang: str) -> None:
    """A gang comes from the strata.dev/gang label or the controlling Job."""
    assert gang_of(built) == gang


@pytest.mark.parametrize(
    ("name", "text", "want"),
    [
        pytest.param("cpu", "500m", 500, id="cpu milli"),
        pytest.param("cpu", "2", 2000, id="cpu cores"),
        pytest.param("cpu", "1.5", 1500, id="cpu decimal"),
        pytest.param("memory", "1Gi", GI, id="memory binary"),
        pytest.param("memory", "1G", 10**9, id="memory decimal"),
        pytest.param("memory", "1e3", 1000, id="exponent"),
        pytest.param("memory", "129M", 129 * 10**6, id="mega"),
        pytest.param("memory", "0.5Ki", 512, id="fractional binary"),
        pytest.param("pods", 110, 110, id="int"),
    ],
)
def test_quantities(name: str, text: str | int, want: int) -> None:
    """Kubernetes quantities in base units, rounded up."""
    assert resource_units(name, text) == want


@pytest.mark.parametrize("text", ["", "abc", "1Xi", "-1", "1.2.3", "Gi", "1e400000000"])
def test_bad_quantities(text: str) -> None:
    """Not a quantity, negative or absurd: one QuantityError."""
    with pytest.raises(QuantityError):
        resource_units("memory", text)


@given(st.integers(0, 2**40), st.sampled_from(["", "k", "M", "Ki", "Mi", "Gi"]))
def test_quantity_suffixes(n: int, suffix: str) -> None:
    """n with a suffix is n times the suffix's factor, exactly."""
    factor = {"": 1, "k": 1000, "M": 10**6, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}[suffix]
    assert parse_quantity(f"{n}{suffix}") == Decimal(n * factor)
