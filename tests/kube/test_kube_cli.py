"""``strata-policy kube``: translate offline; sync as a process that stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from protocol_fake import FakeApiServer
from sync_harness import wait_until

from strata_policy.kube.cli import main
from strata_policy.kube.metrics import KubeCollector
from strata_policy.kube.reflector import Cache
from strata_policy.kube.sync import Syncer
from strata_policy.kube.testing import container, node, pod, strata_scope
from strata_policy.service.client import Client, RpcError
from strata_policy.service.server import Server

ROOT = Path(__file__).resolve().parents[2]


def test_translate_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nodes, pods, scopes, Kueue queues and platform objects in one YAML stream."""
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {"flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}
            ]
        },
    }
    docs = [node("n1", gpus=1), pod("p", containers=[container(cpu="1")]), strata_scope("s"), queue]
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["translate", str(path), "--scope", "team"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [n["id"] for n in out["nodes"]] == ["n1"]
    assert out["workloads"][0]["scopeId"] == "team"
    assert sorted(s["id"] for s in out["scopes"]) == ["cq", "s"]
    assert out["errors"] == []


def test_translate_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An untranslatable object is listed as an error and the exit code is 1."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"kind": "Secret", "metadata": {"name": "x"}}))
    assert main(["translate", str(path)]) == 1
    assert "Secret" in json.loads(capsys.readouterr().out)["errors"][0]


def test_metrics_collector(client: Client, cluster_id: str) -> None:
    """The lag gauge and the sync counters are exported."""
    syncer = Syncer(client, cluster_id, Cache())
    syncer.stats.lag_s = 0.25
    registry = CollectorRegistry()
    registry.register(KubeCollector(syncer.cache, syncer))
    text = generate_latest(registry).decode()
    assert "strata_kube_sync_lag_seconds 0.25" in text
    assert "strata_kube_sync_conflicts_total 0.0" in text


def test_sync_process_stops_cleanly(
    server: Server, client: Client, cluster_id: str, tmp_path: Path
) -> None:
    """`kube sync` syncs through a kubeconfig, and exits 0 soon after SIGTERM."""
    fake = FakeApiServer()
    fake.put("/api/v1/nodes", node("n1", cpu="4", memory="8Gi"))
    with fake.serve() as url:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
            "current-context": "fake",
        }
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
        env.update(KUBECONFIG=str(kubeconfig), PYTHONPATH=f"{ROOT}:{ROOT / 'generated'}")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "strata_policy.kube.cli",
                "sync",
                "--cluster",
                cluster_id,
                "--server",
                f"127.0.0.1:{server.port}",
                "--batch-window",
                "0.05",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:

            def synced() -> bool:
                try:
                    return client.call("GetCluster", {"clusterId": cluster_id})["nodeCount"] == 1
                except RpcError:
                    return False

            assert wait_until(synced, 120), proc.stderr.read1().decode() if proc.poll() else ""
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
            assert fake.authorizations == {"Bearer t"}  # the kubeconfig's credentials
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
