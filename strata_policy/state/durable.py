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
cluster is a torn final write: it is skipped and reported in ``problems``. A bad row with later
rows behind it cannot be skipped without losing commits, so ``restore`` raises
``JournalCorruptError`` and the server refuses to start rather than serve a state with a hole.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

from strata_policy.errors import InvalidArgument
from strata_policy.model import Snapshot
from strata_policy.state import codec
from strata_policy.state.changes import Change, ChangeKind

DB_NAME = "strata.db"
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


class JournalCorruptError(Exception):
    """The journal has a damaged change with committed changes after it; refuse to guess."""


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
        if every < 1:
            raise ValueError(f"checkpoint interval must be at least 1, got {every}")
        self.path = Path(state_dir) / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.every = every
        self.problems: list[str] = []
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._since: dict[str, int] = dict(
            self._db.execute("SELECT cluster_id, COUNT(*) FROM changes GROUP BY cluster_id")
        )

    # --- writing ---------------------------------------------------------------------------

    def append(self, change: Change) -> None:
        """Make one committed change durable; returns after the fsync.

        PUSH becomes the cluster's checkpoint (its older deltas dropped), DELTA is appended,
        DELETE forgets the cluster. Raises ``sqlite3.Error`` when the disk refuses; the engine
        must then fail the call (the change is not acknowledged).
        """
        cid = change.cluster_id
        with self._lock, self._transaction():
            if change.kind is ChangeKind.DELETE:
                self._forget(cid)
            elif change.kind is ChangeKind.PUSH:
                if change.snapshot is None:
                    raise ValueError("a PUSH change carries its snapshot")
                self._db.execute("DELETE FROM changes WHERE cluster_id = ?", (cid,))
                self._store_checkpoint(change)
            else:
                body, crc = _encode(change)
                self._db.execute(
                    "INSERT INTO changes (cluster_id, generation, body, crc) VALUES (?, ?, ?, ?)",
                    (cid, change.generation, body, crc),
                )
                self._since[cid] = self._since.get(cid, 0) + 1

    def wants_checkpoint(self, cluster_id: str, generation: int) -> bool:
        """Whether the cluster has ``every`` or more deltas since its last checkpoint."""
        del generation  # the count of deltas decides, not the generation's value
        return self._since.get(cluster_id, 0) >= self.every

    def checkpoint(self, cluster_id: str, generation: int, snapshot: Snapshot) -> None:
        """Store the cluster's whole state at ``generation`` and drop the deltas it covers."""
        change = Change(cluster_id, generation, ChangeKind.PUSH, snapshot=snapshot)
        with self._lock, self._transaction():
            self._store_checkpoint(change)

    def _store_checkpoint(self, change: Change) -> None:
        body, crc = _encode(change)
        cid = change.cluster_id
        self._db.execute(
            "INSERT OR REPLACE INTO checkpoints (cluster_id, generation, body, crc)"
            " VALUES (?, ?, ?, ?)",
            (cid, change.generation, body, crc),
        )
        self._db.execute(
            "DELETE FROM changes WHERE cluster_id = ? AND generation <= ?",
            (cid, change.generation),
        )
        (left,) = self._db.execute(
            "SELECT COUNT(*) FROM changes WHERE cluster_id = ?", (cid,)
        ).fetchone()
        self._since[cid] = int(left)

    def _forget(self, cluster_id: str) -> None:
        self._db.execute("DELETE FROM checkpoints WHERE cluster_id = ?", (cluster_id,))
        self._db.execute("DELETE FROM changes WHERE cluster_id = ?", (cluster_id,))
        self._since.pop(cluster_id, None)

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    # --- reading ---------------------------------------------------------------------------

    def restore(self) -> Iterator[Change]:
        """Every live cluster as a PUSH at its checkpoint, then its later deltas in order.

        Clusters come sorted by id. A damaged last delta is skipped (see ``problems``); a
        damaged checkpoint or a damaged delta followed by others raises ``JournalCorruptError``.
        """
        with self._lock:
            checkpoints = self._db.execute(
                "SELECT cluster_id, generation, body, crc FROM checkpoints ORDER BY cluster_id"
            ).fetchall()
            orphans = self._db.execute(
                "SELECT DISTINCT cluster_id FROM changes"
                " WHERE cluster_id NOT IN (SELECT cluster_id FROM checkpoints)"
            ).fetchall()
        for (cid,) in orphans:
            self.problems.append(f"cluster {cid!r}: changes without a checkpoint ignored")
        for cid, generation, body, crc in checkpoints:
            base = _decode(body, crc)
            if base is None or base.snapshot is None or base.generation != generation:
                raise JournalCorruptError(f"cluster {cid!r}: checkpoint at {generation} is damaged")
            yield base
            yield from self._deltas(cid, generation)

    def _deltas(self, cluster_id: str, after: int) -> Iterator[Change]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, generation, body, crc FROM changes"
                " WHERE cluster_id = ? AND generation > ? ORDER BY seq",
                (cluster_id, after),
            ).fetchall()
        last = after
        for i, (seq, generation, body, crc) in enumerate(rows):
            change = _decode(body, crc)
            if change is None or change.delta is None or change.generation != generation:
                if i == len(rows) - 1:
                    self.problems.append(
                        f"cluster {cluster_id!r}: damaged last change (seq {seq}) skipped"
                    )
                    return
                raise JournalCorruptError(
                    f"cluster {cluster_id!r}: change seq {seq} is damaged and "
                    f"{len(rows) - 1 - i} committed changes follow it"
                )
            if generation <= last:
                raise JournalCorruptError(
                    f"cluster {cluster_id!r}: generation {generation} after {last} (seq {seq})"
                )
            last = generation
            yield change

    def close(self) -> None:
        """Close the database (the WAL is checkpointed into the main file by SQLite)."""
        with self._lock:
            self._db.close()


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` on any exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("ROLLBACK" if exc_type is not None else "COMMIT")
