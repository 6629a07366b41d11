"""Strings held as bounds in a byte buffer (``buf[lo[i]:hi[i]]``): joined, numbered and found
through an open-addressing hash table, in kernels.

The strings are a pushed snapshot's (ids, scope ids, GPU models, node ids, read by the walks
of ``kernels.snapshot_nodes`` / ``kernels.snapshot_running``), so nothing here builds a Python
string per entry: ``join`` copies them out with a separator between two, ``distinct`` numbers
them in the order each first comes (and tells repeats), ``find`` finds each among keys (a
placement's node among the nodes), and ``probe`` / ``probe_many`` look ids up in a
``distinct`` table kept as the pushed ids' index (``state.running_table.IdIndex``).

A table is ``(size, 2)`` int64, filled with -1, its size a power of two: a slot holds the
first index of a string and its hash, so that bytes are compared only where hashes are equal.
The hash is seeded (``SEED``, random per process): the strings come from requests, and a
client choosing strings that share a slot would make a table quadratic.
"""

from __future__ import annotations

import secrets

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel

SEED = secrets.randbits(62)  # the hash basis of every table, drawn once per process


@inline_kernel
def same_bytes(buf: np.ndarray, a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> bool:
    """Whether ``buf[a_lo:a_hi]`` and ``buf[b_lo:b_hi]`` are the same bytes."""
    if a_hi - a_lo != b_hi - b_lo:
        return False
    for k in range(a_hi - a_lo):  # noqa: SIM110  # numba compiles loops, not genexps
        if buf[a_lo + k] != buf[b_lo + k]:
            return False
    return True


@kernel
def join(buf: np.ndarray, lo: np.ndarray, hi: np.ndarray, out: np.ndarray, sep: int) -> int:
    """Copy ``buf[lo[i]:hi[i]]`` for each ``i`` into ``out``, ``sep`` between two; the bytes
    used, or -1 when a string holds ``sep`` (the joined text would split wrongly). ``out``
    holds at least ``sum(hi - lo) + len(lo)`` bytes."""
    used = 0
    for i in range(lo.shape[0]):
        if i:
            out[used] = sep
            used += 1
        for k in range(lo[i], hi[i]):
            b = buf[k]
            if b == sep:
                return -1
            out[used] = b
            used += 1
    return used


@inline_kernel
def _hash(buf: np.ndarray | bytes, lo: int, hi: int, seed: int) -> int:
    """FNV-1a of ``buf[lo:hi]`` from the basis ``seed``, kept to 62 bits (non-negative in an
    int64), then mixed so that every bit of it moves the low bits a table slot takes."""
    h = seed
    for k in range(lo, hi):
        h = ((h ^ int(buf[k])) * 0x100000001B3) & 0x3FFFFFFFFFFFFFFF
    h ^= h >> 29
    h = (h * 0x1CE4E5B9) & 0x3FFFFFFFFFFFFFFF
    return h ^ (h >> 32)


@kernel
def distinct(
    buf: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    codes: np.ndarray,
    table: np.ndarray,
    seed: int,
    firsts: np.ndarray,
) -> int:
    """Number the distinct strings ``buf[lo[i]:hi[i]]`` in the order each first comes: ``codes[i]``
    is string ``i``'s number; answers how many there are, or -1 as soon as they fill half of
    ``table`` (the caller asks again with a bigger one). ``table`` is scratch, ``(size, 2)``
    filled with -1, its size a power of two (open addressing; a slot holds the first index of
    a distinct string and its hash, so that the bytes are compared only where the hashes are
    equal: a probe reads one slot, not the string of each it passes): one above
    ``2 * len(lo)`` never fills, a small one answers a column of a few distinct strings
    without a table the size of the column. The caller finds string ``c``'s
    first index in ``firsts[c]`` (as long as ``lo``; only the first ``count`` are written: the
    first ``i`` with ``codes[i] == c``). ``seed`` (``SEED``: random per
    process) keeps a client from choosing strings that share a slot: the strings come from
    requests, and a table of colliding ones would make this quadratic."""
    mask = table.shape[0] - 1
    count = 0
    for i in range(lo.shape[0]):
        h = _hash(buf, lo[i], hi[i], seed)
        slot = h & mask
        while True:
            j = table[slot, 0]
            if j < 0:
                if 2 * (count + 1) > table.shape[0]:
                    return -1
                table[slot, 0] = i
                table[slot, 1] = h
                codes[i] = count
                firsts[count] = i
                count += 1
                break
            if table[slot, 1] == h and same_bytes(buf, lo[i], hi[i], lo[j], hi[j]):
                codes[i] = codes[j]
                break
            slot = (slot + 1) & mask
    return count


@kernel
def find(
    buf: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    table: np.ndarray,
    seed: int,
    found: np.ndarray,
) -> int:
    """For each string ``buf[lo[i]:hi[i]]``, the last ``k`` whose ``buf[key_lo[k]:key_hi[k]]``
    is the same bytes, in ``found[i]`` (-1: none); answers how many found none. ``table`` is
    scratch as ``distinct``'s, ``(size, 2)`` filled with -1, its size a power of two above
    ``2 * len(key_lo)``: the keys (a few hundred thousand node ids) are hashed into it once,
    then each string (a million placements' node ids) probes it, comparing bytes only where
    hashes are equal. The last of equal keys, as a dict built in key order keeps it."""
    mask = table.shape[0] - 1
    for k in range(key_lo.shape[0]):
        h = _hash(buf, key_lo[k], key_hi[k], seed)
        slot = h & mask
        while True:
            j = table[slot, 0]
            if j < 0 or (
                table[slot, 1] == h and same_bytes(buf, key_lo[k], key_hi[k], key_lo[j], key_hi[j])
            ):
                table[slot, 0] = k
                table[slot, 1] = h
                break
            slot = (slot + 1) & mask
    missing = 0
    for i in range(lo.shape[0]):
        h = _hash(buf, lo[i], hi[i], seed)
        slot = h & mask
        found[i] = -1
        while True:
            j = table[slot, 0]
            if j < 0:
                missing += 1
                break
            if table[slot, 1] == h and same_bytes(buf, lo[i], hi[i], key_lo[j], key_hi[j]):
                found[i] = j
                break
            slot = (slot + 1) & mask
    return missing


@inline_kernel
def _lookup(
    buf: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    table: np.ndarray,
    seed: int,
    key: np.ndarray | bytes,
    a: int,
    b: int,
) -> int:
    """The index ``j`` a ``distinct`` table (filled from ``buf[lo[i]:hi[i]]`` with ``seed``)
    holds for the bytes ``key[a:b]``, or -1 when none of its strings is those bytes: one hash
    and a probe from its slot, the bytes compared only where the hashes are equal."""
    n = b - a
    h = _hash(key, a, b, seed)
    mask = table.shape[0] - 1
    slot = h & mask
    while True:
        j = table[slot, 0]
        if j < 0:
            return -1
        if table[slot, 1] == h and hi[j] - lo[j] == n:
            start = lo[j]
            same = True
            for k in range(n):
                if buf[start + k] != key[a + k]:
                    same = False
                    break
            if same:
                found: int = j
                return found
        slot = (slot + 1) & mask


@kernel
def probe(
    buf: np.ndarray, lo: np.ndarray, hi: np.ndarray, table: np.ndarray, seed: int, key: bytes
) -> int:
    """``_lookup`` of the bytes ``key``: what a one-id lookup of a pushed state costs
    (``state.running_table.IdIndex``) instead of a dict of every id. ``key`` is the id's
    ``bytes`` as they are (a view of them as an array would cost more than the probe)."""
    return _lookup(buf, lo, hi, table, seed, key, 0, len(key))


@kernel
def probe_many(
    buf: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    table: np.ndarray,
    seed: int,
    keys: np.ndarray,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    out: np.ndarray,
) -> None:
    """``_lookup`` of each ``keys[key_lo[i]:key_hi[i]]``, its row (or -1) in ``out[i]``: one
    kernel call for a batch's ids (a Place's, a batch Admit's), not one call per id."""
    for i in range(key_lo.shape[0]):
        out[i] = _lookup(buf, lo, hi, table, seed, keys, key_lo[i], key_hi[i])


def warmup() -> None:
    """Compile (or load from the cache) every kernel here on one one-byte string."""
    buf = np.frombuffer(b"w", dtype=np.uint8)
    lo, hi = np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64)
    one = np.empty(1, dtype=np.int64)
    join(buf, lo, hi, np.empty(2, dtype=np.uint8), 0)
    distinct(buf, lo, hi, one, np.full((2, 2), -1, np.int64), SEED, one.copy())
    find(buf, lo, hi, lo, hi, np.full((4, 2), -1, np.int64), SEED, one)
    probe(buf, lo, hi, np.full((2, 2), -1, np.int64), SEED, b"w")
    probe_many(buf, lo, hi, np.full((2, 2), -1, np.int64), SEED, buf, lo, hi, one)
