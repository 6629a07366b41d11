"""A servicer context for calling servicer methods directly, without a server."""

from __future__ import annotations

from typing import Any


class Aborted(Exception):
    """What the fake context raises on abort."""


class Context:
    """Captures the status a handler aborts with; an anonymous caller (no metadata, no peer
    certificate), as ``service.identity`` reads it."""

    status: Any = None

    def abort_with_status(self, status: Any) -> None:
        self.status = status
        raise Aborted

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        """No metadata."""
        return ()

    def auth_context(self) -> dict[str, list[bytes]]:
        """No certificate."""
        return {}
