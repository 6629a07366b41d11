"""The block search's kernels, as their one Python wrapper calls them: ``placement.index``'s
``BlockIndex`` (the block summaries of one node state, which the placement index owns) and its
``BlockQuery`` (one request shape) check every array once and then call these with no further
validation.

``search_blocks`` (``blocks._blocks_place``) finds the best node for one replica over the
summaries, first refreshing the blocks of the nodes it is given; ``refresh_blocks``
(``summaries._refresh_blocks``) recomputes the blocks of given nodes, or of every node;
``compiled`` (``layout._compiled``) is a kernel's machine code for fixed argument types.
``BLOCK_SIZE`` and ``SUPER_SIZE`` are the layout's block and superblock sizes, read on every
layout build (tests set them).
"""

from __future__ import annotations

from strata_policy.kernels.blocks import _blocks_place as search_blocks
from strata_policy.kernels.layout import BLOCK_SIZE, BlockLayout, blocks_per_super
from strata_policy.kernels.layout import _compiled as compiled
from strata_policy.kernels.summaries import _refresh_blocks as refresh_blocks

__all__ = [
    "BLOCK_SIZE",
    "SUPER_SIZE",
    "BlockLayout",
    "blocks_per_super",
    "compiled",
    "refresh_blocks",
    "search_blocks",
]

SUPER_SIZE = 0  # blocks per superblock; 0: blocks_per_super(number of nodes)
