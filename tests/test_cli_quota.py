"""`ctl quota set` and `ctl export` mistakes a newcomer makes: one clear line, nothing sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ctl_kit import Run, demo, no_ambient_cluster, one_error_line, run

__all__ = ["demo", "no_ambient_cluster", "run"]  # fixtures used by name


def _generation(run: Run, cluster: str) -> int:
    return int(json.loads(run("get", "-c", cluster, "-o", "json").out)["generation"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ("--unset-limit", "gpus"),
            "Invalid value for --unset-limit: no resource 'gpus' in cluster",
            id="misspelled --unset-limit names its own flag",
        ),
        pytest.param(
            ("--unset-guarantee", "cpu,gpus"),
            "Invalid value for --unset-guarantee: no resource 'gpus'",
            id="misspelled --unset-guarantee names its own flag",
        ),
        pytest.param(
            ("--limit", "gpu=4", "--unset-limit", "gpu"),
            "--limit and --unset-limit both name gpu: choose one",
            id="set and unset one resource",
        ),
        pytest.param(
            ("--guarantee", "gpu=1,cpu=2", "--unset-guarantee", "cpu,gpu"),
            "--guarantee and --unset-guarantee both name cpu, gpu: choose one",
            id="set and unset two resources",
        ),
        pytest.param(
            (),
            "nothing to change on scope 'batch'",
            id="an existing scope and no change",
        ),
    ],
)
def test_quota_set_usage_errors(run: Run, demo: str, args: tuple[str, ...], expected: str) -> None:
    """A contradictory or empty `quota set` is a usage error (exit 2) and commits nothing."""
    before = _generation(run, demo)
    ran = run("quota", "set", "batch", "-c", demo, *args)
    assert ran.code == 2, ran.out + ran.err
    assert expected in one_error_line(ran)
    assert _generation(run, demo) == before


def test_quota_set_unset_all_then_set_one(run: Run, demo: str) -> None:
    """`--unset-limit` alone with `--limit gpu=4` replaces every limit by that one."""
    ran = run("quota", "set", "batch", "-c", demo, "--unset-limit", "--limit", "gpu=4")
    assert ran.code == 0, ran.err
    assert ran.out.startswith("scope batch updated: guarantee - · limit 4 GPU · generation")


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_export_is_stable_across_a_round_trip(
    run: Run, demo: str, cluster_id: str, tmp_path: Path, fmt: str
) -> None:
    """Exporting, pushing the export elsewhere and exporting again gives the same text."""
    first = run("export", "-c", demo, "-o", fmt)
    assert first.code == 0, first.err
    path = tmp_path / f"cluster.{fmt}"
    path.write_text(first.out)
    copy = f"{cluster_id}-copy"
    assert run("push", str(path), "-c", copy).code == 0
    try:
        assert run("export", "-c", copy, "-o", fmt).out == first.out
    finally:
        run("delete", "-c", copy)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", "f.yaml: is empty; expected a mapping (AdmitRequest)", id="empty"),
        pytest.param(
            "- id: w\n", "f.yaml:1:1: expected a mapping (AdmitRequest), got a list", id="a list"
        ),
    ],
)
def test_file_shape_errors_read_well(
    run: Run, demo: str, tmp_path: Path, text: str, expected: str
) -> None:
    """An empty file or a list at the top names the message it should have been."""
    path = tmp_path / "f.yaml"
    path.write_text(text)
    ran = run("admit", str(path), "-c", demo)
    assert ran.code == 1
    assert one_error_line(ran) == f"error: {path.parent}/{expected}"


def test_export_writes_maps_in_sorted_order(run: Run, demo: str) -> None:
    """Resource maps come out sorted by name, whatever order the pushed file used."""
    exported = yaml.safe_load(run("export", "-c", demo).out)
    maps = [node["capacity"] for node in exported["nodes"]]
    maps += [s[f] for s in exported["scopes"] for f in ("guarantee", "limit") if f in s]
    maps += [w["workload"]["request"] for w in exported["workloads"]]
    assert maps
    assert all(list(m) == sorted(m) for m in maps), maps
