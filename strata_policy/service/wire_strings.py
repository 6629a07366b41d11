"""Strings of a request's bytes, read in bulk for ``service.snapshot_decoder``: decoded all at
once (``strings``), numbered by their distinct bytes (``distinct``, ``distinct_rows``), checked
for repeats (``all_distinct``) and looked up by name (``index``), over the hash tables of
``kernels.byte_strings``; and maps of entries made once per distinct set (``maps``). Split
from the decoder so that each stays one concern: the decoder walks records into columns, this
turns byte bounds into strings, codes and maps.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

import numpy as np

from strata_policy.kernels import byte_strings

_SEPARATOR = 0


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number among the distinct rows of ``rows`` (int64, C order), in the order
    each first comes, and the first index of each: ``kernels.byte_strings.distinct`` over the
    rows' bytes (a sort of whole rows, ``np.unique(axis=0)``, costs ten times as much)."""
    n, width = rows.shape
    raw = np.ascontiguousarray(rows).reshape(-1).view(np.uint8)
    raw.flags.writeable = False  # the type the kernel is warmed for (bytes read by frombuffer)
    lo = np.arange(n, dtype=np.int64) * (width * 8)
    codes, firsts = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    scratch = table(1 << (2 * max(n, 1)).bit_length())  # never half full
    count = byte_strings.distinct(
        raw, lo, lo + width * 8, codes, scratch, byte_strings.SEED, firsts
    )
    return codes, firsts[:count]


def strings(raw: np.ndarray, buf: bytes, lo: np.ndarray, hi: np.ndarray) -> list[str]:
    """``buf[lo[i]:hi[i]]`` decoded, for each ``i``: joined by the kernel and split once, or
    one by one when a string holds the separator."""
    if not lo.shape[0]:
        return []
    lo, hi = np.ascontiguousarray(lo), np.ascontiguousarray(hi)
    out = np.empty(int((hi - lo).sum()) + lo.shape[0], dtype=np.uint8)
    used = byte_strings.join(raw, lo, hi, out, _SEPARATOR)
    if used >= 0:
        return out[:used].tobytes().decode().split(chr(_SEPARATOR))
    return [buf[a:b].decode() for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]


def table(size: int) -> np.ndarray:
    """An empty table of ``size`` slots for ``kernels.byte_strings.distinct``."""
    return np.full((size, 2), -1, dtype=np.int64)


def all_distinct(raw: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether the strings ``raw[lo[i]:hi[i]]`` are all different (``distinct_table``)."""
    return distinct_table(raw, lo, hi) is not None


def distinct_table(raw: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray | None:
    """The ``distinct`` table of the strings ``raw[lo[i]:hi[i]]`` (a hash of each, equal bytes
    compared where hashes meet, in a table it never fills: no dict of a million decoded ids)
    when they are all different, else ``None``: kept, it finds each string's index
    (``state.running_table.IdIndex``)."""
    n = lo.shape[0]
    scratch = table(1 << (2 * max(n, 1)).bit_length())
    codes, firsts = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    if byte_strings.distinct(raw, lo, hi, codes, scratch, byte_strings.SEED, firsts) != n:
        return None
    return scratch


def distinct(
    raw: np.ndarray, buf: bytes, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Each string's number among the distinct ones (``kernels.byte_strings.distinct``) and
    the distinct strings in that order, decoded: a few hundred strings, not a million."""
    n = lo.shape[0]
    codes, firsts = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    if not n:
        return codes, []
    if not bool(np.any(hi != lo)):  # every string empty (a workload naming no GPU model)
        codes[:] = 0
        return codes, [""]
    lo, hi = np.ascontiguousarray(lo), np.ascontiguousarray(hi)
    whole = 1 << (2 * n).bit_length()  # never half full: the kernel always answers with it
    for size in (min(_SMALL_TABLE, whole), whole):
        scratch = table(size)
        count = byte_strings.distinct(raw, lo, hi, codes, scratch, byte_strings.SEED, firsts)
        if count >= 0:
            break
    firsts = firsts[:count]
    return codes, [
        buf[a:b].decode() for a, b in zip(lo[firsts].tolist(), hi[firsts].tolist(), strict=True)
    ]


_SMALL_TABLE = 1 << 12  # ``distinct`` tries this table first: a column of a few names


def index(names: list[str], at: dict[str, int]) -> np.ndarray:
    """Each name's index (-1: not in ``at``)."""
    return np.fromiter(map(at.get, names, repeat(-1)), np.int64, len(names))


_MAX_DENSE_KEYS = 64  # above, maps are built entry by entry instead of by distinct rows


def maps(
    row: np.ndarray,
    n: int,
    key: np.ndarray,
    names: list[str],
    value: np.ndarray,
    values: list[Any],
    *,
    sort: bool,
) -> list[dict[str, Any]]:
    """Per node, the map of its entries (entry ``i`` in node ``row[i]``, named ``names[key[i]]``,
    worth ``values[value[i]]``; no key twice in a node), the nodes with the same entries
    sharing one dict; keys in name order with ``sort``, else in first-coming order."""
    if not names:
        return [{}] * n  # one empty dict, shared
    order = sorted(range(len(names)), key=names.__getitem__) if sort else range(len(names))
    if len(names) <= _MAX_DENSE_KEYS:
        dense = np.full((n, len(names)), -1, dtype=np.int64)
        dense[row, key] = value
        which, firsts = distinct_rows(dense)
        made = [
            {names[k]: values[codes[k]] for k in order if codes[k] >= 0}
            for codes in dense[firsts].tolist()
        ]
        return [made[i] for i in which.tolist()]
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(names))
    by = np.lexsort((rank[key], row))  # per node, in key order
    pairs = [
        (names[k], values[v]) for k, v in zip(key[by].tolist(), value[by].tolist(), strict=True)
    ]
    starts = np.searchsorted(row[by], np.arange(n + 1)).tolist()
    shared: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    out = []
    for i in range(n):
        items = tuple(pairs[starts[i] : starts[i + 1]])
        found = shared.get(items)
        if found is None:
            found = shared[items] = dict(items)
        out.append(found)
    return out
