"""Start-up recovery and one writer per state directory.

A damaged last change is skipped and removed, so later commits follow the last good one; a gap
or a damaged change in the middle refuses to start, naming the file and the generation; a
journal that cannot be opened or is held by another server gives ``strata-policy serve`` a
one-line error and exit code 2, never a traceback.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from strata_policy.model import Snapshot
from strata_policy.state.changes import Change, ChangeKind, Delta
from strata_policy.state.durable import (
    DB_NAME,
    JournalCorruptError,
    JournalError,
    SqliteJournal,
    StateDirLocked,
)
from strata_policy.testing import node, running, scope, snapshot, workload

BASE = snapshot([node("n1", gpus=8)], [scope("team-a")])


def push(gen: int, snap: Snapshot = BASE) -> Change:
    """A PushSnapshot change of cluster ``a``."""
    return Change("a", gen, ChangeKind.PUSH, snapshot=snap)


def admit(gen: int) -> Change:
    """A delta of cluster ``a`` that admits workload ``w<gen>``."""
    rw = running(workload(f"w{gen}", "team-a", cpu=1))
    return Change("a", gen, ChangeKind.DELTA, delta=Delta(upsert_workloads=(rw,)))


def write(path: Path, changes: list[Change]) -> None:
    """A journal in ``path`` holding ``changes``, closed."""
    journal = SqliteJournal(path)
    for change in changes:
        journal.append(change)
    journal.close()


def edit(path: Path, sql: str, generation: int) -> None:
    """Run one statement on the change row at ``generation``, as a crash or a bad disk would."""
    db = sqlite3.connect(path / DB_NAME)
    db.execute(sql, (generation,))
    db.commit()
    db.close()


DAMAGE = "UPDATE changes SET body = substr(body, 1, 20) WHERE generation = ?"
LOSE = "DELETE FROM changes WHERE generation = ?"


def test_a_damaged_last_change_is_removed_and_later_commits_follow(tmp_path: Path) -> None:
    """After skipping a torn last change, the next commit takes its place and the start after
    that restores everything, with no problem left."""
    write(tmp_path, [push(1), admit(2), admit(3)])
    edit(tmp_path, DAMAGE, 3)
    journal = SqliteJournal(tmp_path)
    assert list(journal.restore()) == [push(1), admit(2)]
    assert len(journal.problems) == 1
    assert "damaged last change (generation 3" in journal.problems[0]
    journal.append(admit(3))  # the engine continues from generation 2
    journal.close()
    again = SqliteJournal(tmp_path)
    assert list(again.restore()) == [push(1), admit(2), admit(3)]
    assert again.problems == []
    again.close()


@pytest.mark.parametrize(
    ("sql", "generation", "message"),
    [
        pytest.param(LOSE, 3, "generation 3 is missing", id="a gap in the generations"),
        pytest.param(
            DAMAGE, 2, "the change at generation 2 (seq 1) is damaged and 2", id="damaged middle"
        ),
        pytest.param(
            "UPDATE checkpoints SET body = 'x' WHERE generation = ?",
            1,
            "the checkpoint at generation 1 is damaged",
            id="damaged checkpoint",
        ),
    ],
)
def test_a_hole_refuses_to_start(tmp_path: Path, sql: str, generation: int, message: str) -> None:
    """A journal missing or unable to read a committed change in the middle refuses, naming
    the file, the cluster and the generation, and changes nothing on disk."""
    write(tmp_path, [push(1), admit(2), admit(3), admit(4)])
    edit(tmp_path, sql, generation)
    saved = (tmp_path / DB_NAME).read_bytes()
    journal = SqliteJournal(tmp_path)
    with pytest.raises(JournalCorruptError) as err:
        list(journal.restore())
    journal.close()
    assert str(tmp_path / DB_NAME) in str(err.value)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert (tmp_path / DB_NAME).read_bytes() == saved


def test_one_writer_per_state_directory(tmp_path: Path) -> None:
    """A second journal on a held state directory is refused with the holder's pid; once the
    first closes, the directory can be opened again."""
    first = SqliteJournal(tmp_path)
    with pytest.raises(StateDirLocked, match=r"in use by another server \(pid \d+\)"):
        SqliteJournal(tmp_path)
    first.close()
    SqliteJournal(tmp_path).close()


def test_a_file_that_is_not_a_database_is_a_journal_error(tmp_path: Path) -> None:
    """Garbage where the database should be is one ``JournalError`` naming the file, and the
    directory's lock is released again."""
    (tmp_path / DB_NAME).write_bytes(b"not a database " * 512)
    with pytest.raises(JournalError, match=str(tmp_path / DB_NAME)):
        SqliteJournal(tmp_path)
    (tmp_path / DB_NAME).unlink()
    SqliteJournal(tmp_path).close()


# --- `strata-policy serve`: one line on stderr, exit code 2 ------------------------------------


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a directory) refusing new files: ``chattr +i`` as root (root ignores modes),
    mode 0555 otherwise; skips when neither holds."""
    path.mkdir(parents=True, exist_ok=True)
    immutable = (
        shutil.which("chattr") is not None
        and subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode
        == 0
    )
    if not immutable:
        path.chmod(0o555)
    try:
        probe = path / "probe"
        try:
            probe.touch()
        except OSError:
            pass
        else:
            probe.unlink()
            pytest.skip("cannot make a directory read-only here")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=False)
        path.chmod(0o755)


def serve_fails(state_dir: Path) -> str:
    """Run ``strata-policy serve`` on ``state_dir``; assert it exits 2 printing one line and
    no traceback; that line."""
    done = subprocess.run(
        [sys.executable, "-m", "strata_policy.cli", "serve", "--address", "127.0.0.1:0",
         "--state-dir", str(state_dir), "--log-level", "error"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("strata-policy: ")
    return lines[0]


def _garbage(state_dir: Path) -> Iterator[None]:
    state_dir.mkdir()
    (state_dir / DB_NAME).write_bytes(b"garbage " * 1024)
    yield


def _hole(state_dir: Path) -> Iterator[None]:
    write(state_dir, [push(1), admit(2), admit(3)])
    edit(state_dir, LOSE, 2)
    yield


def _held(state_dir: Path) -> Iterator[None]:
    holder = SqliteJournal(state_dir)  # another server's journal
    yield
    holder.close()


def _read_only(state_dir: Path) -> Iterator[None]:
    with read_only(state_dir):
        yield


@pytest.mark.parametrize(
    ("setup", "says"),
    [
        pytest.param(_garbage, "file is not a database", id="corrupt database file"),
        pytest.param(_hole, "generation 2 is missing", id="a gap in the journal"),
        pytest.param(_held, "in use by another server", id="a second server on the directory"),
        pytest.param(_read_only, "cannot use the state directory", id="read-only directory"),
    ],
)
def test_serve_refuses_with_one_line(
    tmp_path: Path, setup: Callable[[Path], Iterator[None]], says: str
) -> None:
    """Every journal that cannot be used stops ``serve`` with one line naming the problem."""
    state_dir = tmp_path / "state"
    with contextmanager(setup)(state_dir):
        line = serve_fails(state_dir)
    assert says in line
    assert str(state_dir) in line
