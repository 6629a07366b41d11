"""A node matrix's observable state, for tests that compare two ways of changing it."""

from __future__ import annotations

from strata_policy.state.nodes import NodeMatrix


def matrix_state(m: NodeMatrix) -> tuple[object, ...]:
    """Allocated, free and GPU arrays, per-node versions, the journal, replica counts."""
    return (
        m.allocated.tolist(),
        m.free.tolist(),
        m.gpu_free.tolist(),
        m.version.tolist(),
        m.journal_since(0).tolist(),
        m.replicas.tolist(),
    )
