"""A pushed state's id maps (``state.running_table.PushedIds``) against the dict they stand
for: any sequence of set, del, get, in, iter, len, update and pop (and their batch forms:
update with pairs, delete_many, keys().isdisjoint) on a map over a pushed
index answers exactly as a dict of the same ids does, iteration order included, whatever the
ids (empty, multi-byte, longer than any bound, a lone surrogate, every hash equal), and so does
the held-workloads table (``RunningTable``) over the same index against the plain table."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.kernels import byte_strings
from strata_policy.model import RunningWorkload, Workload
from strata_policy.service import wire_strings
from strata_policy.state.running_table import (
    IdIndex,
    PushedIds,
    RowNumbers,
    RunningTable,
    delete_many,
    plain,
)

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

NAMES = ["", "a", "b", "w1", "w2", "w\u00e9", "w\u00e8", "x" * 253, "x" * 254, "y" * 1000]
ids = st.one_of(st.sampled_from(NAMES), st.text(max_size=4))
keys = st.one_of(ids, st.just("\ud800"))  # a lone surrogate: no UTF-8 at all

OPS = ["set", "del", "get", "in", "iter", "len", "update", "pop", "getitem"]
OPS += ["pairs", "del_many", "disjoint"]  # the batch forms (one probe of the index for all)
steps = st.lists(st.tuples(st.sampled_from(OPS), keys, st.integers(-3, 3)), max_size=40)


def index_of(pushed: list[str]) -> IdIndex:
    """The index a push keeps of ``pushed`` (all distinct), over their bytes back to back."""
    data = [x.encode() for x in pushed]
    sizes = np.array([len(x) for x in data], dtype=np.int64)
    hi = np.cumsum(sizes, dtype=np.int64)
    buf = np.frombuffer(b"".join(data) or b"\0", dtype=np.uint8)
    table = wire_strings.distinct_table(buf, hi - sizes, hi)
    assert table is not None
    return IdIndex(buf, hi - sizes, hi, table)


def _step(m: Any, op: str, key: str, value: int) -> object:
    """One operation on ``m``: its answer, or the exception's type."""
    try:
        if op == "set":
            m[key] = value
        elif op == "del":
            del m[key]
        elif op == "get":
            return m.get(key, "absent")
        elif op == "getitem":
            return m[key]
        elif op == "in":
            return key in m
        elif op == "iter":
            return list(m)
        elif op == "len":
            return len(m)
        elif op == "update":
            m.update({key: value, f"{key}+": value})
        elif op == "pairs":  # an iterable of pairs, a key repeated: ``update_many``
            m.update([(key, value), (f"{key}+", value), (key, value + 1)])
        elif op == "del_many":
            delete_many(m, [f"{key}+", key])
        elif op == "disjoint":
            return m.keys().isdisjoint([f"{key}+", key, 7])
        else:
            return m.pop(key, "absent")
    except KeyError:
        return KeyError
    return None


def _run(pushed: list[str], ops: list[tuple[str, str, int]]) -> None:
    """The same ``ops`` on a map over ``pushed``'s index and on the dict: the same answers
    after each, then the same entries in the same order."""
    mapped = RowNumbers(index=index_of(pushed), ids=lambda: pushed)
    want = {x: i for i, x in enumerate(pushed)}
    for op, key, value in ops:
        assert _step(mapped, op, key, value) == _step(want, op, key, value), (op, key)
        assert len(mapped) == len(want)
    assert list(plain(mapped).items()) == list(want.items())


@settings(max_examples=150, deadline=None)
@given(pushed=st.lists(ids, max_size=12, unique=True), ops=steps)
def test_a_map_over_pushed_ids_is_the_dict(pushed: list[str], ops: list[Any]) -> None:
    """Any sequence of operations answers as the dict of the pushed ids does."""
    _run(pushed, ops)


