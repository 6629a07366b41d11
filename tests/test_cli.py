"""`strata-policy ctl` as a kubectl user expects it: usage, exit codes, output, quotas."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import yaml
from ctl_kit import ADMIT_OK, EXAMPLES, Ran, Run, demo, no_ambient_cluster, one_error_line, run

from strata_policy.cli import main

__all__ = ["demo", "no_ambient_cluster", "run"]  # fixtures used by name


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(("get",), "name the cluster: -c/--cluster NAME", id="no cluster"),
        pytest.param(("get", "-c", "{c}", "--bogus"), "No such option", id="unknown flag"),
        pytest.param(("get", "-c", "{c}", "-o", "xml"), "'xml' is not one of", id="bad -o"),
        pytest.param(
            ("quota", "set", "batch", "-c", "{c}", "--limit", "memory=4GB"),
            "did you mean 'G'?",
            id="bad quantity flag",
        ),
        pytest.param(
            ("quota", "set", "batch", "-c", "{c}", "--limit", "gpus=4"),
            "no resource 'gpus' in cluster",
            id="misspelled resource flag",
        ),
        pytest.param(("release", "-c", "{c}"), "name the workloads", id="release nothing"),
        pytest.param(("place", "f.yaml", "--policy", "best"), "'best' is not one of", id="policy"),
    ],
)
def test_usage_errors_exit_2(run: Run, demo: str, args: tuple[str, ...], expected: str) -> None:
    """A mistake on the command line is a usage error: exit code 2, no traceback."""
    ran = run(*(a.format(c=demo) for a in args))
    assert ran.code == 2
    assert expected in ran.err
    assert "Traceback" not in ran.err


def test_server_errors_exit_1(run: Run) -> None:
    """A call the server refuses is one line and exit code 1."""
    ran = run("get", "-c", "no-such-cluster")
    assert ran.code == 1
    assert one_error_line(ran) == "error: NOT_FOUND: cluster 'no-such-cluster' not found"


def test_no_server(capsys: pytest.CaptureFixture[str]) -> None:
    """No server at the address: one line that says how to start one."""
    assert main(["ctl", "--address", "127.0.0.1:1", "clusters"]) == 1
    line = one_error_line(Ran(1, "", capsys.readouterr().err))
    assert "cannot reach the server at 127.0.0.1:1" in line
    assert "make serve" in line


@pytest.mark.parametrize(
    ("command", "file", "extra", "code"),
    [
        pytest.param("admit", "train.yaml", (), 0, id="needs reclaim, exit 0"),
        pytest.param("admit", "train.yaml", ("--fail-on-deny",), 1, id="needs reclaim, failing"),
        pytest.param("admit", "admit-ok.yaml", ("--fail-on-deny",), 0, id="admitted, failing"),
        pytest.param("place", "huge.yaml", (), 0, id="unplaced, exit 0"),
        pytest.param("place", "huge.yaml", ("--fail-on-deny",), 1, id="unplaced, failing"),
        pytest.param("reclaim", "reclaim-huge.yaml", ("--fail-on-deny",), 1, id="no victims"),
        pytest.param(
            "reclaim", "reclaim-train.yaml", ("--fail-on-deny", "--dry-run"), 0, id="victims"
        ),
    ],
)
def test_fail_on_deny(
    run: Run, demo: str, tmp_path: Path, command: str, file: str, extra: tuple[str, ...], code: int
) -> None:
    """A "no" exits 0 unless --fail-on-deny, which makes DENIED/UNPLACED/no victims exit 1."""
    (tmp_path / "admit-ok.yaml").write_text(ADMIT_OK)
    huge = "{id: big, scopeId: batch, request: {cpu: 1, gpu: 8}, replicas: 9}"
    (tmp_path / "huge.yaml").write_text(f"workloads:\n  - {huge}\n")
    (tmp_path / "reclaim-huge.yaml").write_text(f"workload: {huge}\n")
    path = EXAMPLES / file if (EXAMPLES / file).exists() else tmp_path / file
    ran = run(command, str(path), "-c", demo, *extra)
    assert ran.code == code, ran.out + ran.err


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("-o", "{fmt}", "get", "-c", "{c}"), id="before the subcommand"),
        pytest.param(("get", "-c", "{c}", "-o", "{fmt}"), id="after the subcommand"),
        pytest.param(("-c", "{c}", "get", "--output", "{fmt}"), id="cluster before, long form"),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_output_anywhere(run: Run, demo: str, args: tuple[str, ...], fmt: str) -> None:
    """-o json|yaml and -c are accepted before or after the subcommand."""
    ran = run(*(a.format(c=demo, fmt=fmt) for a in args))
    assert ran.code == 0, ran.err
    data = json.loads(ran.out) if fmt == "json" else yaml.safe_load(ran.out)
    assert [s["id"] for s in data["scopes"]] == ["acme", "inference", "training", "batch"]


def test_wide_adds_columns(run: Run, demo: str) -> None:
    """-o wide shows borrowed, at-limit, weight and workload count."""
    header = run("get", "-c", demo, "-o", "wide").out.splitlines()[4]
    assert header.split() == [
        "SCOPE", "USAGE", "GUARANTEE", "LIMIT", "BORROWED", "AT", "LIMIT", "WEIGHT", "WORKLOADS",
    ]  # fmt: skip


def test_quota_set_merges_per_resource(run: Run, demo: str) -> None:
    """Setting one resource keeps the others; --unset-* removes one or (alone) all."""

    def scope() -> dict[str, dict[str, str]]:
        data = json.loads(run("get", "-c", demo, "-o", "json").out)
        found = next(s for s in data["scopes"] if s["id"] == "batch")
        return {"guarantee": found["guarantee"], "limit": found["limit"]}

    assert run("quota", "set", "batch", "-c", demo, "--limit", "gpu=10").code == 0
    assert run("quota", "set", "batch", "-c", demo, "--limit", "cpu=100").code == 0
    assert scope()["limit"] == {"gpu": "10000", "cpu": "100000"}
    run("quota", "set", "batch", "-c", demo, "--unset-limit", "gpu", "--guarantee", "gpu=2")
    assert scope() == {"limit": {"cpu": "100000"}, "guarantee": {"gpu": "2000"}}
    ran = run("quota", "set", "batch", "-c", demo, "--unset-limit", "--unset-guarantee")
    assert ran.out.startswith("scope batch updated: guarantee - · limit - · generation")
    assert scope() == {"limit": {}, "guarantee": {}}


def test_quota_set_creates_a_scope(run: Run, demo: str) -> None:
    """A new scope goes under --parent with the amounts given, in human units."""
    ran = run("quota", "set", "research", "-c", demo, "--parent", "acme", "--guarantee", "gpu=0.5")
    assert ran.code == 0, ran.err
    assert ran.out.startswith("scope research created: guarantee 0.5 GPU · limit -")
    assert "    research" not in run("get", "-c", demo).out  # depth 1: two spaces
    assert "  research" in run("get", "-c", demo).out


@pytest.mark.parametrize(
    ("args", "mark"),
    [
        pytest.param(("push", str(EXAMPLES / "cluster.yaml")), "workloads", id="push"),
        pytest.param(("admit", str(EXAMPLES / "train.yaml")), "generation", id="admit"),
        pytest.param(
            ("reclaim", str(EXAMPLES / "reclaim-train.yaml")), "satisfiable", id="reclaim"
        ),
        pytest.param(("release", "sweep-1"), "released sweep-1", id="release"),
        pytest.param(("quota", "set", "batch", "--limit", "gpu=1"), "limit 1 GPU", id="quota set"),
    ],
)
def test_dry_runs_are_marked(run: Run, demo: str, args: tuple[str, ...], mark: str) -> None:
    """A dry run says so in its output and leaves the generation where it was."""
    before = json.loads(run("get", "-c", demo, "-o", "json").out)["generation"]
    ran = run(*args, "-c", demo, "--dry-run")
    assert ran.code == 0, ran.err
    assert "(dry run: nothing was changed)" in ran.out
    assert mark in ran.out
    assert json.loads(run("get", "-c", demo, "-o", "json").out)["generation"] == before


def test_clusters_lists_them(run: Run, demo: str) -> None:
    """ctl clusters shows each cluster with its generation and counts."""
    rows = {line.split()[0]: line.split()[1:] for line in run("clusters").out.splitlines()}
    assert rows["CLUSTER"] == ["GENERATION", "NODES", "SCOPES", "WORKLOADS"]
    assert rows[demo] == ["1", "4", "4", "3"]


def test_round_trip_in_human_units(run: Run, cluster_id: str, tmp_path: Path) -> None:
    """import-openb prints quantities that push reads back; place and release by id."""
    csv = tmp_path / "nodes.csv"
    csv.write_text("sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,2,P100\nn-1,500,1024,0,\n")
    printed = run("import-openb", str(csv)).out
    assert yaml.safe_load(printed)["nodes"] == [
        {"id": "n-0", "capacity": {"cpu": "64", "memory": "256Gi", "gpu": "2"}, "gpuModel": "P100"},
        {"id": "n-1", "capacity": {"cpu": "0.5", "memory": "1Gi"}},
    ]
    snap = tmp_path / "snap.yaml"
    snap.write_text(printed)
    assert run("push", str(snap), "-c", cluster_id).out.endswith("2 nodes, 1 scope, 0 workloads\n")
    place = tmp_path / "place.yaml"
    place.write_text("workloads:\n  - {id: j, scopeId: default, request: {cpu: 4, gpu: 0.5}}\n")
    ran = run("place", str(place), "-c", cluster_id, "--policy", "best_fit")
    assert "j         PLACED    n-0[0]" in ran.out
    assert "4 CPU, 0.5 GPU" in ran.out
    assert run("release", "j", "ghost", "-c", cluster_id).out.endswith(
        "released j; not found: ghost\n"
    )


def test_version_and_completion(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version; completion prints a script for the shell."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("strata-policy, version ")
    assert main(["completion", "bash"]) == 0
    assert "_STRATA_POLICY_COMPLETE" in capsys.readouterr().out
    assert main(["completion", "tcsh"]) == 2


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        pytest.param("strata-policy ct", "plain,ctl", id="command"),
        pytest.param("strata-policy ctl ge", "plain,get", id="subcommand"),
        pytest.param("strata-policy ctl get -o ya", "plain,yaml", id="option value"),
    ],
)
def test_completion_completes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], words: str, expected: str
) -> None:
    """The completion script's callback completes commands and option values."""
    monkeypatch.setenv("_STRATA_POLICY_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", str(len(words.split()) - 1))
    assert main([]) == 0
    assert capsys.readouterr().out.split() == [expected]


