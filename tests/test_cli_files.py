"""ctl's files: every bad input is one line naming the file, line and field, with a hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctl_kit import ADMIT_OK, Run, demo, no_ambient_cluster, one_error_line, run

__all__ = ["demo", "no_ambient_cluster", "run"]  # fixtures used by name


@pytest.mark.parametrize(
    ("name", "text", "extra", "expected"),
    [
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeID: batch\n",
            (),
            "bad.yaml:3:5: workloads[0].scopeID: unknown field in Workload; "
            "did you mean 'scopeId'?",
            id="unknown key scopeID",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeId: batch\n    requests: {cpu: 1}\n",
            (),
            "bad.yaml:4:5: workloads[0].requests: unknown field in Workload; "
            "did you mean 'request'?",
            id="unknown key requests",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n   scopeId: batch\n",
            (),
            "bad.yaml:3:4: YAML syntax: expected <block end>",
            id="YAML syntax error",
        ),
        pytest.param(
            "bad.json",
            '{"workloads": [{"id": "w",}',
            (),
            "bad.json:1:",
            id="JSON syntax error",
        ),
        pytest.param("bad.yaml", "", (), "bad.yaml: is empty", id="empty file"),
        pytest.param(
            "bad.yaml",
            ADMIT_OK + "---\n" + ADMIT_OK,
            (),
            "bad.yaml:5:1: YAML syntax: expected a single document in the stream, but found "
            "another document",
            id="two documents",
        ),
        pytest.param(
            "bad.yaml",
            "workloads: " + "[" * 600 + "]" * 600,
            (),
            "bad.yaml: is nested too deeply to be a request",
            id="nested too deeply",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeId: batch\n    request: {memory: 4Gx}\n",
            (),
            "bad.yaml:4:23: workloads[0].request.memory: '4Gx' has an unknown suffix 'Gx'; "
            "did you mean 'Gi'?",
            id="bad quantity",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeId: batch\n    request: {cpu: -2}\n",
            (),
            "workloads[0].request.cpu: '-2' is negative",
            id="negative quantity",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeId: batch\n    request: {gpus: 1}\n",
            (),
            "bad.yaml:4: workloads[0].request.gpus: no resource 'gpus' in cluster '{cluster}'; "
            "did you mean 'gpu'?",
            id="misspelled resource",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeId: batch\n    request: {memory: 4Gi}\n",
            ("--raw",),
            "workloads[0].request.memory: '4Gi' is not an integer in base units (--raw)",
            id="quantity with --raw",
        ),
        pytest.param(
            "bad.yaml",
            ADMIT_OK + "order: fiar\n",
            (),
            "bad.yaml:5:8: order: unknown Order 'fiar'; did you mean 'FAIR'?",
            id="misspelled enum",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeId: batch\n    replicas: two\n",
            (),
            "bad.yaml:4:15: workloads[0].replicas: expected a whole number, got 'two'",
            id="wrong scalar type",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeId: batch\n    replicas: 4294967296\n",
            (),
            "bad.yaml:4:15: workloads[0].replicas: 4294967296 is out of range",
            id="number out of range",
        ),
        pytest.param(
            "bad.yaml",
            "nodes: []\n",
            (),
            "bad.yaml:1:1: nodes: unknown field in AdmitRequest; a snapshot's field: send "
            "snapshots with ctl push",
            id="a snapshot given to admit",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    request: [1]\n",
            (),
            "bad.yaml:3:14: workloads[0].request: expected a mapping, got a list",
            id="list for a map",
        ),
        pytest.param(
            "bad.yaml",
            "workloads: {id: w}\n",
            (),
            "bad.yaml:1:12: workloads: expected a list, got a mapping",
            id="mapping for a list",
        ),
        pytest.param(
            "bad.yaml",
            ADMIT_OK + "clusterId: elsewhere\n",
            (),
            "the file is for cluster 'elsewhere' but -c names '{cluster}'",
            id="file names another cluster",
        ),
        pytest.param(
            "bad.yaml",
            "workloads:\n  - id: w\n    scopeId: nobody\n    request: {cpu: 1}\n",
            (),
            "bad.yaml:3: workloads[0].scope_id: unknown scope 'nobody' (INVALID_ARGUMENT)",
            id="server violation points at the line",
        ),
    ],
)
def test_bad_admit_file_is_one_line(
    run: Run, demo: str, tmp_path: Path, name: str, text: str, extra: tuple[str, ...], expected: str
) -> None:
    """Every bad file gets one line naming the file, line and field, a hint, and exit code 1."""
    path = tmp_path / name
    path.write_text(text)
    ran = run("admit", str(path), "-c", demo, *extra)
    assert ran.code == 1
    line = one_error_line(ran)
    assert expected.format(cluster=demo).replace("bad.", f"{tmp_path}/bad.") in line


def test_missing_file(run: Run, demo: str, tmp_path: Path) -> None:
    """A file that is not there is one line, exit code 1."""
    ran = run("place", str(tmp_path / "nope.yaml"), "-c", demo)
    assert ran.code == 1
    assert one_error_line(ran) == f"error: {tmp_path}/nope.yaml: no such file"


SIMULATE_TRACE = {
    "nodes": [
        {"id": "n-0", "capacity": {"cpu": "96", "memory": "384Gi", "gpu": "8"}, "gpu_model": "A"},
        {"id": "n-1", "capacity": {"cpu": "96", "memory": "384Gi", "gpu": "8"}},
    ],
    "scopes": [{"id": "prod", "kind": "org", "guarantee": {"gpu": "4"}}],
}


def test_push_takes_simulate_format(run: Run, cluster_id: str, tmp_path: Path) -> None:
    """A simulate trace's nodes and scopes (snake_case, 384Gi) push as they are."""
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(SIMULATE_TRACE, indent="\t"))
    ran = run("push", str(path), "-c", cluster_id)
    assert ran.code == 0, ran.err
    got = json.loads(run("get", "-c", cluster_id, "-o", "json").out)
    assert got["capacity"] == {"cpu": "192000", "memory": str(768 * 2**30), "gpu": "16000"}
    assert got["scopes"][0]["guarantee"] == {"gpu": "4000"}


