"""The SQLite journal: append, checkpoint and restore round trips; damaged writes."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.model import Snapshot
from strata_policy.state.changes import Change, ChangeKind, Delta, apply_delta
from strata_policy.state.durable import DB_NAME, JournalCorruptError, SqliteJournal
from strata_policy.testing import node, running, scope, snapshot, workload

BASE = snapshot([node("n1", gpus=8)], [scope("team-a")])


def push(cid: str, gen: int, snap: Snapshot = BASE) -> Change:
    """A PushSnapshot change."""
    return Change(cid, gen, ChangeKind.PUSH, snapshot=snap)


def admit(cid: str, gen: int, wid: str) -> Change:
    """A delta that admits one workload."""
    rw = running(workload(wid, "team-a", cpu=1))
    return Change(cid, gen, ChangeKind.DELTA, delta=Delta(upsert_workloads=(rw,)))


def release(cid: str, gen: int, wid: str) -> Change:
    """A delta that releases one workload."""
    return Change(cid, gen, ChangeKind.DELTA, delta=Delta(remove_workload_ids=(wid,)))


def delete(cid: str, gen: int) -> Change:
    """A DeleteCluster change."""
    return Change(cid, gen, ChangeKind.DELETE)


CASES = [
    pytest.param([push("a", 1)], [push("a", 1)], id="push only"),
    pytest.param(
        [push("a", 1), admit("a", 2, "w1"), release("a", 3, "w1")],
        [push("a", 1), admit("a", 2, "w1"), release("a", 3, "w1")],
        id="push then deltas in order",
    ),
    pytest.param(
        [push("a", 1), admit("a", 2, "w1"), push("a", 3)],
        [push("a", 3)],
        id="a second push replaces the history",
    ),
    pytest.param([push("a", 1), admit("a", 2, "w1"), delete("a", 2)], [], id="delete forgets"),
    pytest.param(
        [push("a", 4), admit("a", 5, "w1"), delete("a", 5), push("a", 1), admit("a", 2, "w2")],
        [push("a", 1), admit("a", 2, "w2")],
        id="delete then re-push starts over",
    ),
    pytest.param(
        [push("b", 1), push("a", 1), admit("b", 2, "x"), admit("a", 2, "y"), admit("b", 3, "z")],
        [push("a", 1), admit("a", 2, "y"), push("b", 1), admit("b", 2, "x"), admit("b", 3, "z")],
        id="clusters interleaved, restored per cluster",
    ),
    pytest.param([admit("a", 2, "w")], [], id="deltas without a base are not restored"),
]


@pytest.mark.parametrize(("changes", "expected"), CASES)
def test_restore_after_reopen(
    tmp_path: Path, changes: list[Change], expected: list[Change]
) -> None:
    """What was appended comes back after closing and reopening, compacted per cluster."""
    journal = SqliteJournal(tmp_path)
    for change in changes:
        journal.append(change)
    journal.close()
    again = SqliteJournal(tmp_path)
    assert list(again.restore()) == expected
    again.close()


def test_checkpoint_compacts_and_is_wanted_every_k(tmp_path: Path) -> None:
    """After ``every`` deltas a checkpoint is wanted; it replaces the deltas it covers."""
    journal = SqliteJournal(tmp_path, every=3)
    journal.append(push("a", 1))
    wanted = []
    for gen in range(2, 6):
        journal.append(admit("a", gen, f"w{gen}"))
        wanted.append(journal.wants_checkpoint("a", gen))
    assert wanted == [False, False, True, True]
    state = snapshot([node("n1", gpus=8)], [scope("team-a")], [running(workload("w", "team-a"))])
    journal.checkpoint("a", 5, state)
    assert not journal.wants_checkpoint("a", 5)
    journal.append(admit("a", 6, "w6"))
    journal.close()
    again = SqliteJournal(tmp_path, every=3)
    assert list(again.restore()) == [push("a", 5, state), admit("a", 6, "w6")]
    assert not again.wants_checkpoint("a", 6)
    again.append(admit("a", 7, "w7"))
    again.append(admit("a", 8, "w8"))
    assert again.wants_checkpoint("a", 8), "the count of deltas survives a restart"
    again.close()


def _damage(path: Path, where: str) -> None:
    """Overwrite one change row's body, as a write torn by a crash would leave it."""
    db = sqlite3.connect(path / DB_NAME)
    order = "DESC" if where == "last" else "ASC"
    (seq,) = db.execute(f"SELECT seq FROM changes ORDER BY seq {order} LIMIT 1").fetchone()
    db.execute("UPDATE changes SET body = substr(body, 1, 20) WHERE seq = ?", (seq,))
    db.commit()
    db.close()


def test_damaged_last_write_is_skipped(tmp_path: Path) -> None:
    """A torn final change is left out and reported; everything before it is restored."""
    journal = SqliteJournal(tmp_path)
    for change in (push("a", 1), admit("a", 2, "w1"), admit("a", 3, "w2")):
        journal.append(change)
    journal.close()
    _damage(tmp_path, "last")
    again = SqliteJournal(tmp_path)
    assert list(again.restore()) == [push("a", 1), admit("a", 2, "w1")]
    assert len(again.problems) == 1
    again.close()


def test_damaged_middle_write_refuses_to_guess(tmp_path: Path) -> None:
    """A damaged change with committed changes behind it stops the restore loudly."""
    journal = SqliteJournal(tmp_path)
    for change in (push("a", 1), admit("a", 2, "w1"), admit("a", 3, "w2")):
        journal.append(change)
    journal.close()
    _damage(tmp_path, "first")
    again = SqliteJournal(tmp_path)
    with pytest.raises(JournalCorruptError):
        list(again.restore())
    again.close()


@pytest.mark.parametrize("cut", [1, 100, 4096 + 24 + 7])
def test_torn_wal_tail_restores_a_prefix(tmp_path: Path, cut: int) -> None:
    """A WAL cut short mid-frame (a crash during the write) yields a prefix of the changes."""
    live = tmp_path / "live"
    journal = SqliteJournal(live)
    changes = [push("a", 1), *(admit("a", g, f"w{g}") for g in range(2, 12))]
    for change in changes:
        journal.append(change)
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(live / DB_NAME, copy / DB_NAME)
    wal = (live / f"{DB_NAME}-wal").read_bytes()
    (copy / f"{DB_NAME}-wal").write_bytes(wal[: max(0, len(wal) - cut)])
    journal.close()
    restored = list(SqliteJournal(copy).restore())
    assert 1 <= len(restored) < len(changes), "the torn last commit is dropped, no more"
    assert restored == changes[: len(restored)]


def test_push_requires_a_snapshot(tmp_path: Path) -> None:
    """A PUSH without a snapshot is a programming error and writes nothing."""
    journal = SqliteJournal(tmp_path)
    with pytest.raises(ValueError, match="snapshot"):
        journal.append(Change("a", 1, ChangeKind.PUSH))
    assert list(journal.restore()) == []
    journal.close()


# --- property: replaying the journal rebuilds what the changes built -------------------------

ops = st.lists(
    st.tuples(
        st.sampled_from(["push", "admit", "release", "delete", "checkpoint"]),
        st.sampled_from(["a", "b"]),
        st.integers(0, 4),
    ),
    max_size=25,
)


def _rebuild(changes: list[Change]) -> dict[str, tuple[int, Snapshot]]:
    """Apply changes the way the engine replays them."""
    out: dict[str, tuple[int, Snapshot]] = {}
    for change in changes:
        if change.kind is ChangeKind.PUSH:
            assert change.snapshot is not None
            out[change.cluster_id] = (change.generation, change.snapshot)
        elif change.kind is ChangeKind.DELETE:
            out.pop(change.cluster_id, None)
        else:
            assert change.delta is not None
            _, snap = out[change.cluster_id]
            out[change.cluster_id] = (change.generation, apply_delta(snap, change.delta)[0])
    return out


@settings(max_examples=40, deadline=None)
@given(ops, st.integers(1, 4))
def test_replay_rebuilds_every_cluster(plan: list[tuple[str, str, int]], every: int) -> None:
    """Whatever the mix of pushes, deltas, deletes and checkpoints, restore rebuilds the state."""
    live: dict[str, tuple[int, Snapshot]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        journal = SqliteJournal(tmp, every=every)
        for action, cid, k in plan:
            gen, snap = live.get(cid, (0, BASE))
            wid = f"w{k}"
            has = any(rw.workload.id == wid for rw in snap.workloads)
            change: Change | None = None
            if action == "push" or cid not in live:
                change = push(cid, gen + 1, snap)
            elif action == "admit" and not has:
                change = admit(cid, gen + 1, wid)
            elif action == "release" and has:
                change = release(cid, gen + 1, wid)
            elif action == "delete":
                change = delete(cid, gen)
            elif action == "checkpoint" or journal.wants_checkpoint(cid, gen):
                journal.checkpoint(cid, gen, snap)
            if change is not None:
                journal.append(change)
                live = _rebuild([*_flatten(live), change])
        journal.close()
        again = SqliteJournal(tmp, every=every)
        assert _rebuild(list(again.restore())) == live
        again.close()


def _flatten(state: dict[str, tuple[int, Snapshot]]) -> list[Change]:
    """The model state as one PUSH per cluster."""
    return [push(cid, gen, snap) for cid, (gen, snap) in state.items()]
