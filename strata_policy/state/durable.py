"""A durable journal of committed changes in SQLite, so no acknowledged commit is lost.

Layout (one file, ``<state-dir>/strata.db``, WAL mode, ``synchronous=FULL``)::

    checkpoints(cluster_id PK, generation, body, crc)     the latest whole snapshot per cluster
    changes(seq PK, cluster_id, generation, body, crc)    deltas committed after that checkpoint

Durability model: the engine calls ``append`` under the cluster's lock after every committed
change and before the RPC answers; ``append`` returns only once SQLite has fsynced the WAL
(``synchronous=FULL``), so an acknowledged change survives ``kill -9`` and power loss. Each
append is one SQLite transaction: after a crash a change is either wholly there or absent.

Compaction: a PUSH replaces the cluster's history (it is stored as the new checkpoint and all
older deltas are dropped in the same transaction, whatever their generations); ``checkpoint``
does the same with the engine's current snapshot every ``every`` deltas (``wants_checkpoint``
tells the engine when); a DELETE
drops everything the cluster had. ``restore`` therefore yields, per live cluster, one PUSH at the
checkpoint's generation followed by the later deltas in commit order — replaying them rebuilds
the cluster exactly, without re-running any policy.

Every body carries a CRC-32. A row that fails it (or fails to decode) and is the last of its
cluster is a torn final write: it is skipped, reported in ``problems``, and deleted, so the next
commit follows the last good change. A bad row with later rows behind it, or a gap in a
cluster's generations (each delta is its predecessor's generation + 1), cannot be skipped
without losing commits, so ``restore`` raises ``JournalCorruptError`` naming the file, the
cluster and the generation, and the server refuses to start rather than serve a state with a
hole.

Failures: a write the disk refuses (full, read-only, I/O error, over ``RLIMIT_FSIZE``) rolls the
SQLite transaction back and raises ``StorageUnavailable``, so the engine fails the call having
changed nothing (its commit protocol, ``engine``). A journal that cannot be opened (a directory
that cannot be written, a file that is not a database) raises ``JournalError`` with a one-line
message, and so does a state directory another server holds: one writer per directory, enforced
with an exclusive ``flock`` on ``<state-dir>/strata.lock`` held until ``close`` (the kernel
releases it when the process dies, so a crash never leaves a stale lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

from strata_policy.errors import InvalidArgument, StorageUnavailable
from strata_policy.model import Snapshot
from strata_policy.state import codec
from strata_policy.state.changes import Change, ChangeKind

DB_NAME = "strata.db"
LOCK_NAME = "strata.lock"
DEFAULT_CHECKPOINT_EVERY = 1_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    cluster_id TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    body TEXT NOT NULL,
    crc INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    body TEXT NOT NULL,
    crc INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_by_cluster ON changes (cluster_id, seq);
"""


class JournalError(Exception):
    """The journal cannot be used (unopenable, damaged, or held by another server); the
    message is one line naming the file and the problem, for ``strata-policy serve`` to print."""


class JournalCorruptError(JournalError):
    """The journal has a damaged change with committed changes after it, a gap in a cluster's
    generations, or a damaged checkpoint; refuse to guess."""


class StateDirLocked(JournalError):
    """Another process holds the state directory's lock: one writer per state directory."""


def _encode(change: Change) -> tuple[str, int]:
    body = json.dumps(codec.change_to_dict(change), separators=(",", ":"), sort_keys=True)
    return body, zlib.crc32(body.encode())


def _decode(body: str, crc: int) -> Change | None:
    """The change a row holds, or ``None`` when the row is damaged."""
    if zlib.crc32(body.encode()) != crc:
        return None
    try:
        return codec.change_from_dict(json.loads(body))
    except (ValueError, InvalidArgument):
        return None


