"""How ctl shows a server's refusal: every violation sent, and how many were left out."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctl_kit import ADMIT_OK, Run, no_ambient_cluster, one_error_line, run

__all__ = ["no_ambient_cluster", "run"]  # fixtures used by name


def test_violations_beyond_the_first_twenty_are_counted(
    run: Run, cluster_id: str, tmp_path: Path
) -> None:
    """A push with 30 bad nodes prints the 20 the server sends, then how many more there are."""
    rows = "".join(f"  - {{id: n{i}, capacity: {{cpu: 4, gpu: 1.5}}}}\n" for i in range(30))
    path = tmp_path / "nodes.yaml"
    path.write_text("nodes:\n" + rows)
    ran = run("push", str(path), "-c", cluster_id)
    assert ran.code == 1
    lines = ran.err.strip().splitlines()
    assert len(lines) == 21, ran.err
    assert all(line.startswith(f"error: {path}:") for line in lines[:20])
    assert lines[20] == "error: ... and 10 more (INVALID_ARGUMENT; the server sends the first 20)"


def test_no_count_line_when_every_violation_is_sent(
    run: Run, cluster_id: str, tmp_path: Path
) -> None:
    """Two bad nodes: two lines, no count line."""
    rows = "".join(f"  - {{id: n{i}, capacity: {{cpu: 4, gpu: 1.5}}}}\n" for i in range(2))
    path = tmp_path / "nodes.yaml"
    path.write_text("nodes:\n" + rows)
    ran = run("push", str(path), "-c", cluster_id)
    assert ran.code == 1
    assert len(ran.err.strip().splitlines()) == 2, ran.err


@pytest.mark.parametrize(
    ("where", "named_by"),
    [
        pytest.param("flag", "-c", id="-c on the command line"),
        pytest.param("env", "$STRATA_CLUSTER", id="from the environment"),
    ],
)
def test_cluster_mismatch_names_where_the_cluster_came_from(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, named_by: str
) -> None:
    """A file for another cluster names what chose the cluster: -c or $STRATA_CLUSTER."""
    path = tmp_path / "admit.yaml"
    path.write_text(f"clusterId: elsewhere\n{ADMIT_OK}")
    if where == "env":
        monkeypatch.setenv("STRATA_CLUSTER", "here")
        ran = run("admit", str(path))
    else:
        ran = run("admit", str(path), "-c", "here")
    assert ran.code == 1
    assert one_error_line(ran) == (
        f"error: the file is for cluster 'elsewhere' but {named_by} names 'here'; drop one of them"
    )
