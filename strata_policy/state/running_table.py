"""The held workloads of a cluster by id, each made only when something reads it.

``ClusterState.workloads`` maps id → ``RunningWorkload`` in admission order. A state built from
columns (``state.running_columns``) starts with every id mapped to its row number, and a row
becomes its ``RunningWorkload`` (``make``, then kept) the first time it is read: a pushed
million-workload snapshot does not make a million objects that nothing may ever read. Keys,
``in``, ``len`` and key order are the dict's own, so they cost what a dict's cost; reading the
values of all of them (``values()``, ``items()``, ``make_all``) makes every row once, in bulk
when the table was given a ``many`` (a pushed snapshot's ``service.running_rows.RowMaker``
makes a million rows several times faster together than one by one).

A pushed table holds no dict of its ids (``state.pushed_ids``): ``in``, ``[]``, ``len`` and
changes answer from the ids' hash table and a small dict of what changed since the push; a
reader of every entry (iteration, ``values``, ``items``, ``make_all``, the scopes of a changed
table) makes the dict once, the one the plain path holds.
"""

from __future__ import annotations

from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Sequence,
    ValuesView,
)
from typing import cast

from strata_policy.model import RunningWorkload
from strata_policy.state.pushed_ids import IdIndex, PushedIds


def every_row(workloads: Sequence[RunningWorkload]) -> Sequence[RunningWorkload]:
    """A snapshot's workloads for a reader of every one (a push's journal record): a pushed
    snapshot's columns whose maker makes rows in bulk (``service.running_rows``, reached as
    ``make.bulk``) made in one bulk call, any other sequence as it is."""
    bulk = getattr(getattr(workloads, "make", None), "bulk", None)
    if bulk is None or len(workloads) < 2:
        return workloads
    made: list[RunningWorkload] = bulk(workloads)(list(range(len(workloads))))
    return made


def _never(row: int) -> RunningWorkload:
    raise KeyError(row)  # a table built without rows holds none to make


class RunningTable(PushedIds[RunningWorkload]):
    """A ``dict[str, RunningWorkload]`` whose entries may still be row numbers; see above."""

    __slots__ = ("_make", "_many", "_scope_of")

    def __init__(
        self,
        rows: dict[str, RunningWorkload | int] | None = None,
        make: Callable[[int], RunningWorkload] = _never,
        scope_of: Callable[[int], str] | None = None,
        many: Callable[[list[int]], list[RunningWorkload]] | None = None,
        index: IdIndex | None = None,
        ids: Callable[[], list[str]] | None = None,
    ) -> None:
        """``make(row)`` makes one row; ``many(rows)``, when given, makes those rows in their
        order, each equal to ``make(row)``, for the readers of every row. ``index`` and
        ``ids``, when given, are the pushed ids (``state.pushed_ids``), ``rows`` then unused."""
        super().__init__(cast(dict[str, RunningWorkload], rows), index, ids)
        self._make = make
        self._scope_of = scope_of
        self._many = many

    def __getitem__(self, key: str) -> RunningWorkload:
        value = self._raw(key)
        if type(value) is int:
            made = self._items[key] = self._make(value)
            return made
        return cast(RunningWorkload, value)

    def keys(self) -> KeysView[str]:
        """The dict's own keys view when plain (C-level ``isdisjoint``, set operations); over
        pushed ids, the mixin's (each key asked with ``in``: no dict of every id made)."""
        if self._index is None:
            return self._items.keys()
        return KeysView(self)

    def values(self) -> ValuesView[RunningWorkload]:
        """Every workload (each row made once, then kept)."""
        self._make_all()
        return self._items.values()

    def items(self) -> ItemsView[str, RunningWorkload]:
        """Every (id, workload) (each row made once, then kept)."""
        self._make_all()
        return self._items.items()

    def put_many(self, pairs: Iterable[tuple[str, RunningWorkload]]) -> None:
        """``update`` at the dict's speed when plain (the mixin's is a Python loop)."""
        self.update_many(pairs)

    def held_among(self, keys: Iterable[str]) -> list[RunningWorkload]:
        """The held workloads of ``keys`` (absent ones skipped), in their order, at C speed
        for a batch of made rows (``[t[k] for k in keys if k in t]`` costs two Python calls a
        key); a row still a number is made as ``[]`` makes it."""
        items = self._items
        keys = list(keys)
        if self._index is not None:
            return [self[k] for k in keys if k in self]
        found = [v for v in map(items.get, keys) if v is not None]
        if int in set(map(type, found)):
            return [self[k] for k in keys if k in items]
        return found

    def scope_id(self, key: str) -> str:
        """A held workload's scope, without making it."""
        value = self._raw(key)
        if type(value) is int and self._scope_of is not None:
            return self._scope_of(value)
        return self[key].workload.scope_id

    def scope_ids(self) -> Iterator[str]:
        """Every held workload's scope, in key order, without making any (a pushed state
        unchanged since its push: its rows' scopes, without its ids)."""
        scope_of = self._scope_of
        index = self._index
        if index is not None and scope_of is not None and not self._items and not self._gone:
            yield from map(scope_of, range(index.count))
            return
        for key, value in cast(dict[str, RunningWorkload | int], self.plain()).items():
            if type(value) is int and scope_of is not None:
                yield scope_of(value)
            else:
                yield self[key].workload.scope_id

    def make_all(self) -> None:
        """Make every row still a number (once; a no-op when none is left): what a reader of
        every workload calls first (``values``, ``items`` and ``ClusterState.snapshot`` do)."""
        items = cast(dict[str, RunningWorkload | int], self.plain())
        pending = [k for k, v in items.items() if type(v) is int]
        if not pending:
            return
        if self._many is not None and len(pending) > 1:
            rows = cast(list[int], list(map(items.__getitem__, pending)))
            items.update(zip(pending, self._many(rows), strict=True))
            return
        make = self._make
        for key in pending:
            items[key] = make(cast(int, items[key]))

    _make_all = make_all


class RowNumbers(PushedIds[int]):
    """A state's admission numbers (id → number, a ``dict[str, int]``): over pushed ids, each
    row's number is its row (snapshot order), found by the id's bytes (``state.pushed_ids``)."""

    __slots__ = ()
