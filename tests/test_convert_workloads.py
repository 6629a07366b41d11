"""Workloads from the wire: the fast conversion equals the plain one, field for field."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import Workload, new_workload
from strata_policy.service import convert

names = st.text("abcxyz-./0123é", max_size=8)
int64s = st.integers(-(2**63), 2**63 - 1)
messages = st.builds(
    pb.Workload,
    id=names,
    scope_id=names,
    request=st.dictionaries(st.sampled_from(["cpu", "memory", "gpu", "rdma", "a.b/c"]), int64s),
    replicas=st.integers(-(2**31), 2**31 - 1),
    priority=st.integers(-(2**31), 2**31 - 1),
    preemptible=st.sampled_from([None, True, False]),
    node_selector=st.dictionaries(names, names, max_size=3),
    gpu_model=st.sampled_from(["", "A100", "V100M16|V100M32"]),
    spread=st.sampled_from([None, pb.Spread(), pb.Spread(topology_key="zone")]),
    queued_at_ms=int64s,
)


def plain(m: pb.Workload) -> Workload:
    """The obviously-correct conversion: the dataclass's own ``__init__``, every default spelled."""
    return Workload(
        id=m.id,
        scope_id=m.scope_id,
        request=dict(sorted((k, m.request[k]) for k in m.request)),
        replicas=m.replicas if m.replicas != 0 else 1,
        priority=m.priority,
        preemptible=m.preemptible if m.HasField("preemptible") else True,
        node_selector={k: m.node_selector[k] for k in m.node_selector},
        gpu_model=m.gpu_model,
        spread_key=m.spread.topology_key if m.HasField("spread") else "",
        queued_at_ms=m.queued_at_ms,
    )


@settings(max_examples=300)
@given(messages)
def test_workload_from_proto_equals_plain(m: pb.Workload) -> None:
    """Every field converts as the plain path does, requests held in name order."""
    fast, expected = convert.workload_from_proto(m), plain(m)
    assert fast == expected
    assert list(fast.request.items()) == list(expected.request.items())
    assert dict(fast.node_selector) == dict(expected.node_selector)


@settings(max_examples=50)
@given(st.lists(messages, max_size=5))
def test_workloads_from_proto_keeps_order(ms: list[pb.Workload]) -> None:
    """A request's workloads convert one by one, in order."""
    assert convert.workloads_from_proto(ms) == [plain(m) for m in ms]


@pytest.mark.parametrize(
    ("preemptible", "expected"),
    [
        pytest.param(None, True, id="absent means preemptible"),
        pytest.param(True, True, id="true"),
        pytest.param(False, False, id="explicit false"),
    ],
)
def test_preemptible_presence(preemptible: bool | None, expected: bool) -> None:
    """Only an explicit false makes a workload non-preemptible."""
    m = pb.Workload(id="w", scope_id="s", preemptible=preemptible)
    assert convert.workload_from_proto(m).preemptible is expected


def test_equal_requests_share_one_dict() -> None:
    """Workloads asking for the same amounts, in any wire order, share one request dict."""
    a = convert.workload_from_proto(pb.Workload(id="a", request={"gpu": 1000, "cpu": 2}))
    b = convert.workload_from_proto(pb.Workload(id="b", request={"cpu": 2, "gpu": 1000}))
    assert a.request is b.request
    assert list(a.request) == ["cpu", "gpu"]


def test_new_workload_is_the_dataclass_value() -> None:
    """``new_workload`` builds the value ``Workload(...)`` builds, and it stays frozen."""
    fields = ("w", "s", {"cpu": 1}, 2, 3, False, {"zone": "a"}, "A100", "zone", 7)
    built = new_workload(*fields)
    assert type(built) is Workload
    assert built == Workload(*fields)
    with pytest.raises(AttributeError):
        built.id = "x"  # type: ignore[misc]  # frozen on purpose
