"""The typed bundles of arrays the kernels take, and the one dtype/shape check of the wrappers.

A kernel argument that is a bundle is a ``typing.NamedTuple`` of arrays: numba passes it as a
tuple (its arrays unboxed one by one, exactly as separate arguments would be) and the kernel
reads its fields by name, so a call site names a handful of bundles instead of repeating a
positional list of forty arrays. Every bundle is built in one place: ``NodeArrays`` by the
wrappers from their callers' arrays, ``FragArrays`` by ``placement.fgd_inputs`` (or
``FragArrays.empty``), ``BlockSummaries`` by ``search.BlockIndex``, ``BatchInputs``,
``BatchScratch`` and ``BatchArrays`` by ``api.place_batch_arrays``.

Units: resource columns are integers in base units (column 0 cpu in millicores, column 1 memory
in bytes, column 2 gpu in milli-GPUs, then the extended resources); GPU devices hold free milli
(1000 = a whole device, -1 = no such device). ``N`` nodes, ``R`` resource columns, ``D`` device
slots per node, ``M`` typical task shapes (FGD), ``W`` workloads of a batch.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

I64 = np.dtype(np.int64)
F64 = np.dtype(np.float64)
BOOL = np.dtype(np.bool_)
U64 = np.dtype(np.uint64)

FGD_UNTRUNCATED = 0
FGD_PAPER = 1
FGD_REFINED = 2
"""FRAGMENTATION_AWARE's three scores (``fgd_mode``, read with ``FragArrays``; ``kernels.frag``
says what each computes)."""


def check_array(name: str, a: np.ndarray, dtype: np.dtype, shape: tuple[int | None, ...]) -> None:
    """``a`` has ``dtype``, is C-contiguous and has ``shape`` (``None``: any length on that
    axis); else ``ValueError`` naming the argument. A kernel would otherwise read out of
    bounds or silently cast."""
    if a.dtype != dtype:
        raise ValueError(f"{name}: dtype {a.dtype}, expected {dtype}")
    got = a.shape
    if len(got) != len(shape) or not a.flags.c_contiguous:
        raise ValueError(f"{name}: shape {got} (C-contiguous), expected {shape}")
    for want, have in zip(shape, got, strict=True):
        if want is not None and want != have:
            raise ValueError(f"{name}: shape {got}, expected {shape}")


class NodeArrays(NamedTuple):
    """One node state as the kernels read it (held by reference: the kernels that apply a
    placement write ``free`` and ``gpu_free``)."""

    free: np.ndarray
    """int64 ``[N, R]``: free amount per node and resource column."""
    gpu_free: np.ndarray
    """int64 ``[N, D]``: free milli per device (-1: the node has no such device)."""
    capacity: np.ndarray
    """int64 ``[N, R]``: allocatable amount per node and column."""
    inv_capacity: np.ndarray
    """float64 ``[N, R]``: ``1 / capacity`` (0 where the node has none of the column)."""
    inv_max_capacity: np.ndarray
    """float64 ``[R]``: ``1 / `` the cluster's largest capacity per column (BEST_FIT)."""

    def check(self) -> None:
        """Shapes and dtypes agree (raises ``ValueError``); the first three columns must be
        cpu, memory, gpu."""
        n, r = self.free.shape
        for name, a, dt, shape in (
            ("free", self.free, I64, (n, r)),
            ("gpu_free", self.gpu_free, I64, (n, None)),
            ("capacity", self.capacity, I64, (n, r)),
            ("inv_cap", self.inv_capacity, F64, (n, r)),
            ("inv_max_cap", self.inv_max_capacity, F64, (r,)),
        ):
            check_array(name, a, dt, shape)
        if r < 3:
            raise ValueError("the first three columns must be cpu, memory, gpu")


class FragArrays(NamedTuple):
    """FRAGMENTATION_AWARE's inputs (``kernels.frag``): the typical task shapes ``m`` and two
    statistics per (node, shape) that the kernels keep up to date when they apply a placement
    (pass copies unless nothing is applied)."""

    shape_cpu: np.ndarray
    """int64 ``[M]``: the shape's cpu request, millicores."""
    shape_gpu: np.ndarray
    """int64 ``[M]``: the shape's free milli needed per device (0: a CPU-only shape)."""
    shape_devices: np.ndarray
    """int64 ``[M]``: how many devices the shape takes."""
    shape_weight: np.ndarray
    """float64 ``[M]``: the shape's share of the task mix (its probability ``p_m``)."""
    model_allowed: np.ndarray
    """bool ``[N, M]``: the node's GPU model is one the shape accepts."""
    count_ge: np.ndarray
    """int64 ``[N, M]``: devices of the node with at least ``shape_gpu[m]`` free milli."""
    below: np.ndarray
    """int64 ``[N, M]``: free milli on the node's devices with less than ``shape_gpu[m]``."""

    def check(self, n_nodes: int, fgd_mode: int) -> None:
        """Shapes and dtypes, against ``n_nodes`` nodes, and the score they are read by
        (``fgd_mode``: ``FGD_UNTRUNCATED``, ``FGD_PAPER`` or ``FGD_REFINED``); raises
        ``ValueError``."""
        if not FGD_UNTRUNCATED <= fgd_mode <= FGD_REFINED:
            raise ValueError(f"fgd_mode {fgd_mode}: expected 0, 1 or 2 (see kernels.frag)")
        m = self.shape_gpu.shape[0]
        for name, a, dt, shape in (
            ("shape_cpu", self.shape_cpu, I64, (m,)),
            ("shape_gpu", self.shape_gpu, I64, (m,)),
            ("shape_devices", self.shape_devices, I64, (m,)),
            ("shape_weight", self.shape_weight, F64, (m,)),
            ("model_allowed", self.model_allowed, BOOL, (n_nodes, m)),
            ("count_ge", self.count_ge, I64, (n_nodes, m)),
            ("below", self.below, I64, (n_nodes, m)),
        ):
            check_array(name, a, dt, shape)

    @staticmethod
    def empty(n_nodes: int) -> FragArrays:
        """No shapes (every other policy)."""
        z = np.zeros(0, dtype=np.int64)
        return FragArrays(
            z,
            z,
            z,
            np.zeros(0, dtype=np.float64),
            np.zeros((n_nodes, 0), dtype=np.bool_),
            np.zeros((n_nodes, 0), dtype=np.int64),
            np.zeros((n_nodes, 0), dtype=np.int64),
        )


