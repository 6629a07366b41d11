"""The commit path's own steps: ``ClusterState.begin``/``end`` (the transaction ``Committer.mutate``
opens without a ``Transaction``) and the task mix moving only when a call commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from journal_doubles import FlakyJournal

from strata_policy.engine import Engine
from strata_policy.errors import StorageUnavailable
from strata_policy.model import RunningWorkload
from strata_policy.state.cluster import ClusterState
from strata_policy.state.durable import SqliteJournal
from strata_policy.testing import node, scope, snapshot, workload

SNAPSHOT = snapshot([node("n1", cpu=64, gpus=8)], [scope("org"), scope("team", "org")])


def _state() -> ClusterState:
    return ClusterState.build("c", SNAPSHOT, 1)


def _admitted(wid: str) -> RunningWorkload:
    return RunningWorkload(workload(wid, "team", cpu=1), (), 5)


@pytest.mark.parametrize(
    ("rollback", "held"),
    [
        pytest.param(True, False, id="end(rollback): the add is undone, usage refunded"),
        pytest.param(False, True, id="end(): the add stays"),
    ],
)
def test_end_undoes_or_keeps_what_the_transaction_did(rollback: bool, held: bool) -> None:
    """``end`` undoes every change since ``begin`` when told to, else keeps them; either way
    the transaction's records start empty again."""
    state = _state()
    undo = state.begin()
    assert undo == []
    state.add(_admitted("w1"))
    assert undo
    assert state.touched == {"w1"}
    state.end(rollback=rollback)
    assert ("w1" in state.workloads) is held
    assert dict(state.tree.usage("team")) == ({"cpu": 1000} if held else {})
    assert (state.touched, state.created, state._added) == (set(), set(), [])
    state.begin()  # closed: a new transaction may open
    state.end(rollback=True)


def test_begin_is_not_reentrant() -> None:
    """A second ``begin`` (or ``transaction()``) while one is open raises and changes nothing."""
    state = _state()
    state.begin()
    with pytest.raises(RuntimeError, match="already open"):
        state.begin()
    with pytest.raises(RuntimeError, match="already open"), state.transaction():
        pass
    state.end(rollback=False)


@pytest.mark.parametrize(
    ("dry_run", "refuse", "counted"),
    [
        pytest.param(False, False, 2, id="committed: its replicas counted once"),
        pytest.param(True, False, 0, id="dry run: nothing counted"),
        pytest.param(False, True, 0, id="journal refuses: nothing counted, nothing held"),
    ],
)
def test_one_workload_admit_moves_the_task_mix_only_when_committed(
    tmp_path: Path, dry_run: bool, refuse: bool, counted: int
) -> None:
    """The task mix step (``TaskMix.observe`` for one upsert) runs after a commit only."""
    journal = FlakyJournal(SqliteJournal(tmp_path / "j.db"))
    engine = Engine(journal=journal)
    engine.push_snapshot("c", SNAPSHOT)
    state = engine.store.slot("c").require("c")
    before = state.task_mix.total
    journal.fail = refuse
    w = workload("w1", "team", cpu=1, replicas=2)
    if refuse:
        with pytest.raises(StorageUnavailable):
            engine.admit("c", [w], dry_run=dry_run)
    else:
        engine.admit("c", [w], dry_run=dry_run)
    assert state.task_mix.total - before == counted
    assert ("w1" in state.workloads) is bool(counted)
    assert state.generation == 1 + bool(counted)
