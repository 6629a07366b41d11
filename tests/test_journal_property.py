"""Property: whatever journal writes fail, memory equals replaying only the calls that succeeded,
and a restart from the journal serves exactly what memory serves."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from journal_doubles import FlakyJournal, memory, replayed

from strata_policy.engine import Engine
from strata_policy.errors import StorageUnavailable, StrataError
from strata_policy.state.changes import Delta
from strata_policy.state.durable import SqliteJournal
from strata_policy.testing import node, scope, snapshot, workload

SNAP = snapshot(
    [node("n1", cpu=16, gpus=4), node("n2", cpu=16, gpus=4)],
    [scope("org"), scope("a", "org", guarantee={"gpu": 4000}), scope("b", "org")],
)
Op = Callable[[Engine], object]


def _op(kind: str, cid: str, k: int) -> Op:
    """One call on cluster ``cid``; ``k`` picks the workload (and its size)."""
    wid, team = f"w{k}", "ab"[k % 2]
    w = workload(wid, team, cpu=k + 1, gpu_milli=1000 * (k % 3))
    ops: dict[str, Op] = {
        "push": lambda e: e.push_snapshot(cid, SNAP),
        "update": lambda e: e.update_snapshot(cid, Delta(upsert_nodes=(node(f"x{k}", cpu=8),))),
        "delete": lambda e: e.delete_cluster(cid),
        "admit": lambda e: e.admit(cid, [w]),
        "admit2": lambda e: e.admit(cid, [w, workload(f"v{k}", team, cpu=1)]),
        "place": lambda e: e.place(cid, [w]),
        "place_ids": lambda e: e.place(cid, workload_ids=[wid]),
        "release": lambda e: e.release(cid, [wid]),
        "reclaim": lambda e: e.reclaim(cid, workload(f"r{k}", "a", gpu_milli=4000)),
    }
    return ops[kind]


calls = st.lists(
    st.tuples(
        st.sampled_from(
            ["push", "update", "delete", "admit", "admit2", "place", "place_ids", "release",
             "reclaim"]
        ),
        st.sampled_from(["c", "d"]),
        st.integers(0, 5),
        st.sampled_from(["ok", "append fails", "checkpoint fails"]),
    ),
    max_size=20,
)  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(calls=calls, every=st.integers(1, 3))
def test_failed_writes_leave_what_the_successful_calls_built(
    calls: list[tuple[str, str, int, str]], every: int
) -> None:
    """Memory equals an engine (with no journal) given only the calls that did not fail with
    ``StorageUnavailable``, and a restart from the journal equals memory."""
    with tempfile.TemporaryDirectory() as tmp:
        journal = FlakyJournal(SqliteJournal(tmp, every=every))
        engine = Engine(clock=lambda: 1_000, journal=journal)
        shadow = Engine(clock=lambda: 1_000)
        for kind, cid, k, fault in calls:
            op = _op(kind, cid, k)
            journal.fail = fault == "append fails"
            journal.fail_checkpoint = fault == "checkpoint fails"
            try:
                op(engine)
            except StorageUnavailable:
                continue  # refused: the shadow never sees it
            except StrataError:
                pass
            with contextlib.suppress(StrataError):
                op(shadow)
            assert memory(engine) == memory(shadow)
        assert memory(engine) == memory(shadow)
        journal.inner.close()
        assert replayed(Path(tmp), every) == memory(engine)
