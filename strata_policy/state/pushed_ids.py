"""A pushed state's ids found by their bytes, not by a dict of every one of them.

A million-workload push validates its ids on their bytes (``kernels.snapshot_wire.distinct``:
a hash table of each id's first index and hash, over the request's bytes). ``IdIndex`` keeps
that table, so that a state answers "is this id held, at which row" with a hash of the id's
UTF-8 bytes and a probe (``kernels.snapshot_wire.probe``) instead of a dict of a million ids
that either the push (a third of its time) or the first call to look one up (an Admit, served
on the event loop: a stall of the whole server) would have to build.

``PushedIds`` is a ``dict[str, V]`` over such an index: row ``i``'s id maps to ``i`` until a
change, and a small dict (``_items``) holds what changed after the push, with the removed
pushed ids in ``_gone``. Its answers, iteration order included, are exactly the dict's that
the same operations leave (``tests/test_pushed_ids.py``): a pushed id keeps its place when set,
and goes to the end when set again after its removal. A reader of every entry (iteration,
``plain``) makes that dict once, then the mapping is a plain dict: it reads every entry anyway.
Without an index it is a plain dict from the start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import TypeVar, cast

import numpy as np

from strata_policy.kernels import snapshot_wire as wire

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
