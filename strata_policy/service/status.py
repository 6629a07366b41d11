"""The one table from error classes to gRPC status codes, and the rich error details.

Every ``StrataError`` subclass has a row in ``STATUS``; a test walks the exception tree and
fails when one does not. Each error becomes a ``google.rpc.Status`` carrying a
``google.rpc.ErrorInfo`` (reason in UPPER_SNAKE, domain ``strata.policy.v1``, the error's fields
as metadata) and, for ``InvalidArgument``, a ``google.rpc.BadRequest`` with one field violation
per bad field.
"""

from __future__ import annotations

from typing import NoReturn

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from strata_policy import errors

STATUS: dict[type[errors.StrataError], grpc.StatusCode] = {
    errors.StrataError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.RequestIdReused: grpc.StatusCode.INVALID_ARGUMENT,
    errors.ClusterNotFound: grpc.StatusCode.NOT_FOUND,
    errors.GenerationConflict: grpc.StatusCode.ABORTED,
    errors.SizeLimitExceeded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.StorageUnavailable: grpc.StatusCode.UNAVAILABLE,
    errors.InternalError: grpc.StatusCode.INTERNAL,
}


def code_for(exc: errors.StrataError) -> grpc.StatusCode:
    """The status code of an error's own class (not an ancestor's)."""
    return STATUS[type(exc)]


def to_status(exc: errors.StrataError) -> status_pb2.Status:
    """The rich ``google.rpc.Status`` for an error."""
    code = code_for(exc)
    info = error_details_pb2.ErrorInfo(
        reason=exc.reason, domain=errors.DOMAIN, metadata=exc.metadata
    )
    details = [_pack(info)]
    if isinstance(exc, errors.InvalidArgument):
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=v.field, description=v.description
                )
                for v in exc.violations
            ]
        )
        details.append(_pack(bad))
    return status_pb2.Status(
        code=getattr(code_pb2, code.name), message=exc.message, details=details
    )


def abort(context: grpc.ServicerContext, exc: errors.StrataError) -> NoReturn:
    """End the RPC with the error's status and details."""
    context.abort_with_status(rpc_status.to_status(to_status(exc)))
    raise AssertionError("abort_with_status returned")  # grpc raises; this line is unreachable


def _pack(message: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed
