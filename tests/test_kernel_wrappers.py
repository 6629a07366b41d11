"""The kernels' validating wrappers: a wrong shape, dtype or index is one ``ValueError`` naming
the argument, raised before any kernel runs (so nothing is written), and a right call is not
refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from strata_policy import kernels
from strata_policy.kernels.arrays import NodeArrays

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

N_NODES = 3


def _nodes() -> dict[str, np.ndarray]:
    free = np.array([[4000, 1 << 30, 2000], [8000, 1 << 30, 1000], [2000, 1 << 20, 0]])
    return {
        "free": free,
        "gpu_free": np.array([[1000, 1000], [1000, -1], [-1, -1]]),
        "capacity": free.copy(),
        "inv_cap": 1.0 / free.clip(1),
        "inv_max_cap": np.ones(3),
    }


def _batch() -> dict[str, Any]:
    """Two workloads (the second a gang of two spread over the hostname) on three nodes."""
    return {
        **_nodes(),
        "masks": np.ones((1, N_NODES), dtype=np.bool_),
        "mask_id": np.zeros(2, dtype=np.int64),
        "spread": np.arange(N_NODES, dtype=np.int64).reshape(1, N_NODES),
        "spread_id": np.array([-1, 0]),
        "req": np.array([[1000, 0, 500], [1000, 0, 0]]),
        "replicas": np.array([1, 2]),
        "weights": np.ones((2, 3)),
        "seeds": np.arange(2, dtype=np.uint64),
        "impossible": np.zeros(2, dtype=np.bool_),
        "policy": kernels.LEAST_ALLOCATED,
        "apply_last": True,
        "frag": kernels.FragArrays.empty(N_NODES),
    }


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _with(**changes: Any) -> dict[str, Any]:
    return {**_batch(), **changes}


BAD_BATCHES = [
    pytest.param(_with(free=_batch()["free"].astype(np.int32)), "free", id="free: int32"),
    pytest.param(
        _with(free=np.asfortranarray(_batch()["free"])), "free", id="free: not C-contiguous"
    ),
    pytest.param(_with(gpu_free=np.ones((2, 2), dtype=np.int64)), "gpu_free", id="gpu_free: rows"),
    pytest.param(_with(inv_cap=np.ones((3, 3), dtype=np.float32)), "inv_cap", id="inv_cap: f32"),
    pytest.param(_with(inv_max_cap=np.ones(2)), "inv_max_cap", id="inv_max_cap: columns"),
    pytest.param(
        {
            **_with(**{k: v[:, :2].copy() for k, v in _nodes().items() if v.ndim == 2}),
            "inv_max_cap": np.ones(2),
            "req": np.zeros((2, 2), dtype=np.int64),
            "weights": np.ones((2, 2)),
        },
        "first three columns",
        id="two columns only",
    ),
    pytest.param(_with(masks=np.ones((1, 2), dtype=np.bool_)), "masks", id="masks: nodes"),
    pytest.param(_with(mask_id=np.array([0, 1])), "mask_id", id="mask_id: out of range"),
    pytest.param(_with(spread_id=np.array([-1, 1])), "spread_id", id="spread_id: out of range"),
    pytest.param(_with(req=np.ones((2, 3))), "req", id="req: float"),
    pytest.param(_with(replicas=np.array([1, 0])), "replicas", id="replicas: zero"),
    pytest.param(_with(weights=np.ones((1, 3))), "weights", id="weights: rows"),
    pytest.param(_with(seeds=np.arange(2)), "seeds", id="seeds: int64"),
    pytest.param(_with(impossible=np.zeros(3, dtype=np.bool_)), "impossible", id="impossible"),
    pytest.param(_with(fgd_mode=3), "fgd_mode", id="fgd_mode: unknown"),
    pytest.param(
        _with(frag=kernels.FragArrays.empty(N_NODES + 1)), "model_allowed", id="frag: node rows"
    ),
    pytest.param(_with(tree_of=np.array([0, 1]), n_trees=1), "tree_of", id="tree_of: out of range"),
    pytest.param(_with(free=_read_only(_batch()["free"])), "read-only", id="free: read-only"),
    pytest.param(
        _with(
            frag=kernels.FragArrays.empty(N_NODES)._replace(
                below=_read_only(np.zeros((3, 0), dtype=np.int64))
            )
        ),
        "below: read-only",
        id="frag statistics: read-only",
    ),
]


@pytest.mark.parametrize(("kwargs", "names"), BAD_BATCHES)
def test_bad_batch_is_refused_and_changes_nothing(kwargs: dict[str, Any], names: str) -> None:
    """A bad argument is one ValueError naming it; the state passed is left as it was."""
    before = (kwargs["free"].copy(), kwargs["gpu_free"].copy())
    with pytest.raises(ValueError, match=names):
        kernels.place_batch_arrays(**kwargs)
    assert (kwargs["free"] == before[0]).all()
    assert (kwargs["gpu_free"] == before[1]).all()


def test_good_batch_places_and_applies() -> None:
    """The batch the bad cases derive from is accepted: both gangs placed, the state applied."""
    kwargs = _batch()
    out = kernels.place_batch_arrays(**kwargs)
    assert out.fit.tolist() == [1, 2]
    assert out.offsets.tolist() == [0, 1]
    assert len(set(out.node[1:].tolist())) == 2  # spread over two hostnames
    assert int(kwargs["free"][:, 0].sum()) == 14000 - 3000


def _tree(**changes: Any) -> Callable[[], kernels.ScoreTree]:
    args: dict[str, Any] = {
        **_nodes(),
        "policy": kernels.LEAST_ALLOCATED,
        "mask": np.ones(N_NODES, dtype=np.bool_),
        "req": np.array([1000, 0, 500]),
        "weights": np.ones(3),
        "frag": kernels.FragArrays.empty(N_NODES),
        "fgd_mode": kernels.FGD_REFINED,
        **changes,
    }
    return lambda: kernels.ScoreTree(**args)


@pytest.mark.parametrize(
    ("make", "names"),
    [
        pytest.param(_tree(policy=kernels.RANDOM), "RANDOM", id="RANDOM has no tree"),
        pytest.param(_tree(mask=np.ones(2, dtype=np.bool_)), "mask", id="mask: nodes"),
        pytest.param(_tree(req=np.ones(3, dtype=np.int32)), "req", id="req: int32"),
        pytest.param(_tree(weights=np.ones(4)), "weights", id="weights: columns"),
        pytest.param(_tree(fgd_mode=-1), "fgd_mode", id="fgd_mode: unknown"),
    ],
)
def test_bad_score_tree_is_refused(make: Callable[[], kernels.ScoreTree], names: str) -> None:
    """A score tree over bad arrays is refused when it is made, naming the argument."""
    with pytest.raises(ValueError, match=names):
        make()


def test_score_tree_refuses_changed_rows_out_of_range() -> None:
    """``place`` refuses a changed-node list out of range, and a read-only one is accepted."""
    tree = _tree()()
    assert tree.place(None)[0] == 0
    with pytest.raises(ValueError, match="out of range"):
        tree.place(np.array([N_NODES]))
    rows = np.array([1])
    rows.flags.writeable = False
    assert tree.place(rows)[0] == 0


def test_node_arrays_check_names_the_argument() -> None:
    """``NodeArrays.check`` names the first array whose dtype or shape is wrong."""
    nodes = _nodes()
    NodeArrays(*nodes.values()).check()
    with pytest.raises(ValueError, match="capacity"):
        NodeArrays(*{**nodes, "capacity": nodes["capacity"][:2].copy()}.values()).check()
