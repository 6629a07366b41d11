"""Validating wrappers for the block search (``kernels.blocks``): a per-state index, per-shape
queries, both checked once so that a placement pays one kernel call and no re-validation.

``BlockIndex`` holds the layout (which nodes form each block; built from the immutable node
data, shared by copies) and the per-block summaries of one node state (refreshed from the
nodes that changed). ``BlockQuery`` is one request shape on that layout (policy, request row,
weights, static mask and which blocks the mask leaves any node in). ``BlockIndex.place`` answers
one replica: the node, its score and its devices, bit-equal to a full scan with ``fit._score``.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from strata_policy.kernels.blocks import _blocks_place
from strata_policy.kernels.fit import DOT_PRODUCT, FIRST_FIT
from strata_policy.kernels.masks import _static_blocks, _static_mask
from strata_policy.kernels.summaries import _SUBSETS, _SUM_ROWS, _refresh_blocks

_NONE = np.zeros(0, dtype=np.int64)

BLOCK_SIZE = 32
SUPER_SIZE = 0  # blocks per superblock; 0: blocks_per_super(number of nodes)

_I64 = np.dtype(np.int64)
_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)


def _check(name: str, a: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    if a.dtype != dtype or a.shape != shape or not a.flags.c_contiguous:
        raise ValueError(f"{name}: {a.dtype}{a.shape}, expected C-contiguous {dtype}{shape}")


def blocks_per_super(n_nodes: int, block_size: int = BLOCK_SIZE) -> int:
    """Blocks per superblock for ``n_nodes`` nodes in blocks of ``block_size``.

    A search bounds every superblock, then the blocks of the superblocks it opens (one and a
    half to two in a steady state of committed placements): ``n_blocks / S + 2·S`` bound rows,
    least at ``S = sqrt(n_blocks / 2)``: 13 at 10,000 nodes (about 48 rows where 32 gave 70)
    and 40 at 100,000; a commit also re-summarises one superblock, S blocks. Kept in 4..64."""
    n_blocks = -(-n_nodes // block_size)
    return max(4, min(64, round(math.sqrt(n_blocks / 2))))


_STATIC_BLOCKS: list[Callable[..., object] | None] = [None]  # see _compiled


@dataclass(frozen=True, slots=True)
class BlockLayout:
    """Which nodes form each block and which blocks each superblock (``kernels.blocks``).

    Block ``b`` is ``perm[bstart[b]:bstart[b + 1]]`` (ascending node indices), superblock ``s``
    blocks ``sstart[s]:sstart[s + 1]``; ``block_of[n]``, ``super_of[b]``; per block and per
    superblock the capacity row and ``1/capacity`` row of its nodes (one class each).
    """

    perm: np.ndarray
    bstart: np.ndarray
    block_of: np.ndarray
    sstart: np.ndarray
    super_of: np.ndarray
    bcap: np.ndarray
    binv: np.ndarray
    scap: np.ndarray
    sinv: np.ndarray

    @staticmethod
    def build(
        groups: np.ndarray,
        capacity: np.ndarray,
        inv_cap: np.ndarray,
        block_size: int = BLOCK_SIZE,
        super_size: int = 0,
    ) -> BlockLayout:
        """Nodes with equal ``groups`` rows form a class (the rows must include the capacity
        row); a class's nodes, in index order, are cut into blocks of ``block_size`` and its
        blocks into superblocks of ``super_size`` (0: ``blocks_per_super(n, block_size)``)."""
        n = capacity.shape[0]
        if super_size == 0:
            super_size = blocks_per_super(n, block_size)
        if block_size < 1 or super_size < 1 or groups.shape[0] != n or groups.ndim != 2:
            raise ValueError("sizes must be positive and groups must have a row per node")
        keys = [groups[:, k] for k in range(groups.shape[1] - 1, -1, -1)]
        perm = np.lexsort(keys).astype(np.int64) if keys and n else np.arange(n, dtype=np.int64)
        ordered = groups[perm]
        new_class = np.ones(n, dtype=np.bool_)
        if n > 1:
            new_class[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
        same_class = ~new_class[1:]
        rows = capacity[perm]
        if (rows[1:][same_class] != rows[:-1][same_class]).any():
            raise ValueError("groups must separate nodes of different capacities")
        at = np.arange(n)
        class_first = np.maximum.accumulate(np.where(new_class, at, 0)) if n else at
        new_block = (at - class_first) % block_size == 0
        firsts = np.flatnonzero(new_block)
        bstart = np.append(firsts, n).astype(np.int64)
        block_of = np.empty(n, dtype=np.int64)
        block_of[perm] = np.cumsum(new_block) - 1
        nb = firsts.shape[0]
        b_class_first = np.flatnonzero(new_class[firsts])  # blocks that start a class
        class_of_block = np.cumsum(new_class[firsts]) - 1
        first_block_of_class = b_class_first[class_of_block] if nb else np.zeros(0, np.int64)
        new_super = (np.arange(nb) - first_block_of_class) % super_size == 0
        sstart = np.append(np.flatnonzero(new_super), nb).astype(np.int64)
        super_of = (np.cumsum(new_super) - 1).astype(np.int64)
        bcap = np.ascontiguousarray(capacity[perm[firsts]])
        binv = np.ascontiguousarray(inv_cap[perm[firsts]])
        scap = np.ascontiguousarray(bcap[sstart[:-1]])
        sinv = np.ascontiguousarray(binv[sstart[:-1]])
        return BlockLayout(perm, bstart, block_of, sstart, super_of, bcap, binv, scap, sinv)

    def static_mask(
        self,
        *,
        schedulable: np.ndarray,
        label_codes: np.ndarray,
        wanted: np.ndarray,
        model_allowed: np.ndarray,
        any_model: bool,
        model_code: np.ndarray,
        gpu_devices: np.ndarray,
        wants_gpu: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int, int]]:
        """A workload's static mask, its block and superblock levels, and how many nodes fail
        first on unschedulable, selector, model (``kernels.masks._static_mask``):
        ``label_codes[k]`` per node the code of selector key ``k``'s value, ``wanted[k]`` the
        selector's code; ``model_allowed`` a bool per model code (unread when ``any_model``)."""
        n = self.perm.shape[0]
        k = wanted.shape[0]
        _check("schedulable", schedulable, _BOOL, (n,))
        _check("label_codes", label_codes, _I64, (k, n))
        _check("wanted", wanted, _I64, (k,))
        _check("model_code", model_code, _I64, (n,))
        _check("gpu_devices", gpu_devices, _I64, (n,))
        if model_allowed.dtype != _BOOL or model_allowed.ndim != 1:
            raise ValueError("model_allowed: a bool per model code")
        mask = np.empty(n, dtype=np.bool_)
        blocks = np.empty(self.bstart.shape[0] - 1, dtype=np.bool_)
        supers = np.empty(self.sstart.shape[0] - 1, dtype=np.bool_)
        counts = np.empty(3, dtype=np.int64)
        _static_mask(schedulable, label_codes, wanted, model_allowed, model_code, gpu_devices,
                     any_model, wants_gpu, self.perm, self.bstart, self.sstart, mask, blocks,
                     supers, counts)  # fmt: skip
        return mask, blocks, supers, (int(counts[0]), int(counts[1]), int(counts[2]))

    def static_blocks(
        self,
        *,
        statics: np.ndarray,
        hits: np.ndarray,
        model_allowed: np.ndarray,
        any_model: bool,
        wants_gpu: bool,
    ) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int]]:
        """``static_mask``'s block and superblock levels and counts without a pass over the
        nodes (``kernels.masks._static_blocks``): ``statics`` per block its nodes'
        schedulability (0/1), model code and device count (this layout's blocks must be classes
        of nodes alike in those, as ``NodeMatrix.block_layout`` builds), ``hits`` per block how
        many of its nodes match the node selector."""
        nb = self.bstart.shape[0] - 1
        _check("statics", statics, _I64, (nb, 3))
        _check("hits", hits, _I64, (nb,))
        if model_allowed.ndim != 1:
            raise ValueError("model_allowed: a bool per model code")
        _check("model_allowed", model_allowed, _BOOL, model_allowed.shape)
        levels = np.empty(nb + self.sstart.shape[0] - 1, dtype=np.bool_)
        blocks, supers = levels[:nb], levels[nb:]
        counts = np.empty(3, dtype=np.int64)
        args = (statics, model_allowed, any_model, wants_gpu, self.bstart, self.sstart, hits,
                blocks, supers, counts)  # fmt: skip
        fn = _STATIC_BLOCKS[0]
        if fn is None:
            _static_blocks(*args)
            _STATIC_BLOCKS[0] = _compiled(_static_blocks, args)
        else:
            fn(*args)
        unschedulable, selector, model = counts.tolist()
        return blocks, supers, (unschedulable, selector, model)

    def mask_levels(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per block and per superblock, whether any of its nodes passes ``mask``."""
        if not self.perm.size:
            return np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.bool_)
        blocks = np.logical_or.reduceat(mask[self.perm], self.bstart[:-1])
        supers = np.logical_or.reduceat(blocks, self.sstart[:-1])
        return np.ascontiguousarray(blocks), np.ascontiguousarray(supers)


class BlockQuery:
    """One request shape on a layout: policy code (0-5), request row, weight row, static mask,
    per block and per superblock whether any of its nodes passes the mask, and how many GPU
    devices one replica takes. Immutable by contract (``BlockIndex.query`` validates it once);
    ``args`` are its arguments of the search kernel, in the kernel's order."""

    __slots__ = ("args", "devices", "layout")

    def __init__(
        self,
        layout: BlockLayout,
        policy: int,
        req: np.ndarray,
        weights: np.ndarray,
        mask: np.ndarray,
        mask_blocks: np.ndarray,
        mask_supers: np.ndarray,
        devices: int,
    ) -> None:
        self.layout = layout
        self.args = (policy, mask, mask_blocks, mask_supers, req, weights)
        self.devices = devices


_Summaries = tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
    np.ndarray, np.ndarray,
]  # fmt: skip


