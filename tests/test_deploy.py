"""The Kubernetes manifests: schema-valid for a pinned Kubernetes, and able to start a pod.

Each rule here is a way a pod failed to start or misbehaved before (issue 19): probes that
cannot speak TLS, a sidecar probed on a loopback bind, two writers on one state directory,
a UID that does not match the image, requests below limits, an h2c hint on a TLS port.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
KUBE = ROOT / "deploy" / "kubernetes"
# The oldest Kubernetes the manifests target: native sidecars (GA 1.33), ReadWriteOncePod
# (GA 1.29), gRPC probes (GA 1.27).
KUBERNETES_VERSION = "1.33.0"
MANIFESTS = sorted(p for p in KUBE.glob("*.yaml") if p.name != "kustomization.yaml")


def documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of one manifest file."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def workloads() -> list[tuple[str, dict[str, Any]]]:
    """(file:kind/name, pod spec) of every workload object shipped."""
    out = []
    for path in MANIFESTS:
        for doc in documents(path):
            if doc["kind"] in ("Deployment", "StatefulSet"):
                name = f"{path.name}:{doc['kind']}/{doc['metadata']['name']}"
                out.append((name, doc["spec"]["template"]["spec"]))
    return out


def strata_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The strata-policy containers of a pod (main or native sidecar)."""
    every = pod.get("containers", []) + pod.get("initContainers", [])
    return [c for c in every if "strata-policy" in c["image"]]


def settings(container: dict[str, Any]) -> dict[str, str]:
    """The serve settings of a container: STRATA_* variables overridden by --flags in args."""
    out = {e["name"][len("STRATA_") :].lower(): e.get("value", "") for e in container.get("env", [])
           if e["name"].startswith("STRATA_")}  # fmt: skip
    args = container.get("args", [])
    for flag, value in itertools.pairwise(args):
        if flag.startswith("--"):
            out[flag[2:].replace("-", "_")] = value
    return out


def image_uid() -> int:
    """The numeric user of the image's final stage (Dockerfile ``USER uid:gid``)."""
    users = re.findall(r"^USER\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    uid = users[-1].split(":")[0]
    assert uid.isdigit(), f"the image's USER must be numeric, got {uid!r}"
    return int(uid)


POD_IDS = [pytest.param(spec, id=name) for name, spec in workloads()]


def test_every_manifest_is_listed_or_an_example() -> None:
    """kustomization.yaml lists the real manifests; the rest are examples named so."""
    listed = set(yaml.safe_load((KUBE / "kustomization.yaml").read_text())["resources"])
    assert listed <= {p.name for p in MANIFESTS}
    for path in MANIFESTS:
        assert path.name in listed or "example" in path.name, path.name


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in MANIFESTS])
def test_manifests_pass_kubernetes_validate_strict(path: Path) -> None:
    """Every object validates with kubernetes-validate --strict (no unknown or misplaced field)."""
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed")
    for doc in documents(path):
        try:
            kv.validate(doc, KUBERNETES_VERSION, strict=True)
        except kv.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{path.name} {doc['kind']}/{doc['metadata']['name']}: {where}: {exc}")


def test_strict_validation_catches_a_misplaced_field() -> None:
    """The check can fail: a probe field one level too high is refused in strict mode."""
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed")
    doc = documents(KUBE / "statefulset.yaml")[0]
    doc["spec"]["template"]["spec"]["containers"][0]["timeoutSeconds"] = 2
    with pytest.raises(kv.ValidationError):
        kv.validate(doc, KUBERNETES_VERSION, strict=True)


def test_one_writer_per_state_directory() -> None:
    """The server is a one-replica StatefulSet whose state volume is ReadWriteOncePod."""
    (sts,) = [d for d in documents(KUBE / "statefulset.yaml") if d["kind"] == "StatefulSet"]
    assert sts["spec"]["replicas"] == 1
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOncePod"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == settings(container)["state_dir"]


@pytest.mark.parametrize("pod", POD_IDS)
def test_probes_reach_a_plaintext_health_port(pod: dict[str, Any]) -> None:
    """Every probe is a gRPC probe on the health port, bound to all interfaces, not the TLS
    API port and not a loopback-only address the kubelet cannot reach."""
    for container in strata_containers(pod):
        conf = settings(container)
        health = conf["health_address"]
        host, _, port = health.rpartition(":")
        assert host in ("0.0.0.0", "", "[::]"), (
            f"health bound to {host}: the kubelet probes the pod IP"
        )
        probes = [
            container[k]
            for k in ("startupProbe", "readinessProbe", "livenessProbe")
            if k in container
        ]
        assert probes, "no probes"
        for probe in probes:
            assert probe["grpc"]["port"] == int(port)
            assert probe["grpc"]["port"] != int(conf.get("address", ":50051").rpartition(":")[2])
            assert probe.get("timeoutSeconds", 1) >= 2, "1 s is below a loaded server's answer time"
        assert container["livenessProbe"]["grpc"]["service"] == "liveness", "load never restarts"
        assert "service" not in container["startupProbe"]["grpc"]
        assert "startupProbe" in container
        budget = (
            container["startupProbe"]["periodSeconds"]
            * container["startupProbe"]["failureThreshold"]
        )
        assert budget >= 120, "a cold kernel compile takes about a minute on two cores"  # fmt: skip


@pytest.mark.parametrize("pod", POD_IDS)
def test_requests_equal_limits(pod: dict[str, Any]) -> None:
    """Every container asks for what it may use (Guaranteed QoS for the pod)."""
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        resources = container["resources"]
        assert set(resources["requests"]) == {"cpu", "memory"}
        assert resources["requests"] == resources["limits"], container["name"]


@pytest.mark.parametrize("pod", POD_IDS)
def test_user_matches_the_image_and_root_is_read_only(pod: dict[str, Any]) -> None:
    """The pod runs as the image's numeric UID, with a read-only root and a writable cache."""
    uid = image_uid()
    assert pod["securityContext"]["runAsUser"] == uid
    assert pod["securityContext"]["fsGroup"] == uid
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    for container in strata_containers(pod):
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert mounts[env["NUMBA_CACHE_DIR"]] in empty, "the kernel cache must be writable"
        assert mounts["/tmp"] in empty
        assert container["args"][0] == "serve", "args follow the image's ENTRYPOINT"


def test_service_ports_name_container_ports_and_match_tls() -> None:
    """Service ports target named container ports; a TLS port is never hinted as h2c."""
    (sts,) = [d for d in documents(KUBE / "statefulset.yaml") if d["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    names = {p["name"] for p in container["ports"]}
    tls = bool(settings(container).get("tls_cert"))
    services = documents(KUBE / "service.yaml")
    assert sts["spec"]["serviceName"] in {s["metadata"]["name"] for s in services}
    for service in services:
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in names
            if port["targetPort"] == "grpc":
                assert port["appProtocol"] == ("https" if tls else "kubernetes.io/h2c")
            if port["targetPort"] == "metrics":
                assert port["appProtocol"] == "http"


def test_prometheus_scrapes_the_headless_name_with_a_token() -> None:
    """The scrape job targets the pod's stable name and sends a bearer token (metrics auth)."""
    (sts,) = [d for d in documents(KUBE / "statefulset.yaml") if d["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert settings(container)["metrics_auth"] == "token"
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yaml").read_text())
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "strata-policy"  # alerts.yaml matches on this job
    assert job["authorization"]["type"] == "Bearer"
    metrics_port = settings(container)["metrics_address"].rpartition(":")[2]
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.rsplit(":", 1)
    assert host.startswith(f"{sts['metadata']['name']}-0.{sts['spec']['serviceName']}.")
    assert port == metrics_port
