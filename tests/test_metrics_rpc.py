"""``RpcCollector`` exports exactly what prometheus_client's Counter and Histogram would.

The per-RPC series are kept as plain counts for speed (``service.metrics_rpc``); dashboards and
alerts read them as the labelled ``Counter``/``Histogram`` they replace, so the exposition text
must be the same, sample for sample (``_created`` times aside).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from strata_policy.service.metrics import LATENCY_BUCKETS
from strata_policy.service.metrics_rpc import RpcCollector

Observation = tuple[str, str, float]
METHODS = ("Admit", "Place")
CODES = ("OK", "INTERNAL")


def _text(registry: CollectorRegistry) -> str:
    """The exposition text with every ``_created`` value blanked."""
    text = generate_latest(registry).decode()
    return re.sub(r"(_created(\{[^}]*\})?) \S+", r"\1 T", text)


def _both(observations: list[Observation]) -> tuple[str, str]:
    """(ours, prometheus_client's) exposition after the same zero series and observations."""
    ours_registry, theirs_registry = CollectorRegistry(), CollectorRegistry()
    ours = RpcCollector(LATENCY_BUCKETS)
    ours_registry.register(ours)
    ours.start_at_zero(METHODS, CODES)
    rpcs = Counter(
        "strata_rpcs", "Finished RPCs by method and gRPC status code.", ("method", "code"),
        registry=theirs_registry,
    )  # fmt: skip
    latency = Histogram(
        "strata_rpc_duration_seconds", "RPC latency by method.", ("method",),
        buckets=LATENCY_BUCKETS, registry=theirs_registry,
    )  # fmt: skip
    for method in METHODS:
        for code in CODES:
            rpcs.labels(method, code)
        latency.labels(method)
    for method, code, seconds in observations:
        ours.observe(method, code, seconds)
        rpcs.labels(method, code).inc()
        latency.labels(method).observe(seconds)
    return _text(ours_registry), _text(theirs_registry)


@pytest.mark.parametrize(
    "observations",
    [
        pytest.param([], id="zero series only"),
        pytest.param([("Admit", "OK", 0.001)], id="exactly on a bound: that bucket"),
        pytest.param([("Admit", "OK", 0.0010001)], id="just above a bound: the next"),
        pytest.param([("Place", "INTERNAL", 60.0)], id="above every bound: +Inf only"),
        pytest.param([("Release", "NOT_FOUND", 0.0)], id="a method and code not started"),
        pytest.param([("Admit", "OK", 0.0002)] * 3 + [("Admit", "INTERNAL", 2.0)], id="several"),
    ],
)
def test_same_exposition(observations: list[Observation]) -> None:
    """Named cases: the same text as Counter + Histogram."""
    ours, theirs = _both(observations)
    assert ours == theirs


@given(
    st.lists(
        st.tuples(
            st.sampled_from((*METHODS, "GetCluster")),
            st.sampled_from((*CODES, "UNAVAILABLE")),
            st.one_of(
                st.sampled_from(LATENCY_BUCKETS),
                st.floats(min_value=0, max_value=100, allow_nan=False),
            ),
        ),
        max_size=30,
    )
)
def test_same_exposition_always(observations: list[Observation]) -> None:
    """Property: any observations give the same text as Counter + Histogram."""
    ours, theirs = _both(observations)
    assert ours == theirs


@pytest.mark.parametrize(
    "bounds",
    [
        pytest.param((), id="none"),
        pytest.param((0.1, 0.01), id="descending"),
        pytest.param((0.1, 0.1), id="repeated"),
    ],
)
def test_bad_bounds(bounds: tuple[float, ...]) -> None:
    """Bounds that are empty, unordered or repeated are refused."""
    with pytest.raises(ValueError, match="ascending"):
        RpcCollector(bounds)
