"""The one-replica fast path's inputs equal the general path's: request row, weight row, and the
query built without checks (``one_replica._block_query``) equal to the validating one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_placement_blocks import RESOURCE_POLICIES, WEIGHTS, block_sizes
from test_placement_levels import SELECTORS, clusters

from strata_policy.model import Node, Policy
from strata_policy.placement.index import index_of
from strata_policy.placement.inputs import (
    DEFAULT_WEIGHTS,
    request_and_weights,
    request_row,
    static_mask,
    weight_rows,
)
from strata_policy.placement.one_replica import _block_query
from strata_policy.placement.place import POLICY_CODES, PlacementOptions, place_one
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.testing import node, workload

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

MATRIX = matrix_from_nodes(
    [node("a", cpu=8, memory_gi=16, gpus=2), node("b", cpu=4, memory_gi=8, extra={"fpga": 2})]
)
NAMES = st.sampled_from(["cpu", "memory", "gpu", "fpga", "tpu"])


@settings(max_examples=200)
@given(
    st.dictionaries(NAMES, st.integers(0, 10**12)),
    st.one_of(
        st.just({}),
        st.dictionaries(NAMES, st.floats(allow_nan=False) | st.sampled_from([0.0, 1.0, 2.5])),
    ),
)
def test_request_and_weights_equal_the_batch_builders(
    request: dict[str, int], weights: dict[str, float]
) -> None:
    """request_and_weights gives request_row's row and missing name, and weight_rows' row when
    weights are given (the empty DEFAULT_WEIGHTS otherwise, which the kernel reads as it)."""
    req, row, missing = request_and_weights(MATRIX, request, weights)
    want_req, want_missing = request_row(MATRIX, request)
    assert missing == want_missing
    assert req.dtype == want_req.dtype
    assert req.tolist() == want_req.tolist()
    assert req.flags.c_contiguous
    if not weights:
        assert row is DEFAULT_WEIGHTS
        assert row.shape == (0,)
        assert row.dtype == np.float64
        return
    want_row = weight_rows(MATRIX, want_req, weights)
    assert row.dtype == want_row.dtype
    assert row.shape == want_row.shape
    assert np.array_equal(row, want_row)
    assert row.flags.c_contiguous


SHAPES = st.tuples(
    st.sampled_from([0, 1, 2, 4]), st.sampled_from([0, 500, 1000, 2000]), st.sampled_from([0, 4])
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    SHAPES,
    SELECTORS,
    st.sampled_from(["", "A", "A|B"]),
    st.sampled_from(RESOURCE_POLICIES),
    WEIGHTS,
    st.lists(SHAPES, max_size=12),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_unchecked_query_equals_the_validating_one(
    ns: list[Node],
    shape: tuple[int, int, int],
    selector: dict[str, str],
    models: str,
    policy: Policy,
    weights: dict[str, float],
    commits: list[tuple[int, int, int]],
    block: int,
    sup: int,
) -> None:
    """The fast path's query passes every check of BlockIndex.query, which gives it back
    equal, and places like the validating query of the batch's rows (explicit weight row,
    the StaticMask's levels in one part) on a state after some commits."""
    with block_sizes(block, sup):
        m = matrix_from_nodes(ns)
        for cpu, gpu, mem in commits:
            other = workload("c", "s", cpu=cpu, memory_gi=mem, gpu_milli=gpu)
            for p in place_one(m, other, PlacementOptions()).placements:
                m.allocate(m.index[p.node_id], other.request, p.gpu_devices)
        cpu, gpu, mem = shape
        wl = workload("w", "s", cpu=cpu, memory_gi=mem, gpu_milli=gpu, node_selector=selector,
                      gpu_model=models)  # fmt: skip
        code = POLICY_CODES[policy]
        fast = _block_query(m, wl, code, weights)
        assert fast is not None
        index = index_of(m).block_index(m)
        policy_code, mask, blocks, supers, select_blocks, select_supers, req, row = fast.args
        checked = index.query(policy=policy_code, req=req, weights=row, mask=mask,
                              levels=(blocks, supers),
                              select=(select_blocks, select_supers))  # fmt: skip
        assert fast.layout is checked.layout is index.layout
        assert fast.devices == checked.devices
        assert fast.args[0] == checked.args[0] == code
        for got, want in zip(fast.args[1:], checked.args[1:], strict=True):
            assert got.dtype == want.dtype
            assert np.array_equal(got, want)
        want_req, _ = request_row(m, wl.request)
        static = static_mask(m, wl)
        full = index.query(policy=code, req=want_req, weights=weight_rows(m, want_req, weights),
                           mask=static.selected, levels=(static.blocks, static.supers))  # fmt: skip
        assert fast.devices == full.devices
        assert index.place(fast) == index.place(full)
