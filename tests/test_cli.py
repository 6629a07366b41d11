"""`strata-policy ctl` against a running server: files in, readable tables out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strata_policy.cli import main
from strata_policy.service.server import Server

SNAPSHOT = """
nodes:
  - {id: node-1, capacity: {cpu: "64000", memory: "274877906944", gpu: "8000"}, gpuModel: A100}
  - {id: node-2, capacity: {cpu: "64000", memory: "274877906944", gpu: "8000"}, gpuModel: A100}
scopes:
  - {id: org, kind: org}
  - {id: team-a, parentId: org, kind: team}
"""
PLACE = """
workloads:
  - {id: job-1, scopeId: team-a, request: {cpu: "4000", gpu: "8000"}, replicas: 2,
     spread: {topologyKey: kubernetes.io/hostname}}
"""


def ctl(server: Server, *args: str) -> list[str]:
    """The argv of a ctl call to the session server."""
    return ["ctl", "--address", f"127.0.0.1:{server.port}", *args]


def test_push_quota_place_usage_release(
    server: Server, cluster_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator's round trip prints human units and the placements."""
    snap, place = tmp_path / "snap.yaml", tmp_path / "place.yaml"
    snap.write_text(SNAPSHOT)
    place.write_text(PLACE)
    assert main(ctl(server, "push", str(snap), "--cluster", cluster_id)) == 0
    assert "2 nodes, 2 scopes" in capsys.readouterr().out
    args = ["--guarantee", "gpu=8,cpu=64", "--limit", "gpu=16"]
    assert main(ctl(server, "quota", "set", "team-a", "--cluster", cluster_id, *args)) == 0
    out = capsys.readouterr().out
    assert "64 CPU, 8 GPU" in out
    assert "16 GPU" in out
    assert (
        main(ctl(server, "place", str(place), "--cluster", cluster_id, "--policy", "best_fit")) == 0
    )
    out = capsys.readouterr().out
    assert "job-1     PLACED" in out
    assert "node-1[0,1,2,3,4,5,6,7], node-2[0,1,2,3,4,5,6,7]" in out
    assert main(ctl(server, "usage", cluster_id)) == 0
    out = capsys.readouterr().out
    assert "8 CPU, 16 GPU" in out  # team-a's usage
    assert "gpu" in out.splitlines()[-1]  # team-a is at its gpu limit
    assert main(ctl(server, "-o", "json", "release", cluster_id, "job-1", "ghost")) == 0
    released = json.loads(capsys.readouterr().out)
    assert (released["released"], released["notFound"]) == (["job-1"], ["ghost"])


def test_errors_are_one_clear_line(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    """A failing call exits 2 and prints the status code and message on stderr."""
    with pytest.raises(SystemExit) as exit_:
        main(ctl(server, "get", "no-such-cluster"))
    assert exit_.value.code == 2
    assert "NOT_FOUND: cluster 'no-such-cluster' not found" in capsys.readouterr().err


def test_import_openb_prints_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """import-openb turns the node CSV into a snapshot in the proto JSON mapping."""
    csv = tmp_path / "nodes.csv"
    csv.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,2,P100\nn-1,32000,131072,0,\n"
    )
    assert main(["ctl", "import-openb", str(csv)]) == 0
    snap = json.loads(capsys.readouterr().out)["snapshot"]
    assert snap["nodes"][0] == {
        "id": "n-0",
        "capacity": {"cpu": "64000", "memory": str(262144 * 1024**2), "gpu": "2000"},
        "gpuModel": "P100",
    }
    assert snap["nodes"][1]["capacity"] == {"cpu": "32000", "memory": str(131072 * 1024**2)}