class BlockSummaries(NamedTuple):
    """The block search's per-state summaries (``kernels.summaries`` says what each holds):
    per block (``B`` of them) and per superblock (``S``), then per node."""

    block_high: np.ndarray
    """int64 ``[B, R]``: the largest free amount per column over the block's nodes."""
    block_low: np.ndarray
    """int64 ``[B, R]``: the smallest."""
    block_offer: np.ndarray
    """int64 ``[B]``: the best GPU offer of its nodes (``summaries._gpu_offer``)."""
    block_sums: np.ndarray
    """float64 ``[B, 5, 8]``: extremes of the per-subset sums of ``free / capacity``."""
    super_high: np.ndarray
    """int64 ``[S, R]``: as ``block_high``, per superblock."""
    super_low: np.ndarray
    """int64 ``[S, R]``."""
    super_offer: np.ndarray
    """int64 ``[S]``."""
    super_sums: np.ndarray
    """float64 ``[S, 5, 8]``."""
    node_offer: np.ndarray
    """int64 ``[N]``: each node's GPU offer."""


class BatchInputs(NamedTuple):
    """The workloads of one batch (``W``), each with its row indices into the shared masks."""

    masks: np.ndarray
    """bool ``[K, N]``: the distinct static masks (schedulable, selector, GPU model)."""
    mask_id: np.ndarray
    """int64 ``[W]``: the workload's row of ``masks``."""
    mask_blocks: np.ndarray
    """bool ``[K, B]``: per mask, whether a block holds a node passing it (empty: no blocks)."""
    mask_supers: np.ndarray
    """bool ``[K, S]``: the same per superblock."""
    spread: np.ndarray
    """int64 ``[L, N]``: per spread key, each node's code of its label value (-1: absent)."""
    spread_id: np.ndarray
    """int64 ``[W]``: the workload's row of ``spread`` (-1: no spread)."""
    request: np.ndarray
    """int64 ``[W, R]``: one replica's request per column."""
    replicas: np.ndarray
    """int64 ``[W]``: the gang's replica count (all or nothing)."""
    offsets: np.ndarray
    """int64 ``[W]``: the workload's first row in the per-replica outputs."""
    weights: np.ndarray
    """float64 ``[W, R]``: the score's weight per column."""
    seeds: np.ndarray
    """uint64 ``[W]``: the RANDOM policy's seed per workload."""
    impossible: np.ndarray
    """bool ``[W]``: the workload asks for a resource no node has (it fits nowhere)."""
    tree_of: np.ndarray
    """int64 ``[W]``: the score tree serving the workload (-1: none; ``kernels.tree``)."""


class BatchScratch(NamedTuple):
    """Working arrays of the batch kernel (no meaning outside one call)."""

    tree_score: np.ndarray
    """float64 ``[T, 2P]``: the score trees' values (``kernels.tree``)."""
    tree_node: np.ndarray
    """int64 ``[T, 2P]``: the node each tree entry stands for."""
    tree_synced_at: np.ndarray
    """int64 ``[T]``: the journal length each tree has caught up with (-1: not built)."""
    journal: np.ndarray
    """int64: the node of every replica applied or rolled back, in order."""
    spread_used: np.ndarray
    """int64 ``[largest gang]``: the spread codes the gang's earlier replicas took."""
    bounds: np.ndarray
    """float64 ``[S + B]``: the block search's bounds (``blocks._blocks_best``)."""


class BatchArrays(NamedTuple):
    """Kernel outputs: per replica (rows ``offsets[w]:offsets[w]+replicas[w]``) the node (-1
    when unplaced) and devices (-1 padded); per workload the last score, how many replicas fit
    before the gang failed, and per-node reason counts (columns, then spread, then absent)."""

    node: np.ndarray
    """int64 ``[replicas in all]``."""
    devices: np.ndarray
    """int64 ``[replicas in all, D]``."""
    score: np.ndarray
    """float64 ``[W]``."""
    fit: np.ndarray
    """int64 ``[W]``."""
    counts: np.ndarray
    """int64 ``[W, R + 2]``."""
    offsets: np.ndarray
    """int64 ``[W]``: as ``BatchInputs.offsets``."""
