"""A journal that refuses writes on demand, and how to compare an engine with its journal.

Shared by the journal-first and recovery tests: ``FlakyJournal`` wraps a real ``SqliteJournal``
and raises, instead of writing, while ``fail`` is set (as a disk that is full or read-only
would make it); ``memory`` and ``replayed`` give what an engine serves and what a restart from
its journal would serve, to compare.
"""

from __future__ import annotations

from pathlib import Path

from strata_policy.engine import Engine
from strata_policy.errors import StorageUnavailable
from strata_policy.model import Snapshot
from strata_policy.state.changes import Change
from strata_policy.state.durable import SqliteJournal

State = dict[str, tuple[int, Snapshot]]


class FlakyJournal:
    """A ``SqliteJournal`` whose appends (``fail``) or checkpoints (``fail_checkpoint``) raise
    ``error`` (``StorageUnavailable`` unless told otherwise) without writing anything."""

    def __init__(self, inner: SqliteJournal) -> None:
        self.inner = inner
        self.fail = False
        self.fail_checkpoint = False
        self.error: Exception | None = None
        self.refused = 0

    def _refuse(self, cluster_id: str) -> None:
        self.refused += 1
        raise self.error or StorageUnavailable(cluster_id, "injected: the disk refuses writes")

    def append(self, change: Change) -> None:
        """Refuse while ``fail``, else append for real."""
        if self.fail:
            self._refuse(change.cluster_id)
        self.inner.append(change)

    def wants_checkpoint(self, cluster_id: str, generation: int) -> bool:
        """The real journal's answer."""
        return self.inner.wants_checkpoint(cluster_id, generation)

    def checkpoint(self, cluster_id: str, generation: int, snapshot: Snapshot) -> None:
        """Refuse while ``fail`` or ``fail_checkpoint``, else checkpoint for real."""
        if self.fail or self.fail_checkpoint:
            self._refuse(cluster_id)
        self.inner.checkpoint(cluster_id, generation, snapshot)


def memory(engine: Engine) -> State:
    """Every cluster the engine serves: its generation and whole snapshot."""
    return {cid: engine.snapshot(cid) for cid in engine.cluster_ids()}


def replayed(state_dir: Path, every: int = 1_000) -> State:
    """What a restart from the journal in ``state_dir`` would serve (the journal must be closed:
    one writer per state directory)."""
    journal = SqliteJournal(state_dir, every=every)
    try:
        engine = Engine()
        for change in journal.restore():
            engine.restore(change)
        return memory(engine)
    finally:
        journal.close()