def test_kube_is_dispatched_with_its_arguments(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`strata-policy kube ...` hands every argument to strata_policy.kube.cli.main, lazily."""
    seen: list[list[str]] = []
    fake = types.ModuleType("strata_policy.kube.cli")
    fake.main = lambda argv: seen.append(argv) or 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "strata_policy.kube.cli", fake)
    assert main(["kube", "sync", "--cluster", "x", "-h"]) == 3
    assert seen == [["sync", "--cluster", "x", "-h"]]
    monkeypatch.setitem(sys.modules, "strata_policy.kube.cli", None)
    assert main(["kube", "sync"]) == 1
    assert capsys.readouterr().err.startswith("error: kube is not available")


@pytest.mark.parametrize(
    "raw", [pytest.param((), id="quantities"), pytest.param(("--raw",), id="raw")]
)
def test_export_round_trips(run: Run, demo: str, tmp_path: Path, raw: tuple[str, ...]) -> None:
    """ctl export writes a file ctl push takes back to the very same snapshot."""
    exported = run("export", "-c", demo, *raw)
    assert exported.code == 0, exported.err
    path = tmp_path / "exported.yaml"
    path.write_text(exported.out)
    copy = f"{demo}-copy"
    assert run("push", str(path), "-c", copy, *raw).code == 0

    def snapshot(cluster: str) -> object:
        return json.loads(run("get", "--snapshot", "-c", cluster, "-o", "json").out)["snapshot"]

    assert snapshot(copy) == snapshot(demo)
    assert "preemptible: false" in exported.out
    if not raw:
        assert "memory: 512Gi" in exported.out
