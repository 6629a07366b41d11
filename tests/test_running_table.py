"""``state.running_table.RunningTable`` reads as the ``dict`` it stands for, whatever of its rows
are still row numbers, and makes each row at most once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from strata_policy.model import RunningWorkload
from strata_policy.state.running_table import RunningTable
from strata_policy.testing import workload

ROWS = 6


def _made(row: int) -> RunningWorkload:
    return RunningWorkload(workload(f"w{row}", "a", cpu=row + 1), (), row)


def _table(lazy: list[bool]) -> tuple[RunningTable, dict[str, RunningWorkload], list[int]]:
    """A table of ``ROWS`` rows, row ``i`` still a number where ``lazy[i]``; the dict it stands
    for; and the rows ``make`` was asked for."""
    asked: list[int] = []

    def make(row: int) -> RunningWorkload:
        asked.append(row)
        return _made(row)

    rows: dict[str, RunningWorkload | int] = {
        f"w{i}": i if lazy[i] else _made(i) for i in range(ROWS)
    }
    return (
        RunningTable(rows, make, lambda row: "a"),
        {f"w{i}": _made(i) for i in range(ROWS)},
        asked,
    )


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["get", "set", "del", "in", "held_among", "values", "scope"]),
        st.integers(0, ROWS + 1),
    ),
    max_size=30,
)


@given(lazy=st.lists(st.booleans(), min_size=ROWS, max_size=ROWS), ops=_OPS)
def test_reads_as_the_dict_and_makes_a_row_once(
    lazy: list[bool], ops: list[tuple[str, int]]
) -> None:
    """Any sequence of reads and writes answers as the dict does; no row is made twice."""
    table, plain, asked = _table(lazy)
    for op, i in ops:
        key = f"w{i}"
        if op == "get":
            assert table.get(key) == plain.get(key)
        elif op == "set":
            table[key] = plain[key] = _made(i + 100)
        elif op == "del" and key in plain:
            del table[key]
            del plain[key]
        elif op == "in":
            assert (key in table) == (key in plain)
        elif op == "held_among":
            keys = [key, "w0", "missing", key]
            assert table.held_among(keys) == [plain[k] for k in keys if k in plain]
        elif op == "values":
            assert list(table.values()) == list(plain.values())
        elif op == "scope" and key in plain:
            assert table.scope_id(key) == plain[key].workload.scope_id
        assert list(table) == list(plain)
    assert len(asked) == len(set(asked))
    assert dict(table.items()) == plain


def test_a_lazy_row_is_made_only_when_read() -> None:
    """Keys, ``in``, ``len`` and scopes make no row; reading one makes that row only."""
    table, _, asked = _table([True] * ROWS)
    assert len(table) == ROWS
    assert "w3" in table
    assert list(table.scope_ids()) == ["a"] * ROWS
    assert asked == []
    assert table["w3"] == _made(3)
    assert table.held_among(["w3", "w4"]) == [_made(3), _made(4)]
    assert asked == [3, 4]
