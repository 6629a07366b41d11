"""Decisions to protobuf: every part of a result reaches the wire, and only what is set."""

from __future__ import annotations

import pytest
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
    convert.add_results(response.results, results)
    assert list(response.results) == [convert.result_to_proto(r) for r in results]
    assert [r.workload_id for r in response.results] == ["w"] * len(CASES)
