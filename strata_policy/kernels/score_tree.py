"""The validating wrapper of one persistent score tree (``kernels.tree``), for the one-replica
path of a repeated shape (``placement.one_replica``): checked once, then one kernel call per
placement.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from strata_policy.kernels.arrays import BOOL, F64, I64, FragArrays, NodeArrays
from strata_policy.kernels.arrays import check_array as _check
from strata_policy.kernels.layout import _compiled
from strata_policy.kernels.tree import _tree_place

_NO_ROWS = np.zeros(0, dtype=np.int64)


class ScoreTree:
    """A persistent score tree (``kernels.tree``) for one request on one node state.

    The state arrays are held by reference: the owner mutates them in place and tells
    ``place`` which nodes changed since the last call. Shapes and dtypes are checked once, here.
    """

    __slots__ = ("_args", "_dev", "_nodes", "_place_fn", "_tree_node", "_tree_score", "built")

    def __init__(
        self,
        *,
        policy: int,
        free: np.ndarray,
        gpu_free: np.ndarray,
        capacity: np.ndarray,
        inv_cap: np.ndarray,
        inv_max_cap: np.ndarray,
        mask: np.ndarray,
        req: np.ndarray,
        weights: np.ndarray,
        frag: FragArrays,
        fgd_mode: int,
    ) -> None:
        nodes = NodeArrays(free, gpu_free, capacity, inv_cap, inv_max_cap)
        nodes.check()
        n, r = free.shape
        _check("mask", mask, BOOL, (n,))
        _check("req", req, I64, (r,))
        _check("weights", weights, F64, (r,))
        frag.check(n, fgd_mode)
        if not 0 <= policy < 7:
            raise ValueError(f"policy {policy}: expected 0-6 (RANDOM has no tree)")
        leaves = 1 << max(0, (n - 1).bit_length())
        self._nodes = nodes
        self._tree_score = np.empty((1, 2 * leaves), dtype=np.float64)
        self._tree_node = np.empty((1, 2 * leaves), dtype=np.int64)
        self._dev = np.empty(gpu_free.shape[1], dtype=np.int64)
        self._args = (policy, nodes, mask, req, weights, frag, fgd_mode, self._tree_score,
                      self._tree_node)  # fmt: skip
        self._place_fn: Callable[..., tuple[int, float]] | None = None
        self.built = False

    @property
    def nbytes(self) -> int:
        """Memory the tree itself takes."""
        return int(self._tree_score.nbytes + self._tree_node.nbytes)

    def place(self, changed: np.ndarray | None) -> tuple[int, float, tuple[int, ...]]:
        """Best node for one replica (-1 when none fits), its score and devices; ``changed``
        lists the nodes whose state moved since the last call (None: rebuild)."""
        if changed is None or not self.built:
            rows, n_rows = _NO_ROWS, -1
        else:
            _check("changed", changed, I64, (None,))
            n = self._nodes.free.shape[0]
            if changed.size and (changed.min() < 0 or changed.max() >= n):
                raise ValueError("changed rows out of range")
            # A read-only array is another numba type than the one compiled for.
            rows = changed if changed.flags.writeable else changed.copy()
            n_rows = rows.shape[0]
        args = (*self._args, rows, n_rows, self._dev)
        fn = self._place_fn
        if fn is None:
            # The bundles' types are resolved once: the dispatcher's per-call typing of a
            # NamedTuple argument costs microseconds (``layout._compiled``).
            best, score = _tree_place(*args)
            self._place_fn = _compiled(_tree_place, args)
        else:
            best, score = fn(*args)
        self.built = True
        if best < 0:
            return -1, 0.0, ()
        return best, score, tuple(int(x) for x in self._dev if x >= 0)
