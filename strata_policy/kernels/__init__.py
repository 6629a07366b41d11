"""Numba kernels over the node matrix: private ``@njit`` functions behind validating wrappers.

A leaf package (numpy and numba only). ``warmup()`` compiles or loads every kernel; the server
calls it before its health check says SERVING.
"""

from strata_policy.kernels.arrays import (
    BatchArrays,
    FragArrays,
    place_batch_arrays,
    refresh_frag_rows,
)
from strata_policy.kernels.fit import (
    BALANCED_ALLOCATION,
    BEST_FIT,
    DOT_PRODUCT,
    FIRST_FIT,
    FRAGMENTATION_AWARE,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    RANDOM,
)
from strata_policy.kernels.frag import FGD_PAPER, FGD_REFINED, FGD_UNTRUNCATED
from strata_policy.kernels.layout import BlockLayout
from strata_policy.kernels.score_tree import ScoreTree
from strata_policy.kernels.warmup import warmup

__all__ = [
    "BALANCED_ALLOCATION",
    "BEST_FIT",
    "DOT_PRODUCT",
    "FGD_PAPER",
    "FGD_REFINED",
    "FGD_UNTRUNCATED",
    "FIRST_FIT",
    "FRAGMENTATION_AWARE",
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "RANDOM",
    "BatchArrays",
    "BlockLayout",
    "FragArrays",
    "ScoreTree",
    "place_batch_arrays",
    "refresh_frag_rows",
    "warmup",
]
