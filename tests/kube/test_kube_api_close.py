"""``HttpKubeApi.close()`` interrupts open watches, whatever state their readers are in."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from protocol_fake import FakeApiServer

from strata_policy.kube.api import HttpKubeApi, StreamBroken
from strata_policy.kube.testing import node

NODES = "/api/v1/nodes"


def _closed_by_reader(raw: Any) -> None:
    """The reader closed the stream (its ``finally``) and has not yet left ``_open``."""
    raw.close()


def _given_back(raw: Any) -> None:
    """The stream ended and its connection went back to the pool, reader not yet done."""
    raw.release_conn()


@pytest.mark.parametrize(
    "ended",
    [
        pytest.param(_closed_by_reader, id="closed by its reader"),
        pytest.param(_given_back, id="connection given back to the pool"),
    ],
)
def test_close_ignores_a_watch_that_ended_meanwhile(ended: Callable[[Any], None]) -> None:
    """A stream that ended between its reader's last read and its leaving the open set needs
    no interrupt: close() does not raise (kube sync stopping raced with a watch ending)."""
    fake = FakeApiServer()
    fake.put(NODES, node("n1", cpu="4", memory="8Gi"))
    with fake.serve() as url:
        api = HttpKubeApi.for_host(url)
        events = api.watch(NODES, "0", 30)
        assert next(events)["type"] == "ADDED"  # the watch is open and registered
        (raw,) = api._open
        ended(raw)
        api.close()
        events.close()
        assert api._open == set()


def test_close_interrupts_a_waiting_watch() -> None:
    """A reader waiting for the next event gets StreamBroken at once, not at its read timeout."""
    fake = FakeApiServer()
    fake.put(NODES, node("n1", cpu="4", memory="8Gi"))
    with fake.serve() as url:
        api = HttpKubeApi.for_host(url)
        events = api.watch(NODES, "0", 30)
        assert next(events)["type"] == "ADDED"
        broken: list[StreamBroken] = []

        def wait_for_the_next() -> None:
            try:
                next(events)
            except StreamBroken as exc:
                broken.append(exc)

        reader = threading.Thread(target=wait_for_the_next, daemon=True)
        reader.start()
        api.close()
        reader.join(timeout=20)  # a hang guard: a watch not interrupted waits 60 s (its timeout)
        assert broken, "the waiting reader was not interrupted"
        assert api._open == set()
