"""The one table from error classes to gRPC status codes, and the rich error details.

Every ``StrataError`` subclass has a row in ``STATUS``; a test walks the exception tree and
fails when one does not. Each error becomes a ``google.rpc.Status`` carrying a
``google.rpc.ErrorInfo`` (reason in UPPER_SNAKE, domain ``strata.policy.v1``, the error's fields
as metadata) and, for ``InvalidArgument``, a ``google.rpc.BadRequest`` with one field violation
per bad field; ``ServerNotReady`` adds a ``google.rpc.RetryInfo``.

The details travel in a trailing header, and gRPC clients refuse a response whose headers pass
their metadata limit (8 KiB soft, 16 KiB hard by default: a 5,000-violation BadRequest was 44 KB
and reached clients as RESOURCE_EXHAUSTED "received metadata size exceeds hard limit"). So a
status is capped: the first ``MAX_VIOLATIONS`` violations, every text cut at ``MAX_TEXT``
characters, and the true count in ErrorInfo's ``violations`` metadata (with
``violations_shown`` when some are left out), so any default client can read every error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from strata_policy import errors

if TYPE_CHECKING:
    from grpc import aio

MAX_VIOLATIONS = 20
MAX_TEXT = 200

STATUS: dict[type[errors.StrataError], grpc.StatusCode] = {
    errors.StrataError: grpc.StatusCode.FAILED_PRECONDITION,
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.ClusterNotFound: grpc.StatusCode.NOT_FOUND,
    errors.GenerationConflict: grpc.StatusCode.ABORTED,
    errors.SizeLimitExceeded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.ServerNotReady: grpc.StatusCode.UNAVAILABLE,
    errors.InternalError: grpc.StatusCode.INTERNAL,
}


def code_for(exc: errors.StrataError) -> grpc.StatusCode:
    """The status code of an error's own class (not an ancestor's)."""
    return STATUS[type(exc)]


def to_status(exc: errors.StrataError) -> status_pb2.Status:
    """The rich ``google.rpc.Status`` for an error, capped to what any client can read."""
    code = code_for(exc)
    metadata = {key: _cut(value) for key, value in exc.metadata.items()}
    details: list[any_pb2.Any] = []
    if isinstance(exc, errors.InvalidArgument):
        shown = exc.violations[:MAX_VIOLATIONS]
        metadata["violations"] = str(len(exc.violations))
        if len(shown) < len(exc.violations):
            metadata["violations_shown"] = str(len(shown))
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=_cut(v.field), description=_cut(v.description)
                )
                for v in shown
            ]
        )
        details.append(_pack(bad))
    if isinstance(exc, errors.ServerNotReady):
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(round(exc.retry_after_seconds * 1000))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    info = error_details_pb2.ErrorInfo(reason=exc.reason, domain=errors.DOMAIN, metadata=metadata)
    return status_pb2.Status(
        code=getattr(code_pb2, code.name),
        message=_cut(exc.message, 5 * MAX_TEXT),
        details=[_pack(info), *details],
    )


def abort(context: grpc.ServicerContext, exc: errors.StrataError) -> NoReturn:
    """End the RPC with the error's status and details."""
    context.abort_with_status(rpc_status.to_status(to_status(exc)))
    raise AssertionError("abort_with_status returned")  # grpc raises; this line is unreachable


async def abort_with(context: aio.ServicerContext[object, object], status: grpc.Status) -> NoReturn:
    """End an asyncio-served RPC with a status built by ``grpc_status`` (``abort`` in a thread)."""
    await context.abort(status.code, status.details, status.trailing_metadata)
    raise AssertionError("abort returned")  # grpc raises; this line is unreachable


def _cut(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, marked when cut (ids can be long)."""
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _pack(
    message: error_details_pb2.ErrorInfo
    | error_details_pb2.BadRequest
    | error_details_pb2.RetryInfo,
) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed
