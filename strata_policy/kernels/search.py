"""Validating wrappers for the block search (``kernels.blocks``): a per-state index, per-shape
queries, both checked once so that a placement pays one kernel call and no re-validation.

``BlockIndex`` holds the layout (``kernels.layout``: which nodes form each block; built from
the immutable node data, shared by copies) and the per-block summaries of one node state
(refreshed from the nodes that changed). ``BlockQuery`` is one request shape on that layout
(policy, request row, weights, static mask and which blocks the mask leaves any node in).
``BlockIndex.place`` answers one replica: the node, its score and its devices, bit-equal to a
full scan with ``fit._score``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import numpy as np

from strata_policy.kernels.arrays import BOOL, F64, I64, BlockSummaries, NodeArrays
from strata_policy.kernels.arrays import check_array as _check
from strata_policy.kernels.blocks import _blocks_place
from strata_policy.kernels.fit import DOT_PRODUCT, FIRST_FIT
from strata_policy.kernels.layout import BLOCK_SIZE, BlockLayout, _compiled, blocks_per_super
from strata_policy.kernels.summaries import _refresh_blocks

_NONE = np.zeros(0, dtype=np.int64)

__all__ = [
    "BLOCK_SIZE",
    "SUPER_SIZE",
    "BlockIndex",
    "BlockLayout",
    "BlockQuery",
    "blocks_per_super",
]

SUPER_SIZE = 0  # blocks per superblock; 0: blocks_per_super(number of nodes)


class BlockQuery:
    """One request shape on a layout: policy code (0-5), request row, weight row (empty: 1 for
    every column the request asks for), static mask, per block and per superblock whether any
    of its nodes may pass the mask (in two parts, both of which must hold: ``mask_*`` and
    ``select_*``), and how many GPU devices one replica takes. Immutable by contract;
    ``args`` are its arguments of the search kernel (``blocks._blocks_place``), in order.

    The constructor checks nothing: ``BlockIndex.query`` is the validating way to make one.
    Only code that builds every array itself with the dtypes and shapes ``query`` checks calls
    it directly (``placement.one_replica``: the first call of a shape would otherwise pay
    about 1.5 µs for checks its own construction already guarantees)."""

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
        select_blocks: np.ndarray,
        select_supers: np.ndarray,
    ) -> None:
        self.layout = layout
        self.args = (policy, mask, mask_blocks, mask_supers, select_blocks, select_supers, req,
                     weights)  # fmt: skip
        g = req.item(2)  # the gpu column: a share takes one device, k × 1000 takes k
        self.devices = 0 if g <= 0 else 1 if g < 1000 else g // 1000


class BlockIndex:
    """Block summaries of one node state (``kernels.blocks``), answering one replica at a time.

    The state arrays are held by reference: the owner mutates them in place and calls
    ``refresh`` with the nodes that changed before the next ``place``. Not safe against a
    ``refresh`` running beside a ``place``; the owner serialises them.
    """

    __slots__ = (
        "_n_bounds",
        "_place_fn",
        "_refresh_fn",
        "_scratch",
        "_state",
        "layout",
        "summaries",
    )

    summaries: BlockSummaries
    """Per block and per superblock the high, low, offer and sums rows, per node its GPU offer
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
        _check("free", free, I64, (n, r))
        _check("capacity", capacity, I64, (n, r))
        _check("gpu_free", gpu_free, I64, (n, gpu_free.shape[1]))
        _check("inv_cap", inv_cap, F64, (n, r))
        _check("inv_max_cap", inv_max_cap, F64, (r,))
        nb = layout.block_start.shape[0] - 1
        ns = layout.super_start.shape[0] - 1
        _check("node_order", layout.node_order, I64, (n,))
        _check("block_start", layout.block_start, I64, (nb + 1,))
        _check("block_of", layout.block_of, I64, (n,))
        _check("super_start", layout.super_start, I64, (ns + 1,))
        _check("super_of", layout.super_of, I64, (nb,))
        _check("block_capacity", layout.block_capacity, I64, (nb, r))
        _check("block_inv_capacity", layout.block_inv_capacity, F64, (nb, r))
        _check("super_capacity", layout.super_capacity, I64, (ns, r))
        _check("super_inv_capacity", layout.super_inv_capacity, F64, (ns, r))
        if r < 3:
            raise ValueError("the first three columns must be cpu, memory, gpu")
        self.layout = layout
        self._state = NodeArrays(free, gpu_free, capacity, inv_cap, inv_max_cap)
        self.summaries = BlockSummaries.empty(nb, ns, n, r)
        self._bind()
        self.refresh(None)

    def _bind(self) -> None:
        lay = self.layout
        self._place_fn: Callable[..., tuple[int, float, int]] | None = None
        self._refresh_fn: Callable[..., None] | None = None
        self._n_bounds = lay.block_start.shape[0] + lay.super_start.shape[0] - 2
        self._scratch = threading.local()  # the kernel's scratch and device rows, per thread

    def with_state(self, free: np.ndarray, gpu_free: np.ndarray) -> BlockIndex:
        """The same summaries over a copy of the state (``free``/``gpu_free`` equal to ours)."""
        _check("free", free, I64, self._state.free.shape)
        _check("gpu_free", gpu_free, I64, self._state.gpu_free.shape)
        other = BlockIndex.__new__(BlockIndex)
        other.layout = self.layout
        other._state = self._state._replace(free=free, gpu_free=gpu_free)
        other.summaries = BlockSummaries._make(map(np.ndarray.copy, self.summaries))
        other._bind()
        return other

    @property
    def state(self) -> NodeArrays:
        """``free, gpu_free, capacity, inv_capacity, inv_max_capacity`` (held by reference)."""
        return self._state

    def refresh(self, rows: np.ndarray | None) -> None:
        """Recompute the blocks of nodes ``rows`` (int64 node indices, ``ValueError`` when out
        of range), or every block."""
        if rows is None:
            rows, count = _NONE, -1
        elif rows.dtype != I64 or rows.ndim != 1:
            raise ValueError("rows: expected int64 node indices")
        else:
            count = rows.shape[0]
        args = (self._state, self.layout, self.summaries, rows, count)
        fn = self._refresh_fn
        if fn is None or not (rows.flags.c_contiguous and rows.flags.writeable):
            _refresh_blocks(*args)  # the dispatcher types ``rows`` of any layout
            if fn is None and rows.flags.c_contiguous and rows.flags.writeable:
                self._refresh_fn = _compiled(_refresh_blocks, args)
        else:
            fn(*args)

    def query(
        self,
        *,
        policy: int,
        req: np.ndarray,
        weights: np.ndarray,
        mask: np.ndarray,
        levels: tuple[np.ndarray, np.ndarray] | None = None,
        select: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> BlockQuery:
        """A validated request shape for ``place`` (policy: a resource policy, 0-5; ``weights``
        a float64 per column, or empty for 1 on every column ``req`` asks for); ``levels`` is
        ``layout.mask_levels(mask)`` when the caller has it already, or a part of it whose
        ``&`` with ``select`` (block and superblock levels, too) is."""
        n, r = self._state.free.shape
        _check("req", req, I64, (r,))
        _check("weights", weights, F64, (0,) if weights.shape == (0,) else (r,))
        _check("mask", mask, BOOL, (n,))
        if not FIRST_FIT <= policy <= DOT_PRODUCT:
            raise ValueError(f"policy {policy}: expected a resource policy (0-5)")
        blocks, supers = self.layout.mask_levels(mask) if levels is None else levels
        select_blocks, select_supers = (blocks, supers) if select is None else select
        nb = self.layout.block_start.shape[0] - 1
        ns = self.layout.super_start.shape[0] - 1
        _check("mask blocks", blocks, BOOL, (nb,))
        _check("mask superblocks", supers, BOOL, (ns,))
        _check("select blocks", select_blocks, BOOL, (nb,))
        _check("select superblocks", select_supers, BOOL, (ns,))
        return BlockQuery(self.layout, policy, req, weights, mask, blocks, supers, select_blocks,
                          select_supers)  # fmt: skip

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
        if rows is _NONE:  # the common call: nothing to refresh
            first = count = 0
        elif rows is None:
            rows, first, count = _NONE, 0, -1
        else:
            if rows.dtype != I64 or rows.ndim != 1:
                raise ValueError("rows: expected int64 node indices")
            if count < 0:
                count = rows.shape[0] - first
            if not 0 <= first <= first + count <= rows.shape[0]:
                raise ValueError("rows: first and count out of range")
        try:
            scratch = self._scratch.arrays
        except AttributeError:  # the first call on this thread
            scratch = self._scratch.arrays = (
                np.empty(self._state.gpu_free.shape[1], dtype=np.int64),  # devices
                np.empty(self._n_bounds, dtype=np.float64),  # bounds
                np.empty(self._state.free.shape[1], dtype=np.float64),  # default weights
            )
        args = (self._state, self.layout, self.summaries, *q.args, rows, first, count, *scratch)
        fn = self._place_fn
        if fn is None:
            found: tuple[int, float, int] = _blocks_place(*args)
            self._place_fn = _compiled(_blocks_place, args)
            return found
        return fn(*args)


@functools.lru_cache(maxsize=4096)
def device_set(bits: int) -> tuple[int, ...]:
    """The device indices of a bit set, ascending (shared tuples: few distinct sets occur).
    ``int``: without the JIT (``NUMBA_DISABLE_JIT=1``) the kernel's bit set is a numpy int64,
    which has no ``bit_length``."""
    bits = int(bits)
    return tuple(d for d in range(bits.bit_length()) if bits >> d & 1)
