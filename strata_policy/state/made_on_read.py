"""A sequence whose values are made on first read of each index and kept: what a pushed
snapshot's nodes (``state.node_columns``) and running workloads (``state.running_columns``) are,
so that a push makes no object nobody reads."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class MadeOnRead(Sequence[T]):
    """``len`` values, value ``k`` made by ``_make(k)`` when first read; equal to (and with the
    repr of) the tuple of the same values, unhashable like a list."""

    __slots__ = ("_made",)

    def __init__(self, n: int) -> None:
        self._made: list[T | None] = [None] * n

    @abstractmethod
    def _make(self, k: int) -> T:
        """Value ``k`` (``0 <= k < len(self)``), made from the columns."""

    def __len__(self) -> int:
        return len(self._made)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...
    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(len(self))))
        made = self._made[i]
        if made is None:
            made = self._made[i] = self._make(range(len(self))[i])
        return made

    def __iter__(self) -> Iterator[T]:
        return map(self.__getitem__, range(len(self)))

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same values (a snapshot's tuple, say)."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # a sequence compared by value, like a list

    def __repr__(self) -> str:
        """The repr of the same values in a tuple (request digests read reprs)."""
        return repr(tuple(self))
