"""A workload's static mask (schedulable, node selector, GPU model) and its block levels.

``_static_mask`` visits every node (the per-node mask the batch kernel's scans read);
``_static_blocks`` gets the block levels and reason counts from per-block data alone, because
a block's nodes share schedulability, model and device count (``layout.BlockLayout``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from strata_policy.kernels.config import inline_kernel, kernel

if TYPE_CHECKING:  # annotations only (layout imports this module)
    from strata_policy.kernels.layout import BlockLayout


@kernel
def _static_mask(
    schedulable: np.ndarray,
    label_codes: np.ndarray,
    wanted: np.ndarray,
    model_allowed: np.ndarray,
    model_code: np.ndarray,
    gpu_devices: np.ndarray,
    any_model: bool,
    wants_gpu: bool,
    layout: BlockLayout,
    mask: np.ndarray,
    mask_blocks: np.ndarray,
    mask_supers: np.ndarray,
    counts: np.ndarray,
) -> None:
    """A workload's static mask in one pass: schedulable, ``label_codes[k] == wanted[k]`` for
    every selector key ``k``, and the GPU model allowed (any model when ``any_model``; a node
    without GPUs passes when the workload wants none). Counts the first failing test per node
    (unschedulable, selector, model) and fills the mask's block and superblock levels. A model
    code outside ``model_allowed`` raises ``ValueError``."""
    counts[:] = 0
    for n in range(mask.shape[0]):
        ok = False
        if not schedulable[n]:
            counts[0] += 1
        else:
            sel = True
            for k in range(wanted.shape[0]):
                if label_codes[k, n] != wanted[k]:
                    sel = False
                    break
            if not sel:
                counts[1] += 1
            elif any_model or (not wants_gpu and gpu_devices[n] == 0):
                ok = True
            elif not 0 <= model_code[n] < model_allowed.shape[0]:
                raise ValueError("model code out of range")
            elif model_allowed[model_code[n]]:
                ok = True
            else:
                counts[2] += 1
        mask[n] = ok
    block_start = layout.block_start
    for b in range(block_start.shape[0] - 1):
        hit = False
        for j in range(block_start[b], block_start[b + 1]):
            if mask[layout.node_order[j]]:
                hit = True
                break
        mask_blocks[b] = hit
    _supers_of(layout.super_start, mask_blocks, mask_supers)


@kernel
def _static_blocks(
    statics: np.ndarray,
    model_allowed: np.ndarray,
    any_model: bool,
    wants_gpu: bool,
    block_start: np.ndarray,
    super_start: np.ndarray,
    hits: np.ndarray,
    mask_blocks: np.ndarray,
    mask_supers: np.ndarray,
) -> tuple[int, int, int]:
    """``_static_mask``'s block levels and first-failure counts (returned: unschedulable,
    selector, model) without visiting a node: the
    nodes of a block share schedulability, GPU model and device count (the layout's classes),
    given per block by ``statics`` (rows: schedulable 0/1, model code, devices), and
    ``hits[b]`` says how many of block ``b``'s nodes match the node selector (its size when
    there is none). Work per block, in contiguous arrays: a new selector costs ``N / B``."""
    unschedulable = 0
    selector = 0
    model_miss = 0
    for b in range(block_start.shape[0] - 1):
        size = block_start[b + 1] - block_start[b]
        h = hits[b]
        ok = False
        if statics[b, 0] == 0:
            unschedulable += size
        else:
            selector += size - h
            model = any_model or (not wants_gpu and statics[b, 2] == 0)
            if not model:
                code = statics[b, 1]
                if not 0 <= code < model_allowed.shape[0]:
                    raise ValueError("model code out of range")
                model = model_allowed[code]
            if not model:
                model_miss += h
            ok = model and h > 0
        mask_blocks[b] = ok
    _supers_of(super_start, mask_blocks, mask_supers)
    return unschedulable, selector, model_miss


@inline_kernel
def _supers_of(super_start: np.ndarray, mask_blocks: np.ndarray, mask_supers: np.ndarray) -> None:
    """Per superblock, whether any of its blocks passes."""
    for s in range(super_start.shape[0] - 1):
        hit = False
        for b in range(super_start[s], super_start[s + 1]):
            if mask_blocks[b]:
                hit = True
                break
        mask_supers[s] = hit
