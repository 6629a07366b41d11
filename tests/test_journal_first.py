"""Journal-first commits: a call whose journal write fails changes nothing, in memory or on disk.

Every mutating call, on an engine whose journal refuses the write, fails with
``StorageUnavailable`` (UNAVAILABLE over gRPC) and leaves the clusters, their generations, the
idempotency memory and the journal exactly as before; a restart from the journal serves what
memory serves. A failed checkpoint does not fail its call: the change is durable as a delta.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from journal_doubles import FlakyJournal, memory, replayed

from strata_policy.engine import Engine
from strata_policy.errors import StorageUnavailable, StrataError
from strata_policy.state.changes import Delta
from strata_policy.state.durable import DB_NAME, SqliteJournal
from strata_policy.testing import node, running, scope, snapshot, workload

BASE = snapshot(
    [node("n1", cpu=64, gpus=8), node("n2", cpu=64, gpus=8)],
    [
        scope("org"),
        scope("team-a", "org", guarantee={"cpu": 32_000, "gpu": 8000}),
        scope("team-b", "org"),
    ],
    [
        running(workload("b1", "team-b", cpu=16, gpu_milli=4000), ("n1", (0, 1, 2, 3))),
        running(workload("b2", "team-b", cpu=16, gpu_milli=4000), ("n2", (0, 1, 2, 3))),
        running(workload("a1", "team-a", cpu=4), "n1"),
    ],
)
Call = Callable[[Engine], object]

CALLS = [
    pytest.param(lambda e: e.push_snapshot("c", snapshot([node("n9")], [scope("x")])), id="push"),
    pytest.param(lambda e: e.push_snapshot("new", BASE), id="push a new cluster"),
    pytest.param(
        lambda e: e.update_snapshot("c", Delta(upsert_nodes=(node("n3", gpus=8),))), id="update"
    ),
    pytest.param(lambda e: e.delete_cluster("c"), id="delete"),
    pytest.param(lambda e: e.admit("c", [workload("w1", "team-a", cpu=1)]), id="admit one"),
    pytest.param(
        lambda e: e.admit("c", [workload(f"w{i}", "team-a", cpu=1) for i in range(3)]),
        id="admit a batch",
    ),
    pytest.param(
        lambda e: e.place("c", [workload("p1", "team-a", cpu=2, gpu_milli=1000)]), id="place"
    ),
    pytest.param(lambda e: e.place("c", workload_ids=["q1"]), id="place admitted by id"),
    pytest.param(lambda e: e.release("c", ["b1", "a1"]), id="release"),
    pytest.param(
        lambda e: e.reclaim(
            "c", workload("r1", "team-a", cpu=8, gpu_milli=8000), require_placement=True
        ),
        id="reclaim",
    ),
]


def _prepare(engine: Engine) -> None:
    """Cluster ``c`` from ``BASE``, and ``q1`` admitted (not placed) under a request id."""
    engine.push_snapshot("c", BASE)
    engine.admit("c", [workload("q1", "team-a", cpu=1)], request_id="earlier")


@pytest.fixture
def journaled(tmp_path: Path) -> Iterator[tuple[Engine, FlakyJournal]]:
    """An engine on a real SQLite journal that can be told to refuse, with cluster ``c``."""
    journal = FlakyJournal(SqliteJournal(tmp_path))
    engine = Engine(clock=lambda: 1_000, journal=journal)
    _prepare(engine)
    yield engine, journal
    journal.inner.close()


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize(
    "error",
    [
        pytest.param(None, id="StorageUnavailable"),
        pytest.param(OSError(errno.ENOSPC, "No space left on device"), id="OSError"),
    ],
)
def test_a_refused_write_changes_nothing(
    journaled: tuple[Engine, FlakyJournal], tmp_path: Path, call: Call, error: Exception | None
) -> None:
    """The call fails as StorageUnavailable; memory, generation, idempotency memory and the
    journal are as before, and the same call succeeds once the disk takes writes again."""
    engine, journal = journaled
    before, remembered = memory(engine), engine.store.remembered()
    journal.fail, journal.error = True, error
    with pytest.raises(StorageUnavailable) as err:
        call(engine)
    assert err.value.reason == "STORAGE_UNAVAILABLE"
    assert journal.refused == 1
    assert memory(engine) == before
    assert engine.store.remembered() == remembered
    journal.fail = False
    call(engine)  # retryable: nothing of the failed attempt is in the way
    after = memory(engine)
    assert after != before
    journal.inner.close()
    assert replayed(tmp_path) == after


@pytest.mark.parametrize("call", CALLS)
def test_any_journal_error_rolls_back(
    journaled: tuple[Engine, FlakyJournal], tmp_path: Path, call: Call
) -> None:
    """Even an error the engine does not know (a bug in a journal) leaves memory as it was."""
    engine, journal = journaled
    before = memory(engine)
    journal.fail, journal.error = True, sqlite3.InterfaceError("a journal bug")
    with pytest.raises(sqlite3.InterfaceError):
        call(engine)
    assert memory(engine) == before
    journal.inner.close()
    assert replayed(tmp_path) == before


@pytest.mark.parametrize("call", CALLS)
def test_a_failed_checkpoint_does_not_fail_the_call(tmp_path: Path, call: Call) -> None:
    """A checkpoint due after the commit that fails is logged, not answered: the change is
    durable as a delta, so memory and a restart from the journal agree."""
    journal = FlakyJournal(SqliteJournal(tmp_path, every=1))
    engine = Engine(clock=lambda: 1_000, journal=journal)
    _prepare(engine)
    journal.fail_checkpoint = True
    try:
        call(engine)
    except StrataError as exc:  # pragma: no cover - every call in the table commits
        pytest.fail(f"the call failed: {exc}")
    after = memory(engine)
    journal.inner.close()
    assert replayed(tmp_path, every=1) == after


def test_a_refused_dry_run_is_not_affected(journaled: tuple[Engine, FlakyJournal]) -> None:
    """Dry runs never write, so a disk refusing writes does not fail them."""
    engine, journal = journaled
    journal.fail = True
    result = engine.admit("c", [workload("d1", "team-a", cpu=1)], dry_run=True)
    assert result.results[0].decision.value == "ADMITTED"
    assert journal.refused == 0


def _chattr(flag: str, paths: list[Path]) -> bool:
    """``chattr flag`` on every path; whether it took (root on a file system that has it)."""
    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.parametrize("call", CALLS)
def test_a_read_only_state_directory_fails_writes_not_the_server(
    tmp_path: Path, call: Call
) -> None:
    """With the journal's files made immutable under a running engine (as a disk remounted
    read-only), a commit is StorageUnavailable and changes nothing; once writable again the
    same call commits, and a restart serves what memory serves."""
    journal = SqliteJournal(tmp_path)
    engine = Engine(clock=lambda: 1_000, journal=journal)
    _prepare(engine)
    # The database and its WAL (not the -shm index: SQLite maps it, and a write to a mapped
    # immutable page is SIGBUS, not an error), and the directory.
    files = [tmp_path / DB_NAME, tmp_path / f"{DB_NAME}-wal", tmp_path]
    if not _chattr("+i", files):
        journal.close()
        pytest.skip("cannot make files immutable here (needs root and chattr)")
    try:
        before = memory(engine)
        with pytest.raises(StorageUnavailable):
            call(engine)
        assert memory(engine) == before
    finally:
        _chattr("-i", files)
    call(engine)
    after = memory(engine)
    journal.close()
    assert replayed(tmp_path) == after
