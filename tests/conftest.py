"""Shared fixtures: one in-process gRPC server per session, a client, and a fresh engine."""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck, settings

from strata_policy.engine import Engine
from strata_policy.service.client import Client
from strata_policy.service.config import ServerConfig
from strata_policy.service.server import Server

# Engine and RPC logs go to the real stderr at WARNING, so tests that read stdout see only what
# the code under test prints (the server's own log lines are tested through a subprocess).
structlog.configure(
    processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
    wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    logger_factory=structlog.PrintLoggerFactory(sys.__stderr__),
    cache_logger_on_first_use=False,
)
settings.register_profile(
    "strata", deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
settings.load_profile("strata")


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """A started server on a free loopback port (kernels warm, health SERVING)."""
    srv = Server(ServerConfig(address="127.0.0.1:0", workers=8))
    srv.start()
    yield srv
    srv.grpc.stop(0)


@pytest.fixture(scope="session")
def client(server: Server) -> Iterator[Client]:
    """A client of the session server."""
    c = Client(f"127.0.0.1:{server.port}", timeout=30)
    yield c
    c.close()


@pytest.fixture
def cluster_id() -> str:
    """A cluster id no other test uses."""
    return f"c-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def engine() -> Engine:
    """A fresh in-memory engine with a fixed clock."""
    return Engine(clock=lambda: 1_000)
