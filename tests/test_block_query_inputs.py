"""The one-replica fast path's inputs equal the general path's: request row and weight row."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.policy.placement_inputs import request_and_weights, request_row, weight_rows
from strata_policy.state.nodes import NodeMatrix
from strata_policy.testing import node

MATRIX = NodeMatrix.from_nodes(
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
    """request_and_weights gives request_row's row and missing name and weight_rows' row."""
    req, row, missing = request_and_weights(MATRIX, request, weights)
    want_req, want_missing = request_row(MATRIX, request)
    want_row = weight_rows(MATRIX, want_req, weights)
    assert missing == want_missing
    assert req.dtype == want_req.dtype
    assert req.tolist() == want_req.tolist()
    assert row.dtype == want_row.dtype
    assert row.shape == want_row.shape
    assert np.array_equal(row, want_row)
    assert req.flags.c_contiguous
    assert row.flags.c_contiguous
