"""The block layout (``kernels.blocks``): which nodes form each block and superblock, built
once from the immutable node data and shared by copies of a state, with the validating wrappers
that derive static masks from it, and ``_compiled`` (a kernel's machine code for fixed argument
types), which the wrappers of the hot one-replica kernels share.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np

from strata_policy.kernels.arrays import BOOL, I64
from strata_policy.kernels.arrays import check_array as _check
from strata_policy.kernels.masks import _static_blocks, _static_mask

BLOCK_SIZE = 32


def blocks_per_super(n_nodes: int, block_size: int = BLOCK_SIZE) -> int:
    """Blocks per superblock for ``n_nodes`` nodes in blocks of ``block_size``.

    A search bounds every superblock, then the blocks of the superblocks it opens (one and a
    half to two in a steady state of committed placements): ``n_blocks / S + 2·S`` bound rows,
    least at ``S = sqrt(n_blocks / 2)``: 13 at 10,000 nodes (about 48 rows where 32 gave 70)
    and 40 at 100,000; a commit also re-summarises one superblock, S blocks. Kept in 4..64."""
    n_blocks = -(-n_nodes // block_size)
    return max(4, min(64, round(math.sqrt(n_blocks / 2))))


def _compiled(dispatcher: Any, args: tuple[object, ...]) -> Callable[..., Any]:
    """The machine code ``dispatcher`` runs for ``args``' types, callable without the
    dispatcher's per-call type resolution (about 0.2 µs per array argument, and a few µs per
    ``NamedTuple`` bundle, which numba types in Python): every later call passes the same
    types, because the wrappers (``BlockIndex``, ``BlockQuery``, ``ScoreTree``) check dtypes,
    dimensions and contiguity once. The dispatcher itself when there is no such entry
    (``NUMBA_DISABLE_JIT=1``)."""
    overloads = getattr(dispatcher, "overloads", None)
    if not overloads:
        return cast(Callable[..., Any], dispatcher)
    signature = tuple(dispatcher.typeof_pyval(a) for a in args)
    found = overloads.get(signature)
    if found is None:
        return cast(Callable[..., Any], dispatcher)
    return cast(Callable[..., Any], found.entry_point)


_STATIC_BLOCKS: list[Callable[..., object] | None] = [None]  # see _compiled


class BlockLayout(NamedTuple):
    """Which nodes form each block and which blocks each superblock (``kernels.blocks``); a
    bundle the kernels take whole (``kernels.arrays``). Immutable by contract.

    Block ``b`` is ``node_order[block_start[b]:block_start[b + 1]]`` (ascending node indices),
    superblock ``s`` blocks ``super_start[s]:super_start[s + 1]``; per block and per superblock
    the capacity row and ``1/capacity`` row of its nodes (one class each). ``N`` nodes, ``B``
    blocks, ``S`` superblocks, ``R`` resource columns.
    """

    node_order: np.ndarray
    """int64 ``[N]``: the nodes, class by class, each class in index order."""
    block_start: np.ndarray
    """int64 ``[B + 1]``: block ``b``'s first position in ``node_order`` (then the end)."""
    block_of: np.ndarray
    """int64 ``[N]``: the block holding node ``n``."""
    super_start: np.ndarray
    """int64 ``[S + 1]``: superblock ``s``'s first block (then the number of blocks)."""
    super_of: np.ndarray
    """int64 ``[B]``: the superblock holding block ``b``."""
    block_capacity: np.ndarray
    """int64 ``[B, R]``: the capacity row of the block's nodes."""
    block_inv_capacity: np.ndarray
    """float64 ``[B, R]``: its ``1 / capacity`` (0 where none)."""
    super_capacity: np.ndarray
    """int64 ``[S, R]``: the capacity row of the superblock's nodes."""
    super_inv_capacity: np.ndarray
    """float64 ``[S, R]``: its ``1 / capacity``."""

    @staticmethod
    def build(
        groups: np.ndarray,
        capacity: np.ndarray,
        inv_capacity: np.ndarray,
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
        node_order = (
            np.lexsort(keys).astype(np.int64) if keys and n else np.arange(n, dtype=np.int64)
        )
        ordered = groups[node_order]
        new_class = np.ones(n, dtype=np.bool_)
        if n > 1:
            new_class[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
        same_class = ~new_class[1:]
        rows = capacity[node_order]
        if (rows[1:][same_class] != rows[:-1][same_class]).any():
            raise ValueError("groups must separate nodes of different capacities")
        at = np.arange(n)
        class_first = np.maximum.accumulate(np.where(new_class, at, 0)) if n else at
        new_block = (at - class_first) % block_size == 0
        firsts = np.flatnonzero(new_block)
        block_start = np.append(firsts, n).astype(np.int64)
        block_of = np.empty(n, dtype=np.int64)
        block_of[node_order] = np.cumsum(new_block) - 1
        nb = firsts.shape[0]
        b_class_first = np.flatnonzero(new_class[firsts])  # blocks that start a class
        class_of_block = np.cumsum(new_class[firsts]) - 1
        first_block_of_class = b_class_first[class_of_block] if nb else np.zeros(0, np.int64)
        new_super = (np.arange(nb) - first_block_of_class) % super_size == 0
        super_start = np.append(np.flatnonzero(new_super), nb).astype(np.int64)
        super_of = (np.cumsum(new_super) - 1).astype(np.int64)
        block_capacity = np.ascontiguousarray(capacity[node_order[firsts]])
        block_inv_capacity = np.ascontiguousarray(inv_capacity[node_order[firsts]])
        super_capacity = np.ascontiguousarray(block_capacity[super_start[:-1]])
        super_inv_capacity = np.ascontiguousarray(block_inv_capacity[super_start[:-1]])
        return BlockLayout(
            node_order,
            block_start,
            block_of,
            super_start,
            super_of,
            block_capacity,
            block_inv_capacity,
            super_capacity,
            super_inv_capacity,
        )

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
        n = self.node_order.shape[0]
        k = wanted.shape[0]
        _check("schedulable", schedulable, BOOL, (n,))
        _check("label_codes", label_codes, I64, (k, n))
        _check("wanted", wanted, I64, (k,))
        _check("model_code", model_code, I64, (n,))
        _check("gpu_devices", gpu_devices, I64, (n,))
        if model_allowed.dtype != BOOL or model_allowed.ndim != 1:
            raise ValueError("model_allowed: a bool per model code")
        mask = np.empty(n, dtype=np.bool_)
        blocks = np.empty(self.block_start.shape[0] - 1, dtype=np.bool_)
        supers = np.empty(self.super_start.shape[0] - 1, dtype=np.bool_)
        counts = np.empty(3, dtype=np.int64)
        _static_mask(schedulable, label_codes, wanted, model_allowed, model_code, gpu_devices,
                     any_model, wants_gpu, self, mask, blocks, supers, counts)  # fmt: skip
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
        of nodes alike in those, as ``placement.index.LineageCaches.layout`` builds), ``hits``
        per block how many of its nodes match the node selector."""
        nb = self.block_start.shape[0] - 1
        _check("statics", statics, I64, (nb, 3))
        _check("hits", hits, I64, (nb,))
        if model_allowed.ndim != 1:
            raise ValueError("model_allowed: a bool per model code")
        _check("model_allowed", model_allowed, BOOL, model_allowed.shape)
        levels = np.empty(nb + self.super_start.shape[0] - 1, dtype=np.bool_)
        blocks, supers = levels[:nb], levels[nb:]
        args = (statics, model_allowed, any_model, wants_gpu, self.block_start, self.super_start,
                hits, blocks, supers)  # fmt: skip
        fn = _STATIC_BLOCKS[0]
        if fn is None:
            counts: tuple[int, int, int] = _static_blocks(*args)
            _STATIC_BLOCKS[0] = _compiled(_static_blocks, args)
        else:
            counts = fn(*args)  # type: ignore[assignment]  # the kernel's (int, int, int)
        return blocks, supers, counts

    def mask_levels(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per block and per superblock, whether any of its nodes passes ``mask``."""
        if not self.node_order.size:
            return np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.bool_)
        blocks = np.logical_or.reduceat(mask[self.node_order], self.block_start[:-1])
        supers = np.logical_or.reduceat(blocks, self.super_start[:-1])
        return np.ascontiguousarray(blocks), np.ascontiguousarray(supers)