def test_push_explains_pending_workloads(run: Run, cluster_id: str, tmp_path: Path) -> None:
    """A trace's pending workloads are not running ones: the line says what to do instead."""
    trace = {**SIMULATE_TRACE, "workloads": [{"id": "w", "scope_id": "prod", "arrival_ms": 5}]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace, indent=1))
    ran = run("push", str(path), "-c", cluster_id)
    assert ran.code == 1
    line = one_error_line(ran)
    assert "trace.json:" in line
    assert "workloads[0].id: unknown field in RunningWorkload" in line
    assert "nests its fields under 'workload:'" in line


def test_push_checks_resource_names(run: Run, cluster_id: str, tmp_path: Path) -> None:
    """A scope guaranteeing a resource no node has is refused at its line, with a hint."""
    path = tmp_path / "snap.yaml"
    path.write_text(
        "nodes:\n  - {id: n, capacity: {cpu: 4, gpu: 1}}\n"
        "scopes:\n  - {id: s, guarantee: {gpus: 1}}\n"
    )
    ran = run("push", str(path), "-c", cluster_id)
    assert ran.code == 1
    assert one_error_line(ran) == (
        f"error: {path}:4: snapshot.scopes[0].guarantee.gpus: no resource 'gpus' in the "
        "snapshot; did you mean 'gpu'? (it has cpu, gpu, memory)"
    )


def test_server_violations_point_at_the_line(run: Run, cluster_id: str, tmp_path: Path) -> None:
    """The server's field path (`capacity["gpu"]`, snake_case) is mapped back to the file's line."""
    path = tmp_path / "snap.yaml"
    path.write_text("nodes:\n  - id: n\n    capacity:\n      cpu: 4\n      gpu: 1.5\n")
    ran = run("push", str(path), "-c", cluster_id)
    assert ran.code == 1
    line = one_error_line(ran)
    assert line.startswith(f"error: {path}:5: snapshot.nodes[0].capacity[")
    assert line.endswith("1500 is not a multiple of 1000 (whole devices) (INVALID_ARGUMENT)")
