"""The contract stays clean: stubs match the protos, buf lint/format/breaking pass."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUF = ROOT / "node_modules" / ".bin" / "buf"
needs_buf = pytest.mark.skipif(not BUF.exists(), reason="buf not installed (run `npm ci`)")


def test_generated_code_matches_protos(tmp_path: Path) -> None:
    """Regenerating the stubs into a temporary directory gives byte-identical files."""
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), str(tmp_path)], check=True
    )
    committed = ROOT / "generated"
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    ours = sorted(
        p.relative_to(committed)
        for p in committed.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert fresh == ours, "files differ: run `make protos`"
    drift = [str(p) for p in fresh if not filecmp.cmp(tmp_path / p, committed / p, shallow=False)]
    assert not drift, f"stale generated code {drift}: run `make protos`"


@needs_buf
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["lint"], id="buf lint STANDARD"),
        pytest.param(["format", "--diff", "--exit-code"], id="buf format"),
    ],
)
def test_buf(args: list[str]) -> None:
    """buf lint and buf format find nothing to say."""
    result = subprocess.run(
        [str(BUF), *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@needs_buf
def test_buf_breaking_against_main(tmp_path: Path) -> None:
    """No wire-breaking change against the protos committed on main (FILE rules)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    has_main = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", "main"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if has_main.returncode != 0:
        pytest.skip("no main branch to compare with")
    result = subprocess.run(
        [str(BUF), "breaking", "--against", ".git#branch=main"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
