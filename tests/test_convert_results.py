"""Decisions to protobuf: every part of a result reaches the wire, and only what is set."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from message_servicer import add_result, add_results
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import (
    Decision,
    Placement,
    Reason,
    ReasonCode,
    Victim,
    VictimReason,
    WorkloadResult,
)
from strata_policy.service import convert
from strata_policy.service.result_encoder import response_bytes

CASES = [
    pytest.param(
        WorkloadResult("w", Decision.ADMITTED),
        pb.WorkloadResult(workload_id="w", decision=pb.DECISION_ADMITTED),
        id="admitted, nothing else",
    ),
    pytest.param(
        WorkloadResult(
            "w",
            Decision.PLACED,
            placements=(Placement("n1", (0, 3)), Placement("n2")),
            borrowed={"gpu": 1000, "cpu": 2},
            score=87.5,
        ),
        pb.WorkloadResult(
            workload_id="w",
            decision=pb.DECISION_PLACED,
            placements=[pb.Placement(node_id="n1", gpu_devices=[0, 3]), pb.Placement(node_id="n2")],
            borrowed={"gpu": 1000, "cpu": 2},
            score=87.5,
        ),
        id="placed on two nodes, devices on one, borrowing",
    ),
    pytest.param(
        WorkloadResult(
            "w",
            Decision.UNPLACED,
            reasons=(Reason(ReasonCode.NODES_UNFIT, "0/2 nodes fit", node_counts={"cpu": 2}),),
            explanation="0/2 nodes fit: 2 insufficient cpu",
        ),
        pb.WorkloadResult(
            workload_id="w",
            decision=pb.DECISION_UNPLACED,
            reasons=[
                pb.Reason(code="NODES_UNFIT", message="0/2 nodes fit", node_counts={"cpu": 2})
            ],
            explanation="0/2 nodes fit: 2 insufficient cpu",
        ),
        id="unplaced with reasons and explanation",
    ),
    pytest.param(
        WorkloadResult(
            "w",
            Decision.NEEDS_RECLAIM,
            victims=(Victim("v", "t", VictimReason.RECLAIM_BORROWED, {"gpu": 1000}, 2),),
        ),
        pb.WorkloadResult(
            workload_id="w",
            decision=pb.DECISION_NEEDS_RECLAIM,
            victims=[
                pb.Victim(
                    workload_id="v",
                    scope_id="t",
                    reason=pb.VICTIM_REASON_RECLAIM_BORROWED,
                    freed={"gpu": 1000},
                    priority=2,
                )
            ],
        ),
        id="needs reclaim with a victim",
    ),
]


@pytest.mark.parametrize(("result", "expected"), CASES)
def test_result_to_proto(result: WorkloadResult, expected: pb.WorkloadResult) -> None:
    """One result converts field for field."""
    assert convert.result_to_proto(result) == expected


def test_add_results_appends_in_order() -> None:
    """A batch's results are appended in order, each equal to its single conversion."""
    results = [p.values[0] for p in CASES if isinstance(p.values[0], WorkloadResult)]
    response = svc.PlaceResponse()
    add_results(response, results)
    assert list(response.results) == [convert.result_to_proto(r) for r in results]
    assert [r.workload_id for r in response.results] == ["w"] * len(CASES)


def test_admit_and_place_responses_number_results_alike() -> None:
    """The results field has one number in both responses (its key bytes are shared)."""
    admit = svc.AdmitResponse.DESCRIPTOR.fields_by_name["results"]
    place = svc.PlaceResponse.DESCRIPTOR.fields_by_name["results"]
    assert (admit.number, admit.type) == (place.number, place.type)


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
int64s = st.integers(-(2**63), 2**63 - 1)
amounts = st.dictionaries(st.sampled_from(["cpu", "gpu", "memory", "rdma", "é"]), int64s)
placements = st.builds(
    Placement,
    node_id=st.sampled_from(["", "n1", "n2", "nœud-3"]),
    gpu_devices=st.lists(st.integers(0, 2**31 - 1), max_size=3).map(tuple),
)
reasons = st.builds(Reason, code=st.sampled_from(list(ReasonCode)), message=texts)
victims = st.builds(
    Victim,
    workload_id=texts,
    scope_id=texts,
    reason=st.sampled_from(list(VictimReason)),
    freed=amounts,
    priority=st.integers(-(2**31), 2**31 - 1),
)
results = st.builds(
    WorkloadResult,
    workload_id=texts,
    decision=st.sampled_from(list(Decision)),
    placements=st.lists(placements, max_size=3).map(tuple),
    reasons=st.lists(reasons, max_size=1).map(tuple) | st.just(()),
    borrowed=amounts,
    victims=st.lists(victims, max_size=1).map(tuple) | st.just(()),
    score=st.floats(allow_nan=False) | st.sampled_from([0.0, -0.0, math.inf, 87.5]),
    explanation=texts,
)


@settings(max_examples=300)
@given(st.lists(results, max_size=6), st.sampled_from([svc.AdmitResponse, svc.PlaceResponse]))
def test_add_results_equals_field_by_field(
    batch: list[WorkloadResult], response_type: type[svc.AdmitResponse | svc.PlaceResponse]
) -> None:
    """Wire-written results give the message and the bytes the field-by-field path gives."""
    expected = response_type(generation=3)
    for r in batch:
        add_result(expected.results, r)
    for _ in range(2):  # the second time from the cached fragments
        response = response_type(generation=3)
        add_results(response, batch)
        assert response == expected
        assert response.SerializeToString() == expected.SerializeToString()
        assert [list(r.borrowed.items()) for r in response.results] == [
            list(r.borrowed.items()) for r in expected.results
        ]


@settings(max_examples=300)
@given(st.lists(results, max_size=6), st.sampled_from([0, 3, 2**40]))
def test_response_bytes_equal_the_serialized_response(
    batch: list[WorkloadResult], generation: int
) -> None:
    """The Place handler's written response is the bytes gRPC serializes from the message."""
    batch = batch + batch[::-1]  # results sharing their mappings, back to back
    expected = svc.PlaceResponse(generation=generation)
    add_results(expected, batch)
    for _ in range(2):  # the second time from the cached fragments
        assert response_bytes(generation, batch) == expected.SerializeToString()
