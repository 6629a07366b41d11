"""The README works as written: its ctl sessions print what it shows, its example runs, its
layout section names the tree.

Every ```` ```console ```` block of the README is a session: ``$ strata-policy ...`` lines are run
in order against an in-process server of their own (``$ export NAME=value`` sets a variable) and
what follows each command, up to the next ``$``, must be exactly what it prints (stdout, then
stderr). After a deliberate change of output, rewrite the samples with
``STRATA_UPDATE_README=1 pytest tests/test_readme.py`` and review the diff.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import pytest
from gate_server import serve_gate_at

from strata_policy.cli import main
from strata_policy.engine import Engine
from strata_policy.service.calls import CallGate, Slots
from strata_policy.service.servicer import SERVICE, PolicyServicer, method_handlers

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONSOLE = re.compile(r"```console\n(.*?)```", flags=re.S)


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    """A server of the README's own, so `ctl clusters` lists only what the README pushed."""
    gate = CallGate(
        method_handlers(PolicyServicer(Engine(clock=lambda: 1_000))),
        SERVICE,
        futures.ThreadPoolExecutor(max_workers=2),
        Slots(16),
    )
    with serve_gate_at(gate) as address:
        yield address


def _session(
    block: str, address: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    """The block as it should read: each command followed by what it printed."""
    out: list[str] = []
    for line in block.splitlines():
        if not line.startswith("$ "):
            continue
        out.append(line)
        argv = shlex.split(line[2:])
        if argv[0] == "export":
            name, _, value = argv[1].partition("=")
            monkeypatch.setenv(name, value)
            continue
        assert argv[0] == "strata-policy", f"README runs only strata-policy: {line}"
        capsys.readouterr()
        main(argv[1:])
        captured = capsys.readouterr()
        printed = captured.out + captured.err
        out += [text.rstrip() for text in printed.rstrip("\n").splitlines()]
    return "\n".join(out) + "\n"


def test_readme_sessions_print_what_they_show(
    address: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each README ctl command, run in order, prints exactly the sample output shown under it."""
    for name in ("STRATA_CLUSTER", "STRATA_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STRATA_ADDRESS", address)
    monkeypatch.chdir(ROOT)
    text = README.read_text()
    blocks = CONSOLE.findall(text)
    assert len(blocks) >= 2, "the README's ctl sessions are gone"
    actual = [_session(block, address, monkeypatch, capsys) for block in blocks]
    if os.environ.get("STRATA_UPDATE_README"):
        parts = iter(actual)
        README.write_text(CONSOLE.sub(lambda _: f"```console\n{next(parts)}```", text))
        pytest.skip("README samples rewritten: review the diff")
    assert actual == blocks


def test_readme_python_example() -> None:
    """job-1's two replicas land on node-1 and node-2 with all eight devices each."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "README.md", "exec"), {})  # our own README, not input
    printed = out.getvalue()
    assert "Placement(node_id='node-1', gpu_devices=(0, 1, 2, 3, 4, 5, 6, 7))" in printed
    assert "Placement(node_id='node-2', gpu_devices=(0, 1, 2, 3, 4, 5, 6, 7))" in printed


def _layout() -> str:
    text = README.read_text()
    return text[text.index("## Layout") :]


def test_layout_names_the_tree() -> None:
    """The layout section names every tracked top-level directory and every package of
    strata_policy, and every top-level path it names exists."""
    layout = _layout()
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    top = {p.split("/")[0] for p in tracked if "/" in p and not p.startswith(".")}
    missing = sorted(d for d in top if f"`{d}/" not in layout)
    assert not missing, f"README layout misses {missing}"
    packages = {
        p.name for p in (ROOT / "strata_policy").iterdir() if p.is_dir() and any(p.glob("*.py"))
    }
    missing = sorted(p for p in packages if f"`{p}`" not in layout)
    assert not missing, f"README layout misses packages {missing}"
    for path in re.findall(r"`([a-z_.]+/)[^`]*`", layout):
        assert (ROOT / path).exists(), f"README layout names {path}, which is not there"


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    suffixes = {".py", ".md", ".yaml", ".yml", ".toml", ".proto", ".json", ".js", ".lock", ".txt"}
    keep = [ROOT / n for n in names if Path(n).suffix in suffixes or Path(n).name in {"Makefile"}]
    return [p for p in keep if p.exists() and p != Path(__file__).resolve()]


def test_no_reference_outside_the_repo() -> None:
    """No file of the repository (code, tests, docs, manifests) reads or links a path outside
    it: a clone alone runs the quick start, the tests and the simulator."""
    outside = [
        f"{p.relative_to(ROOT)}: {marker}"
        for p in _tracked_text_files()
        for marker in ("../shared", "/work/")
        if marker in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert not outside


@pytest.mark.parametrize(
    "path", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("docs/*.md"))]
)
def test_the_design_is_in_the_repo(path: str) -> None:
    """README and docs point at docs/design.md, not at a DESIGN.md beside the repository."""
    assert "DESIGN.md" not in (ROOT / path).read_text()
