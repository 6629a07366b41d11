"""The kernel cache folder follows every kernel source, so an edit never runs stale code."""

from __future__ import annotations

from pathlib import Path

import numba
import pytest

from strata_policy.kernels import config


def test_cache_dir_is_the_one_numba_uses() -> None:
    """numba's cache folder is the digest-named one, under a writable base."""
    folder = config.cache_dir()
    assert folder.name.startswith("strata-kernels-")
    assert str(folder) == numba.config.CACHE_DIR


def test_any_kernel_source_change_moves_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editing one kernel file (not the one a cached kernel lives in) changes the folder."""
    before = config.cache_dir()
    original = Path.read_bytes

    def edited(self: Path) -> bytes:
        data = original(self)
        return data + b"\n# edited" if self.name == "frag.py" else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert config.cache_dir().name != before.name


def test_numba_cache_dir_environment_is_the_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NUMBA_CACHE_DIR (the container's writable folder) is used as the base when set."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert config.cache_dir().parent == tmp_path


def test_wrapper_edit_keeps_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing a pure-Python wrapper (no kernel in it) keeps the compiled kernels."""
    before = config.cache_dir()
    original = Path.read_bytes

    def edited(self: Path) -> bytes:
        data = original(self)
        return data + b"\n# edited" if self.name == "search.py" else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert config.cache_dir().name == before.name