def _compiled(dispatcher: Any, args: tuple[object, ...]) -> Callable[..., tuple[int, float, int]]:
    """The machine code ``dispatcher`` runs for ``args``' types, callable without the
    dispatcher's per-call type resolution (about 0.2 µs per argument, some 6 µs for the block
    search's 33): every later call passes the same types, because ``BlockIndex`` and
    ``BlockQuery`` check dtypes, dimensions and contiguity once. The dispatcher itself when
    there is no such entry (``NUMBA_DISABLE_JIT=1``)."""
    overloads = getattr(dispatcher, "overloads", None)
    if not overloads:
        return cast(Callable[..., tuple[int, float, int]], dispatcher)
    signature = tuple(dispatcher.typeof_pyval(a) for a in args)
    found = overloads.get(signature)
    if found is None:
        return cast(Callable[..., tuple[int, float, int]], dispatcher)
    return cast(Callable[..., tuple[int, float, int]], found.entry_point)


class BlockIndex:
    """Block summaries of one node state (``kernels.blocks``), answering one replica at a time.

    The state arrays are held by reference: the owner mutates them in place and calls
    ``refresh`` with the nodes that changed before the next ``place``. Not safe against a
    ``refresh`` running beside a ``place``; the owner serialises them.
    """

    __slots__ = (
        "_n_bounds",
        "_place_args",
        "_place_fn",
        "_refresh_args",
        "_scratch",
        "_state",
        "layout",
        "summaries",
    )

    summaries: _Summaries
    """Per block ``hi, lo, offer, sums``, per superblock the same, per node its GPU offer
    (``kernels.blocks``; the batch kernel mutates a copy's)."""

    def __init__(
        self,
        *,
        layout: BlockLayout,
        free: np.ndarray,
        gpu_free: np.ndarray,
        capacity: np.ndarray,
        inv_cap: np.ndarray,
        inv_max_cap: np.ndarray,
    ) -> None:
        n, r = capacity.shape
        _check("free", free, _I64, (n, r))
        _check("capacity", capacity, _I64, (n, r))
        _check("gpu_free", gpu_free, _I64, (n, gpu_free.shape[1]))
        _check("inv_cap", inv_cap, _F64, (n, r))
        _check("inv_max_cap", inv_max_cap, _F64, (r,))
        nb = layout.bstart.shape[0] - 1
        ns = layout.sstart.shape[0] - 1
        _check("perm", layout.perm, _I64, (n,))
        _check("bstart", layout.bstart, _I64, (nb + 1,))
        _check("block_of", layout.block_of, _I64, (n,))
        _check("sstart", layout.sstart, _I64, (ns + 1,))
        _check("super_of", layout.super_of, _I64, (nb,))
        _check("bcap", layout.bcap, _I64, (nb, r))
        _check("binv", layout.binv, _F64, (nb, r))
        _check("scap", layout.scap, _I64, (ns, r))
        _check("sinv", layout.sinv, _F64, (ns, r))
        if r < 3:
            raise ValueError("the first three columns must be cpu, memory, gpu")
        self.layout = layout
        self._state = (free, gpu_free, capacity, inv_cap, inv_max_cap)
        self.summaries = (
            np.empty((nb, r), dtype=np.int64),
            np.empty((nb, r), dtype=np.int64),
            np.empty(nb, dtype=np.int64),
            np.zeros((nb, _SUM_ROWS, _SUBSETS), dtype=np.float64),  # subset 0 is never written
            np.empty((ns, r), dtype=np.int64),
            np.empty((ns, r), dtype=np.int64),
            np.empty(ns, dtype=np.int64),
            np.zeros((ns, _SUM_ROWS, _SUBSETS), dtype=np.float64),
            np.empty(n, dtype=np.int64),
        )
        self._bind()
        self.refresh(None)

    def _bind(self) -> None:
        lay = self.layout
        free, gpu_free, _, inv_cap, inv_max_cap = self._state
        self._refresh_args = (free, gpu_free, inv_cap, inv_max_cap, lay.perm, lay.bstart,
                              lay.block_of, lay.sstart, lay.super_of, *self.summaries)  # fmt: skip
        a = self.summaries
        self._place_fn: Callable[..., tuple[int, float, int]] | None = None
        self._n_bounds = lay.bstart.shape[0] + lay.sstart.shape[0] - 2
        self._scratch = threading.local()  # the kernel's scratch and device rows, per thread
        self._place_args = (*self._state, lay.perm, lay.bstart, lay.sstart, a[0], a[1], a[2],
                            a[3], lay.bcap, lay.binv, a[4], a[5], a[6], a[7], lay.scap, lay.sinv,
                            a[8], lay.block_of, lay.super_of)  # fmt: skip

    def with_state(self, free: np.ndarray, gpu_free: np.ndarray) -> BlockIndex:
        """The same summaries over a copy of the state (``free``/``gpu_free`` equal to ours)."""
        _check("free", free, _I64, self._state[0].shape)
        _check("gpu_free", gpu_free, _I64, self._state[1].shape)
        other = BlockIndex.__new__(BlockIndex)
        other.layout = self.layout
        other._state = (free, gpu_free, *self._state[2:])
        a = self.summaries
        other.summaries = (a[0].copy(), a[1].copy(), a[2].copy(), a[3].copy(), a[4].copy(),
                           a[5].copy(), a[6].copy(), a[7].copy(), a[8].copy())  # fmt: skip
        other._bind()
        return other

    @property
    def state(self) -> tuple[np.ndarray, ...]:
        """``free, gpu_free, capacity, inv_cap, inv_max_cap`` (held by reference)."""
        return self._state

    def refresh(self, rows: np.ndarray | None) -> None:
        """Recompute the blocks of nodes ``rows`` (int64 node indices, ``ValueError`` when out
        of range), or every block."""
        if rows is None:
            _refresh_blocks(*self._refresh_args, _NONE, -1)
            return
        if rows.dtype != _I64 or rows.ndim != 1:
            raise ValueError("rows: expected int64 node indices")
        _refresh_blocks(*self._refresh_args, rows, rows.shape[0])

    def query(
        self,
        *,
        policy: int,
        req: np.ndarray,
        weights: np.ndarray,
        mask: np.ndarray,
        levels: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> BlockQuery:
        """A validated request shape for ``place`` (policy: a resource policy, 0-5);
        ``levels`` is ``layout.mask_levels(mask)`` when the caller has it already."""
        n, r = self._state[0].shape
        _check("req", req, _I64, (r,))
        _check("weights", weights, _F64, (r,))
        _check("mask", mask, _BOOL, (n,))
        if not FIRST_FIT <= policy <= DOT_PRODUCT:
            raise ValueError(f"policy {policy}: expected a resource policy (0-5)")
        blocks, supers = self.layout.mask_levels(mask) if levels is None else levels
        _check("mask blocks", blocks, _BOOL, (self.layout.bstart.shape[0] - 1,))
        _check("mask superblocks", supers, _BOOL, (self.layout.sstart.shape[0] - 1,))
        g = int(req[2])
        return BlockQuery(self.layout, policy, req, weights, mask, blocks, supers,
                          0 if g <= 0 else 1 if g < 1000 else g // 1000)  # fmt: skip

    def place(
        self, q: BlockQuery, rows: np.ndarray | None = _NONE, first: int = 0, count: int = -1
    ) -> tuple[int, float, tuple[int, ...]]:
        """The best node for one replica of ``q`` (-1 when none fits), its score and devices;
        first the summaries of nodes ``rows[first:first + count]`` refreshed in the same kernel
        call (``count`` -1: to the end; ``rows`` None: every block)."""
        best, score, bits = self.search(q, rows, first, count)
        if best < 0:
            return -1, 0.0, ()
        if not q.devices:
            return best, score, ()
        if bits < 0:
            return best, score, tuple(self._scratch.arrays[0][: q.devices].tolist())
        return best, score, device_set(bits)

    def search(
        self, q: BlockQuery, rows: np.ndarray | None = _NONE, first: int = 0, count: int = -1
    ) -> tuple[int, float, int]:
        """``place`` with the devices as a bit set (bit ``d``: device ``d``; 0 when the request
        takes none, -1 when the node has more than 62 devices: ``place`` lists them), for a
        caller that keys its own shared values by node and bit set."""
        if q.layout is not self.layout:
            raise ValueError("the query was made for another layout")
        if rows is None:
            rows, first, count = _NONE, 0, -1
        else:
            if rows.dtype != _I64 or rows.ndim != 1:
                raise ValueError("rows: expected int64 node indices")
            if count < 0:
                count = rows.shape[0] - first
            if not 0 <= first <= first + count <= rows.shape[0]:
                raise ValueError("rows: first and count out of range")
        scratch = self._scratch
        try:
            dev, bounds = scratch.arrays
        except AttributeError:  # the first call on this thread
            dev = np.empty(self._state[1].shape[1], dtype=np.int64)
            bounds = np.empty(self._n_bounds, dtype=np.float64)
            scratch.arrays = (dev, bounds)
        args = (*self._place_args, *q.args, rows, first, count, dev, bounds)
        fn = self._place_fn
        if fn is None:
            found: tuple[int, float, int] = _blocks_place(*args)
            self._place_fn = _compiled(_blocks_place, args)
            return found
        return fn(*args)


@functools.lru_cache(maxsize=4096)
def device_set(bits: int) -> tuple[int, ...]:
    """The device indices of a bit set, ascending (shared tuples: few distinct sets occur)."""
    return tuple(d for d in range(bits.bit_length()) if bits >> d & 1)
