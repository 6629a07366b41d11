"""The held workloads of a cluster by id, each made only when something reads it.

``ClusterState.workloads`` maps id → ``RunningWorkload`` in admission order. A state built from
columns (``state.running_columns``) starts with every id mapped to its row number, and a row
becomes its ``RunningWorkload`` (``make``, then kept) the first time it is read: a pushed
million-workload snapshot does not make a million objects that nothing may ever read. Keys,
``in``, ``len`` and key order answer as the dict's (a probe of the pushed ids' index, below,
for an id of the push); reading the
values of all of them (``values()``, ``items()``, ``make_all``) makes every row once, in bulk
when the table was given a ``many`` (a pushed snapshot's ``service.running_rows.RowMaker``
makes a million rows several times faster together than one by one).

**Pushed ids**, found by their bytes, not by a dict of every one of them. A million-workload
push validates its ids on their bytes (``kernels.snapshot_wire.distinct``: a hash table of
each id's first index and hash, over the request's bytes). ``IdIndex`` keeps that table, so
that a state answers "is this id held, at which row" with a hash of the id's
UTF-8 bytes and a probe (``kernels.snapshot_wire.probe``) instead of a dict of a million ids
that either the push (a third of its time) or the first call to look one up (an Admit, served
on the event loop: a stall of the whole server) would have to build.

``PushedIds`` is a ``dict[str, V]`` over such an index: row ``i``'s id maps to ``i`` until a
change, and a small dict (``_items``) holds what changed after the push, with the removed
pushed ids in ``_gone``. Its answers, iteration order included, are exactly the dict's that
the same operations leave (``tests/test_pushed_ids.py``): a pushed id keeps its place when set,
and goes to the end when set again after its removal. A reader of every entry (iteration,
``plain``) makes that dict once, then the mapping is a plain dict: it reads every entry anyway.
Without an index it is a plain dict from the start. ``RunningTable`` and ``RowNumbers`` (the
admission numbers) are such maps; a table's reader of every entry is also ``values``,
``items``, ``make_all`` and the scopes of a changed table. The index lives here, with the two
maps that are its only users.
"""

from __future__ import annotations

from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    MutableMapping,
    Sequence,
    ValuesView,
)
from typing import TypeVar, cast

import numpy as np

from strata_policy.kernels import snapshot_wire as wire
from strata_policy.model import RunningWorkload

V = TypeVar("V")

_MISSING = object()


class IdIndex:
    """The distinct strings ``buf[lo[i]:hi[i]]`` (a pushed snapshot's ids, row ``i`` each)
    and the ``distinct`` table made of them with ``wire.SEED``, for one-id lookups."""

    __slots__ = ("_buf", "_hi", "_lo", "_table", "count")

    def __init__(self, buf: np.ndarray, lo: np.ndarray, hi: np.ndarray, table: np.ndarray) -> None:
        self._buf, self._table = buf, table
        self._lo, self._hi = np.ascontiguousarray(lo), np.ascontiguousarray(hi)
        self.count = int(lo.shape[0])

    def row(self, key: object) -> int:
        """The row whose id is ``key``, or -1 (not a string, or none of the ids): a hash of its
        UTF-8 bytes and a probe, a few µs (a kernel call), whatever the number of ids."""
        if not isinstance(key, str):
            return -1
        try:
            data = key.encode()
        except UnicodeEncodeError:  # a lone surrogate: never the UTF-8 of a pushed id
            return -1
        found = wire.probe(self._buf, self._lo, self._hi, self._table, wire.SEED, data)
        return int(found)  # an int (numpy's without the JIT): rows are told by ``type is int``


class PushedIds(MutableMapping[str, V]):
    """A ``dict[str, V]`` of ``items`` or, given ``index``, of row ``i``'s id (``ids()[i]``,
    decoded only by a reader of every entry) → ``i`` with later changes; see above."""

    __slots__ = ("_gone", "_ids", "_index", "_items", "_len")

    def __init__(
        self,
        items: dict[str, V] | None = None,
        index: IdIndex | None = None,
        ids: Callable[[], list[str]] | None = None,
    ) -> None:
        """``items``: a plain dict of them. ``index`` and ``ids`` (each row's id, in row order)
        instead: the pushed ids, each mapped to its row (``items`` is then unused)."""
        self._index = index if index is not None and ids is not None else None
        self._items: dict[str, V] = items if items is not None and self._index is None else {}
        self._ids = ids
        self._gone: set[str] = set()  # pushed ids removed (set again: also in ``_items``)
        self._len = self._index.count if self._index is not None else 0  # only with an index

    def _pushed(self, key: object) -> int:
        """The row of ``key`` when it is a pushed id still held as pushed, else -1."""
        index = self._index
        if index is None or key in self._gone:
            return -1
        return index.row(key)

    def _raw(self, key: str) -> V | int:
        """What ``key`` maps to: a value set, or a pushed id's row (``KeyError``: none)."""
        value = self._items.get(key, _MISSING)
        if value is _MISSING:
            row = self._pushed(key)
            if row < 0:
                raise KeyError(key)
            return row
        return cast(V, value)

    def __getitem__(self, key: str) -> V:
        return cast(V, self._raw(key))

    def __setitem__(self, key: str, value: V) -> None:
        items = self._items
        if self._index is not None and key not in items and self._pushed(key) < 0:
            self._len += 1
        items[key] = value

    def __delitem__(self, key: str) -> None:
        items = self._items
        if self._index is None:
            del items[key]
            return
        row = self._pushed(key)
        if key in items:
            del items[key]
        elif row < 0:
            raise KeyError(key)
        if row >= 0:
            self._gone.add(key)
        self._len -= 1

    def __contains__(self, key: object) -> bool:
        return key in self._items or self._pushed(key) >= 0

    def __len__(self) -> int:
        return len(self._items) if self._index is None else self._len

    def __iter__(self) -> Iterator[str]:
        return iter(self.plain())

    def update_many(self, pairs: object) -> None:
        """``update`` at the dict's speed when plain (the mixin's is a Python loop)."""
        if self._index is None:
            self._items.update(pairs)  # type: ignore[call-overload]
        else:
            MutableMapping.update(self, pairs)  # type: ignore[call-overload]

    def plain(self) -> dict[str, V]:
        """Every entry as the dict the same operations make, in its order: made once (from the
        decoded ids, the removed ones dropped and the changes laid over), then this mapping
        is that dict. What a reader of every entry (iteration) calls."""
        index, ids = self._index, self._ids
        if index is None or ids is None:
            return self._items
        out = cast(dict[str, V], dict(zip(ids(), range(index.count), strict=True)))
        for key in self._gone:
            del out[key]
        out.update(self._items)  # a pushed id in place; one set again, or new, at the end
        self._items, self._index, self._gone = out, None, set()
        return out


def plain(mapping: MutableMapping[str, V]) -> MutableMapping[str, V]:
    """``mapping``'s entries at a dict's lookup speed: ``PushedIds.plain()``, else itself."""
    return mapping.plain() if isinstance(mapping, PushedIds) else mapping


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
        ``ids``, when given, are the pushed ids (``PushedIds``, above), ``rows`` then unused."""
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
    row's number is its row (snapshot order), found by the id's bytes (``PushedIds``, above)."""

    __slots__ = ()
