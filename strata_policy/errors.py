"""The one exception tree. Errors carry fields, not just text; denials are values, not errors.

::

    StrataError                      reason (UPPER_SNAKE), message, metadata
    ├── InvalidArgument              violations: (field path, description) pairs
    │   └── RequestIdReused          request_id: a committed id sent again with another body
    ├── ClusterNotFound              cluster_id
    ├── GenerationConflict           expected, actual
    ├── SizeLimitExceeded            limit, value, maximum
    ├── Unauthenticated
    ├── PermissionDenied             cluster_id
    ├── ServerNotReady               retry_after_seconds: answered UNAVAILABLE with RetryInfo
    ├── StorageUnavailable           cluster_id, cause: the journal refused a write (retryable)
    └── InternalError                a bug: logged with its traceback, answered as INTERNAL

``strata_policy.service.status`` maps every class to a gRPC status code in one table, with
``google.rpc.ErrorInfo`` (domain ``strata.policy.v1``) and, for ``InvalidArgument``,
``google.rpc.BadRequest`` field violations. A test fails when a class has no row there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DOMAIN = "strata.policy.v1"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field: its path (``snapshot.nodes[3].capacity["cpu"]``) and what is wrong."""

    field: str
    description: str


class StrataError(Exception):
    """Root of every error the engine raises on purpose."""

    reason = "STRATA_ERROR"

    def __init__(self, message: str, *, metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by fields, not by calling ``__init__`` again with the message: subclasses
        take other arguments, and an error raised in a ``simulate --jobs`` worker process must
        reach the parent intact (else the pool breaks and the cause is lost)."""
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[StrataError], args: tuple[Any, ...], state: dict[str, Any]) -> StrataError:
    """The error ``StrataError.__reduce__`` took apart, without running its ``__init__``."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InvalidArgument(StrataError):
    """A request that can never succeed as written; nothing was changed."""

    reason = "INVALID_ARGUMENT"

    def __init__(self, violations: list[FieldViolation] | tuple[FieldViolation, ...]) -> None:
        self.violations = tuple(violations)
        shown = "; ".join(f"{v.field}: {v.description}" for v in self.violations[:5])
        more = len(self.violations) - 5
        suffix = f" (+{more} more)" if more > 0 else ""
        super().__init__(
            f"invalid request: {shown}{suffix}",
            metadata={"violations": str(len(self.violations))},
        )

    @classmethod
    def one(cls, field: str, description: str) -> InvalidArgument:
        """An error with a single violation."""
        return cls([FieldViolation(field, description)])


class ClusterNotFound(StrataError):
    """The named cluster does not exist on this server."""

    reason = "CLUSTER_NOT_FOUND"

    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        super().__init__(f"cluster {cluster_id!r} not found", metadata={"cluster_id": cluster_id})


class GenerationConflict(StrataError):
    """``expected_generation`` did not match; the caller should re-read and retry."""

    reason = "GENERATION_MISMATCH"

    def __init__(self, cluster_id: str, expected: int, actual: int) -> None:
        self.cluster_id, self.expected, self.actual = cluster_id, expected, actual
        super().__init__(
            f"cluster {cluster_id!r} is at generation {actual}, not {expected}",
            metadata={"cluster_id": cluster_id, "expected": str(expected), "actual": str(actual)},
        )


class SizeLimitExceeded(StrataError):
    """A configured size limit (nodes, batch, clusters...) would be exceeded."""

    reason = "SIZE_LIMIT_EXCEEDED"

    def __init__(self, limit: str, value: int, maximum: int) -> None:
        self.limit, self.value, self.maximum = limit, value, maximum
        super().__init__(
            f"{limit} is {value}, above the maximum {maximum}",
            metadata={"limit": limit, "value": str(value), "maximum": str(maximum)},
        )


class Unauthenticated(StrataError):
    """No credentials, or credentials the server does not know."""

    reason = "UNAUTHENTICATED"


class PermissionDenied(StrataError):
    """Known credentials that do not allow this call on this cluster."""

    reason = "PERMISSION_DENIED"

    def __init__(self, message: str, cluster_id: str = "") -> None:
        self.cluster_id = cluster_id
        super().__init__(message, metadata={"cluster_id": cluster_id})


class RequestIdReused(InvalidArgument):
    """A ``request_id`` this caller already committed, sent again with a different body.

    Answering the first call's result would silently apply the wrong answer to the new request,
    and running it would break the promise that an id commits once (DESIGN §4).
    """

    reason = "REQUEST_ID_REUSED"

    def __init__(self, request_id: str, method: str) -> None:
        self.request_id, self.method = request_id, method
        super().__init__(
            [
                FieldViolation(
                    "request_id",
                    f"already used for a different {method} request; "
                    "a retry must send the same body, a new request a new id",
                )
            ]
        )
        self.metadata.update(request_id=request_id, method=method)


class StorageUnavailable(StrataError):
    """The journal refused a write (disk full, read-only, I/O error): nothing was changed.

    Retryable: the cluster's state, generation and journal are exactly as before the call, so
    the same request (same ``request_id``) can be sent again once storage recovers.
    """

    reason = "STORAGE_UNAVAILABLE"

    def __init__(self, cluster_id: str, cause: str) -> None:
        self.cluster_id, self.cause = cluster_id, cause
        super().__init__(
            f"cluster {cluster_id!r}: the change could not be made durable, nothing was "
            f"changed; retry later ({cause})",
            metadata={"cluster_id": cluster_id, "cause": cause},
        )


class InternalError(StrataError):
    """An unexpected failure inside the engine; the transaction was rolled back."""

    reason = "INTERNAL"


class ServerNotReady(StrataError):
    """The server is starting (journal restore, kernel warm-up) and takes no calls yet.

    Answered at once as UNAVAILABLE with a ``google.rpc.RetryInfo`` so that clients retry after
    ``retry_after_seconds`` instead of waiting out the warm-up on an open call.
    """

    reason = "SERVER_NOT_READY"

    def __init__(self, retry_after_seconds: float) -> None:
        self.retry_after_seconds = retry_after_seconds
        super().__init__(
            f"the server is starting; retry in {retry_after_seconds:g} s",
            metadata={"retry_after_seconds": f"{retry_after_seconds:g}"},
        )
