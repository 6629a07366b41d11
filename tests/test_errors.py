"""Every error class has a status row, and errors carry their details onto the wire."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2

from strata_policy import errors
from strata_policy.service.status import STATUS, to_status


def _subclasses(cls: type[errors.StrataError]) -> list[type[errors.StrataError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _subclasses(sub)
    return out


def test_every_error_class_has_a_status_row() -> None:
    """Walking the exception tree finds no class missing from the status table."""
    missing = [c.__name__ for c in _subclasses(errors.StrataError) if c not in STATUS]
    assert not missing


@pytest.mark.parametrize(
    ("exc", "code", "reason"),
    [
        pytest.param(
            errors.InvalidArgument.one("x", "bad"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
            id="invalid argument",
        ),
        pytest.param(
            errors.ClusterNotFound("c"), grpc.StatusCode.NOT_FOUND, "CLUSTER_NOT_FOUND", id="nf"
        ),
        pytest.param(
            errors.GenerationConflict("c", 1, 2),
            grpc.StatusCode.ABORTED,
            "GENERATION_MISMATCH",
            id="generation conflict",
        ),
        pytest.param(
            errors.SizeLimitExceeded("max_nodes", 3, 2),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "SIZE_LIMIT_EXCEEDED",
            id="size limit",
        ),
    ],
)
def test_status_carries_error_info(
    exc: errors.StrataError, code: grpc.StatusCode, reason: str
) -> None:
    """The status has the table's code and an ErrorInfo in domain strata.policy.v1."""
    status = to_status(exc)
    assert status.code == code.value[0]
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.reason, info.domain) == (reason, "strata.policy.v1")
    assert dict(info.metadata) == exc.metadata


def test_invalid_argument_carries_field_violations() -> None:
    """INVALID_ARGUMENT has a BadRequest with one violation per bad field, in order."""
    exc = errors.InvalidArgument(
        [errors.FieldViolation("a.b", "bad"), errors.FieldViolation("c", "worse")]
    )
    bad = error_details_pb2.BadRequest()
    assert to_status(exc).details[1].Unpack(bad)
    assert [(v.field, v.description) for v in bad.field_violations] == [
        ("a.b", "bad"),
        ("c", "worse"),
    ]