CASES = [
    pytest.param(["a", "b"], [("del", "a", 0), ("set", "a", 5), ("iter", "", 0)], id="re-added"),
    pytest.param(["a", "b"], [("set", "a", 5), ("iter", "", 0)], id="set keeps its place"),
    pytest.param(["", "a"], [("in", "", 0), ("del", "", 0), ("in", "", 0)], id="empty id"),
    pytest.param(["w\u00e9"], [("getitem", "w\u00e8", 0), ("pop", "w\u00e9", 0)], id="one byte"),
    pytest.param(["y" * 1000], [("get", "y" * 1000, 0), ("get", "y" * 999, 0)], id="long"),
    pytest.param(
        ["a"], [("in", "\ud800", 0), ("set", "\ud800", 1), ("len", "", 0)], id="surrogate"
    ),
    pytest.param(
        ["a", "b", "c"],
        [("del", "b", 0), ("set", "n", 1), ("del", "n", 0), ("set", "b", 2), ("set", "n", 3)],
        id="new and re-added keep the order they came in",
    ),
]


@pytest.mark.parametrize(("pushed", "ops"), CASES)
def test_named_sequences(pushed: list[str], ops: list[tuple[str, str, int]]) -> None:
    """Named sequences (a removed id set again goes to the end, as in a dict)."""
    _run(pushed, [*ops, ("iter", "", 0)])


@pytest.mark.skipif(not numba.config.DISABLE_JIT, reason="patches a kernel's Python body")
@settings(max_examples=60, deadline=None)
@given(pushed=st.lists(ids, max_size=8, unique=True), ops=steps)
def test_equal_hashes_are_told_apart_by_their_bytes(pushed: list[str], ops: list[Any]) -> None:
    """With every id's hash the same (the kernels' Python bodies, their hash patched), the
    bytes decide: still the dict's answers."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(byte_strings, "_hash", lambda buf, lo, hi, seed: 12345)
        _run(pushed, ops)


def _made(row: int) -> RunningWorkload:
    return RunningWorkload(Workload(f"row{row}", f"s{row % 2}", {"cpu": 1}), (), row)


@settings(max_examples=80, deadline=None)
@given(pushed=st.lists(ids, max_size=10, unique=True), ops=steps)
def test_a_table_over_pushed_ids_is_the_plain_table(pushed: list[str], ops: list[Any]) -> None:
    """The held-workloads table over an index answers as the plain table of the same rows:
    lookups, changes (a workload per value), scopes without making rows, every value."""

    def scope_of(row: int) -> str:
        return f"s{row % 2}"

    rows: dict[str, RunningWorkload | int] = {x: i for i, x in enumerate(pushed)}
    tables = [
        RunningTable(None, _made, scope_of, index=index_of(pushed), ids=lambda: pushed),
        RunningTable(rows, _made, scope_of),
    ]
    for op, key, value in ops:
        answers = []
        for table in tables:
            if op in ("set", "update"):  # a table holds workloads
                answers.append(_step(table, "set", key, _made(value + 10)))  # type: ignore[arg-type]
            else:
                answers.append(_step(table, op, key, value))
            if key in table:
                answers.append(table.scope_id(key))
            answers.append(table.held_among([key, "absent"]))
            answers.append(table.keys().isdisjoint([key]))
        assert answers[: len(answers) // 2] == answers[len(answers) // 2 :], (op, key)
    assert list(tables[0].scope_ids()) == list(tables[1].scope_ids())
    assert list(tables[0].items()) == list(tables[1].items())


def test_a_pushed_table_unchanged_lists_its_scopes_without_its_ids() -> None:
    """An unchanged pushed table's scopes come from its rows: its ids are never decoded."""

    def never() -> list[str]:
        raise AssertionError("ids decoded")

    table = RunningTable(None, _made, lambda row: f"s{row}", index=index_of(["a", "b"]), ids=never)
    assert list(table.scope_ids()) == ["s0", "s1"]
    assert ("b" in table, table.scope_id("a"), len(table)) == (True, "s0", 2)


def test_a_plain_map_is_its_dict() -> None:
    """Without an index the map is its dict, and ``plain`` answers that dict."""
    items = {"a": 1}
    mapped: PushedIds[int] = PushedIds(items)
    mapped["b"] = 2
    assert plain(mapped) is items
    assert items == {"a": 1, "b": 2}