class SqliteJournal:
    """Committed changes of every cluster, fsynced before the caller acknowledges them.

    Thread-safe: one connection, writes serialised on an internal lock (the engine already
    serialises per cluster; this orders writes of different clusters).
    """

    def __init__(self, state_dir: str | Path, every: int = DEFAULT_CHECKPOINT_EVERY) -> None:
        """Lock the state directory, open (or create) its database; ``JournalError`` when the
        directory is another server's or the database cannot be opened."""
        if every < 1:
            raise ValueError(f"checkpoint interval must be at least 1, got {every}")
        self.path = Path(state_dir) / DB_NAME
        self.every = every
        self.problems: list[str] = []
        self._lock = threading.Lock()
        _ignore_file_size_signal()
        self._lock_fd = _lock_directory(Path(state_dir))
        try:
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            self._since: dict[str, int] = dict(
                self._db.execute("SELECT cluster_id, COUNT(*) FROM changes GROUP BY cluster_id")
            )
        except (sqlite3.Error, OSError) as exc:
            os.close(self._lock_fd)
            raise JournalError(f"cannot open the journal {self.path}: {exc}") from exc

    # --- writing ---------------------------------------------------------------------------

    def append(self, change: Change) -> None:
        """Make one committed change durable; returns after the fsync.

        PUSH becomes the cluster's checkpoint (its older deltas dropped), DELTA is appended,
        DELETE forgets the cluster. When the disk refuses, the SQLite transaction is rolled back
        and ``StorageUnavailable`` raised: nothing of the change was stored, and the engine
        fails the call having changed nothing.
        """
        cid = change.cluster_id
        if change.kind is ChangeKind.PUSH and change.snapshot is None:
            raise ValueError("a PUSH change carries its snapshot")
        body, crc = _encode(change) if change.kind is not ChangeKind.DELETE else ("", 0)
        with self._lock:
            try:
                with self._transaction():
                    if change.kind is ChangeKind.DELETE:
                        self._forget(cid)
                        since = None
                    elif change.kind is ChangeKind.PUSH:
                        self._db.execute("DELETE FROM changes WHERE cluster_id = ?", (cid,))
                        since = self._store_checkpoint(cid, change.generation, body, crc)
                    else:
                        self._db.execute(
                            "INSERT INTO changes (cluster_id, generation, body, crc)"
                            " VALUES (?, ?, ?, ?)",
                            (cid, change.generation, body, crc),
                        )
                        since = self._since.get(cid, 0) + 1
            except (sqlite3.Error, OSError) as exc:
                raise StorageUnavailable(cid, f"{type(exc).__name__}: {exc}") from exc
            if since is None:
                self._since.pop(cid, None)
            else:
                self._since[cid] = since

    def wants_checkpoint(self, cluster_id: str, generation: int) -> bool:
        """Whether the cluster has ``every`` or more deltas since its last checkpoint."""
        del generation  # the count of deltas decides, not the generation's value
        return self._since.get(cluster_id, 0) >= self.every

    def checkpoint(self, cluster_id: str, generation: int, snapshot: Snapshot) -> None:
        """Store the cluster's whole state at ``generation`` and drop the deltas it covers;
        ``StorageUnavailable`` (and nothing changed) when the disk refuses."""
        body, crc = _encode(Change(cluster_id, generation, ChangeKind.PUSH, snapshot=snapshot))
        with self._lock:
            try:
                with self._transaction():
                    since = self._store_checkpoint(cluster_id, generation, body, crc)
            except (sqlite3.Error, OSError) as exc:
                raise StorageUnavailable(cluster_id, f"{type(exc).__name__}: {exc}") from exc
            self._since[cluster_id] = since

    def _store_checkpoint(self, cid: str, generation: int, body: str, crc: int) -> int:
        """Write the checkpoint row, drop the deltas it covers; the deltas left after it."""
        self._db.execute(
            "INSERT OR REPLACE INTO checkpoints (cluster_id, generation, body, crc)"
            " VALUES (?, ?, ?, ?)",
            (cid, generation, body, crc),
        )
        self._db.execute(
            "DELETE FROM changes WHERE cluster_id = ? AND generation <= ?", (cid, generation)
        )
        (left,) = self._db.execute(
            "SELECT COUNT(*) FROM changes WHERE cluster_id = ?", (cid,)
        ).fetchone()
        return int(left)

    def _forget(self, cluster_id: str) -> None:
        self._db.execute("DELETE FROM checkpoints WHERE cluster_id = ?", (cluster_id,))
        self._db.execute("DELETE FROM changes WHERE cluster_id = ?", (cluster_id,))

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    # --- reading ---------------------------------------------------------------------------

    def restore(self) -> Iterator[Change]:
        """Every live cluster as a PUSH at its checkpoint, then its later deltas in order.

        Clusters come sorted by id. A damaged last delta is skipped (see ``problems``) and
        deleted; a damaged checkpoint, a damaged delta followed by others, or a gap in the
        generations raises ``JournalCorruptError``; a database that cannot be read raises
        ``JournalError``.
        """
        try:
            with self._lock:
                checkpoints = self._db.execute(
                    "SELECT cluster_id, generation, body, crc FROM checkpoints ORDER BY cluster_id"
                ).fetchall()
                orphans = self._db.execute(
                    "SELECT DISTINCT cluster_id FROM changes"
                    " WHERE cluster_id NOT IN (SELECT cluster_id FROM checkpoints)"
                ).fetchall()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read the journal {self.path}: {exc}") from exc
        for (cid,) in orphans:
            self.problems.append(f"cluster {cid!r}: changes without a checkpoint ignored")
        for cid, generation, body, crc in checkpoints:
            base = _decode(body, crc)
            if base is None or base.snapshot is None or base.generation != generation:
                raise JournalCorruptError(
                    f"{self.path}: cluster {cid!r}: the checkpoint at generation {generation} "
                    "is damaged"
                )
            yield base
            yield from self._deltas(cid, generation)

    def _deltas(self, cluster_id: str, after: int) -> Iterator[Change]:
        """The cluster's deltas after its checkpoint at ``after``: each at the generation after
        the one before it; a damaged last one is dropped from the file (see ``restore``)."""
        try:
            with self._lock:
                rows = self._db.execute(
                    "SELECT seq, generation, body, crc FROM changes"
                    " WHERE cluster_id = ? AND generation > ? ORDER BY seq",
                    (cluster_id, after),
                ).fetchall()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read the journal {self.path}: {exc}") from exc
        last = after
        where = f"{self.path}: cluster {cluster_id!r}"
        for i, (seq, generation, body, crc) in enumerate(rows):
            change = _decode(body, crc)
            if change is None or change.delta is None or change.generation != generation:
                if i == len(rows) - 1:
                    self._truncate(cluster_id, seq)
                    self.problems.append(
                        f"cluster {cluster_id!r}: damaged last change (generation {generation},"
                        f" seq {seq}) skipped and removed"
                    )
                    return
                raise JournalCorruptError(
                    f"{where}: the change at generation {generation} (seq {seq}) is damaged and "
                    f"{len(rows) - 1 - i} committed changes follow it"
                )
            if generation != last + 1:
                raise JournalCorruptError(
                    f"{where}: generation {last + 1} is missing (the next change is at "
                    f"generation {generation}, seq {seq})"
                )
            last = generation
            yield change

    def _truncate(self, cluster_id: str, seq: int) -> None:
        """Delete a damaged last change, so the next commit lands right after the last good one
        (else it would land behind the damaged row, and the next start would refuse)."""
        try:
            with self._lock, self._transaction():
                self._db.execute("DELETE FROM changes WHERE seq = ?", (seq,))
        except (sqlite3.Error, OSError) as exc:
            raise JournalError(
                f"cannot remove the damaged last change (seq {seq}) of cluster {cluster_id!r} "
                f"from {self.path}: {exc}"
            ) from exc
        self._since[cluster_id] = max(self._since.get(cluster_id, 1) - 1, 0)

    def close(self) -> None:
        """Close the database (the WAL is checkpointed into the main file by SQLite) and release
        the state directory's lock."""
        with self._lock:
            self._db.close()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # closing the descriptor releases the flock
                self._lock_fd = -1


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; on any exception, or a ``COMMIT`` that fails (disk
    full, I/O error), ``ROLLBACK``, so the connection is never left inside a transaction."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error:
                self._rollback()
                raise
        else:
            self._rollback()

    def _rollback(self) -> None:
        if self._db.in_transaction:
            # SQLite rolls back by itself after the errors that leave it unable to.
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")


def _lock_directory(state_dir: Path) -> int:
    """Create the directory if needed and take ``strata.lock`` exclusively; the descriptor.

    The lock file holds the owner's pid, for the message a second server prints.
    """
    path = state_dir / LOCK_NAME
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise JournalError(f"cannot use the state directory {state_dir}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StateDirLocked(
            f"the state directory {state_dir} is in use by another server (pid {owner}); "
            "one writer per state directory"
        ) from None
    except OSError as exc:
        os.close(fd)
        raise JournalError(f"cannot lock the state directory {state_dir}: {exc}") from exc
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the pid is only for the message; the lock is what counts
    return fd


def _ignore_file_size_signal() -> None:
    """Over ``RLIMIT_FSIZE`` a write raises SIGXFSZ, which by default kills the process; ignored,
    the write fails with EFBIG instead and the call is answered UNAVAILABLE. Signal handlers
    can only be set from the main thread; elsewhere the disposition is left as it is."""
    if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
