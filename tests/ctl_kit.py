"""What the ctl tests share: a runner against the session server, the demo cluster, checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from strata_policy.cli import main
from strata_policy.service.server import Server

ADMIT_OK = "workloads:\n  - id: w\n    scopeId: batch\n    request: {cpu: 1}\n"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@dataclass
class Ran:
    """One command's exit code and output."""

    code: int
    out: str
    err: str


Run = Callable[..., Ran]


@pytest.fixture(autouse=True)
def no_ambient_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests name their cluster; the caller's shell must not choose one."""
    for name in ("STRATA_CLUSTER", "STRATA_ADDRESS", "STRATA_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def run(server: Server, capsys: pytest.CaptureFixture[str]) -> Run:
    """Run ``strata-policy ctl --address <session server> ARGS`` and capture it."""

    def call(*args: str) -> Ran:
        capsys.readouterr()
        code = main(["ctl", "--address", f"127.0.0.1:{server.port}", *args])
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return call


@pytest.fixture
def demo(run: Run, cluster_id: str) -> str:
    """A fresh copy of examples/cluster.yaml under its own cluster id."""
    ran = run("push", str(EXAMPLES / "cluster.yaml"), "-c", cluster_id)
    assert ran.code == 0, ran.err
    return cluster_id


def one_error_line(ran: Ran) -> str:
    assert "Traceback" not in ran.err
    lines = ran.err.strip().splitlines()
    assert len(lines) == 1, ran.err
    assert lines[0].startswith("error: ")
    return lines[0]
