"""What a PolicyService call carries from the loop to its servicer method (``service.calls``).

``Undecodable`` stands for a request whose bytes did not parse, so that the call's own steps
(status, log, metrics) answer it; ``Capture`` is the context a servicer method gets when it runs
on an engine worker, where gRPC's asyncio context cannot be used, or on the loop's fast path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc

from strata_policy.errors import InvalidArgument, StrataError

if TYPE_CHECKING:
    from grpc import aio

    Context = aio.ServicerContext[Any, Any]


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A request whose bytes did not parse; ``error`` says why."""

    error: Exception

    def as_error(self, message_name: str) -> StrataError:
        """The error the call ends with: the decoder's own, or INVALID_ARGUMENT."""
        if isinstance(self.error, StrataError):
            return self.error
        why = str(self.error) or type(self.error).__name__
        return InvalidArgument.one(message_name, f"the request's bytes do not parse ({why})")


def tolerant(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """``deserialize`` that answers ``Undecodable`` instead of raising, so bad bytes reach the
    call's own steps (status, log, metrics) rather than gRPC's generic INTERNAL."""

    def read(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception as exc:  # any parse failure is the client's bad bytes
            return Undecodable(exc)

    return read


class Aborted(Exception):
    """Raised on the worker by ``Capture.abort_with_status``; ended on the loop."""

    def __init__(self, status: grpc.Status) -> None:
        super().__init__(status.details)
        self.status = status


class Capture:
    """The context a servicer method gets on a worker thread: ``status.abort`` ends the method
    with ``Aborted``, whose status the loop then sends (an aio context cannot be used there).

    It also carries what the servicer reads of the caller for idempotency
    (``service.identity``): the call's metadata and auth context, copied on the loop, and only
    for a call with a ``request_id`` (every other call shares the empty ``CAPTURE``).


    ``on_loop`` tells a method that it runs on the event loop (``INLINE``): a method whose cost
    may turn out to grow with the cluster (UpdateSnapshot's plain path) raises
    ``engine.NotInPlace`` there, and the gate hands the call to a worker instead."""

    __slots__ = ("_auth", "_metadata", "on_loop")

    def __init__(
        self,
        metadata: tuple[tuple[str, str | bytes], ...] = (),
        auth: Mapping[str, Any] | None = None,
        *,
        on_loop: bool = False,
    ) -> None:
        self._metadata = metadata
        self._auth: Mapping[str, Any] = auth or {}
        self.on_loop = on_loop

    @classmethod
    def of(cls, request: Any, context: Context, *, on_loop: bool = False) -> Capture:
        """What a servicer method needs of ``context`` to answer ``request``."""
        if not getattr(request, "request_id", ""):
            return CAPTURE_ON_LOOP if on_loop else CAPTURE
        metadata = tuple(context.invocation_metadata() or ())
        return cls(metadata, context.auth_context(), on_loop=on_loop)

    def abort_with_status(self, status: grpc.Status) -> None:
        """Stop the method; the loop answers with ``status``."""
        raise Aborted(status)

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        """The call's metadata (``authorization`` among it), as gRPC's context gives it."""
        return self._metadata

    def auth_context(self) -> Mapping[str, Any]:
        """The call's auth context (the client certificate's names under mutual TLS)."""
        return self._auth


CAPTURE = Capture()
CAPTURE_ON_LOOP = Capture(on_loop=True)
