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
push validates its ids on their bytes (``kernels.byte_strings.distinct``: a hash table of
each id's first index and hash, over the request's bytes). ``IdIndex`` keeps that table, so
that a state answers "is this id held, at which row" with a hash of the id's
UTF-8 bytes and a probe (``kernels.byte_strings.probe``) instead of a dict of a million ids
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
    Mapping,
    MutableMapping,
    Sequence,
    ValuesView,
)
from typing import Any, TypeVar, cast

import numpy as np

from strata_policy.kernels import byte_strings
from strata_policy.model import RunningWorkload

V = TypeVar("V")

_MISSING = object()


class IdIndex:
    """The distinct strings ``buf[lo[i]:hi[i]]`` (a pushed snapshot's ids, row ``i`` each)
    and the ``distinct`` table made of them with ``byte_strings.SEED``, for one-id lookups."""

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
        found = byte_strings.probe(
            self._buf, self._lo, self._hi, self._table, byte_strings.SEED, data
        )
        return int(found)  # an int (numpy's without the JIT): rows are told by ``type is int``

    def rows(self, keys: Sequence[object]) -> list[int]:
        """``row`` of each of ``keys``, in one kernel call over their joined UTF-8 bytes (a
        batch's ids: a kernel call per id would cost a Place of 1,000 several ms). ASCII ids
        (a byte a character) are joined and measured in C; others take ``row`` one by one."""
        try:
            joined = "".join(cast(Sequence[str], keys))  # TypeError: a key not a string
            data = joined.encode()  # UnicodeEncodeError: a lone surrogate, never an id's
        except (TypeError, UnicodeEncodeError):
            return [self.row(k) for k in keys]
        if len(data) != len(joined):
            return [self.row(k) for k in keys]
        lengths = np.fromiter(map(len, cast(Sequence[str], keys)), np.int64, len(keys))
        ends = np.cumsum(lengths)
        out = np.empty(len(keys), dtype=np.int64)
        byte_strings.probe_many(
            self._buf,
            self._lo,
            self._hi,
            self._table,
            byte_strings.SEED,
            np.frombuffer(data, dtype=np.uint8),
            ends - lengths,
            ends,
            out,
        )
        found: list[int] = out.tolist()
        return found


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

    def _pushed_rows(self, keys: Sequence[object]) -> list[int]:
        """``_pushed`` of each of ``keys``, the index probed once for all of them."""
        index = self._index
        if index is None:
            return [-1] * len(keys)
        rows = index.rows(keys)
        gone = self._gone
        if gone:
            return [-1 if key in gone else row for key, row in zip(keys, rows, strict=True)]
        return rows

    def __setitem__(self, key: str, value: V) -> None:
        items = self._items
        if self._index is not None and key not in items and self._pushed(key) < 0:
            self._len += 1
        items[key] = value

    def __delitem__(self, key: str) -> None:
        if self._index is None:
            del self._items[key]
            return
        self._delete(key, self._pushed(key))

    def _delete(self, key: str, row: int) -> None:
        """Remove ``key``, whose ``_pushed`` row is ``row`` (with an index)."""
        items = self._items
        if key in items:
            del items[key]
        elif row < 0:
            raise KeyError(key)
        if row >= 0:
            self._gone.add(key)
        self._len -= 1

    def delete_many(self, keys: Iterable[str]) -> None:
        """``del self[key]`` for each of ``keys`` in order, the index probed once for all."""
        if self._index is None:
            items = self._items
            for key in keys:
                del items[key]
            return
        keys = list(keys)
        gone = self._gone
        for key, row in zip(keys, self._pushed_rows(keys), strict=True):
            self._delete(key, -1 if key in gone else row)  # removed earlier in this batch

    def isdisjoint_keys(self, keys: Iterable[object]) -> bool:
        """No key of ``keys`` is held: ``keys().isdisjoint``, the index probed once for all."""
        keys = list(keys)
        if not self._items.keys().isdisjoint(keys):
            return False
        if self._index is None:
            return True
        return all(row < 0 for row in self._pushed_rows(keys))

    def keys(self) -> KeysView[str]:
        """The dict's own keys view when plain (C-level ``isdisjoint``, set operations); over
        pushed ids, one whose ``isdisjoint`` probes the index once for all its keys (each
        other question asked with ``in``: no dict of every id made)."""
        if self._index is None:
            return self._items.keys()
        return _PushedKeys(self)

    def __contains__(self, key: object) -> bool:
        return key in self._items or self._pushed(key) >= 0

    def __len__(self) -> int:
        return len(self._items) if self._index is None else self._len

    def __iter__(self) -> Iterator[str]:
        return iter(self.plain())

    def update_many(self, pairs: Iterable[tuple[str, V]]) -> None:
        """``update`` with ``(key, value)`` pairs: the dict's own when plain (the mixin's is a
        Python loop); over pushed ids, the index probed once for all the new keys."""
        items = self._items
        if self._index is None:
            items.update(pairs)
            return
        pairs = list(pairs)
        fresh = [key for key, _ in pairs if key not in items]
        pushed = dict(zip(fresh, self._pushed_rows(fresh), strict=True))
        for key, value in pairs:
            if key not in items and pushed[key] < 0:
                self._len += 1
            items[key] = value

    def update(self, *args: Any, **kwargs: V) -> None:
        """The dict's ``update``; an iterable of pairs alone goes through ``update_many``."""
        if len(args) == 1 and not kwargs and not isinstance(args[0], Mapping):
            self.update_many(args[0])
        else:
            MutableMapping.update(self, *args, **kwargs)

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


class _PushedKeys(KeysView[str]):
    """The keys of a ``PushedIds`` with an index: ``isdisjoint`` in one probe of the index."""

    def __init__(self, mapping: PushedIds[Any]) -> None:
        super().__init__(mapping)
        self._ids = mapping

    def isdisjoint(self, other: Iterable[Any]) -> bool:
        return self._ids.isdisjoint_keys(other)


def delete_many(mapping: MutableMapping[str, V], keys: Iterable[str]) -> None:
    """``del mapping[key]`` for each of ``keys``: ``PushedIds.delete_many``, else one by one."""
    if isinstance(mapping, PushedIds):
        mapping.delete_many(keys)
        return
    for key in keys:
        del mapping[key]


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
