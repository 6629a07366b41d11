"""Server lifecycle: build, warm up, serve, drain.

Health (``grpc.health.v1``) says NOT_SERVING until start-up is done — the journal restored and
every numba kernel compiled or loaded from cache and run once — then SERVING. On SIGTERM or
SIGINT it says NOT_SERVING again, waits ``drain_seconds`` so load balancers notice, and stops
gracefully, letting in-flight RPCs finish within ``grace_seconds``. Reflection is on so that
``grpcurl`` works without the proto files.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from concurrent import futures
from types import FrameType
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from strata.policy.v1 import policy_service_pb2 as svc

from strata_policy.engine import Engine
from strata_policy.kernels import warmup
from strata_policy.service.config import ServerConfig
from strata_policy.service.interceptors import ConcurrencyLimitInterceptor, LoggingInterceptor
from strata_policy.service.servicer import PolicyServicer, add_to_server

if TYPE_CHECKING:
    from strata_policy.service.health_port import HealthPort
    from strata_policy.service.metrics import Metrics
    from strata_policy.state.durable import SqliteJournal

log = structlog.get_logger("strata.server")
SERVICE_NAME = svc.DESCRIPTOR.services_by_name["PolicyService"].full_name


class Server:
    """A built, started server; ``stop`` drains it."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.health = health.HealthServicer()
        self.health_port = _health_port(config)
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.journal = _journal(config)
        self.metrics = _metrics(config)
        self.engine = Engine(limits=config.limits, journal=self.journal, observer=self.metrics)
        if self.metrics is not None:
            self.metrics.set_cluster_source(self.engine.clusters)
        # Logging first (outermost), so that calls auth turns away are logged and counted too.
        # Then the concurrency limit, so that refused calls are logged and counted as well.
        self.limiter = ConcurrencyLimitInterceptor(config.max_concurrent_rpcs)
        interceptors: list[grpc.ServerInterceptor[Any, Any]] = [
            LoggingInterceptor(self.metrics),
            self.limiter,
        ]
        auth = _auth(config)
        if auth is not None:
            interceptors.append(auth)
        self.grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="rpc"),
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", config.max_message_bytes),
                ("grpc.max_send_message_length", config.max_message_bytes),
                # gRPC sets SO_REUSEPORT by default: a second server on the same port would
                # start and silently take half the connections, splitting the clusters' state
                # between two processes. Refuse the port instead.
                ("grpc.so_reuseport", 0),
            ],
            # gRPC's own limit is only a backstop (it refuses without details), far above ours.
            maximum_concurrent_rpcs=config.max_concurrent_rpcs * 4 + 64,
        )
        add_to_server(PolicyServicer(self.engine), self.grpc)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), self.grpc
        )
        credentials = _credentials(config)
        try:
            if credentials is None:
                self.port = self.grpc.add_insecure_port(config.address)
            else:
                self.port = self.grpc.add_secure_port(config.address, credentials)
        except RuntimeError as exc:  # grpcio's "Failed to bind to address ..."
            raise OSError(f"cannot listen on {config.address} (in use?)") from exc
        if self.port == 0:
            raise OSError(f"cannot listen on {config.address}")

    def start(self) -> None:
        """Listen, restore state, warm the kernels, then say SERVING."""
        self.grpc.start()
        log.info("listening", address=self.config.address, port=self.port, pid=os.getpid())
        if self.health_port is not None:
            self.health_port.start()
            log.info("health", address=self.config.health_address, port=self.health_port.port)
        if self.journal is not None:
            restored = 0
            for change in self.journal.restore():
                self.engine.restore(change)
                restored += 1
            for problem in self.journal.problems:
                log.warning("journal", problem=problem)
            log.info("state restored", changes=restored, clusters=len(self.engine.cluster_ids()))
        started = time.perf_counter()
        warmup()
        log.info("kernels warm", seconds=round(time.perf_counter() - started, 3))
        # Everything alive now (modules, compiled kernels, restored state) lives as long as the
        # server: keep it out of the cyclic collector's full passes, which otherwise walk it
        # all (80-130 ms each, landing inside whichever RPC triggers them).
        gc.freeze()
        if self.metrics is not None and self.config.metrics_address:
            self.metrics.start_http(self.config.metrics_address)
            log.info("metrics", address=self.config.metrics_address)
        self._set_health(health_pb2.HealthCheckResponse.SERVING)
        log.info("serving", service=SERVICE_NAME)

    def stop(self) -> None:
        """NOT_SERVING, wait for load balancers, finish in-flight RPCs, close the journal."""
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        log.info("draining", drain_seconds=self.config.drain_seconds)
        if self.config.drain_seconds > 0:
            threading.Event().wait(self.config.drain_seconds)
        self.grpc.stop(self.config.grace_seconds).wait()
        if self.health_port is not None:
            self.health_port.stop()
        if self.journal is not None:
            self.journal.close()
        log.info("stopped")

    def wait(self) -> None:
        """Block until the server stops."""
        self.grpc.wait_for_termination()

    def _set_health(self, status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        self.health.set("", status)
        self.health.set(SERVICE_NAME, status)
        if self.health_port is not None:
            self.health_port.set(status)


def serve(config: ServerConfig) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code."""
    server = Server(config)
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal", signal=signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    stopping.wait()
    server.stop()
    return 0


def _credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    if not config.tls_cert and not config.tls_key:
        return None
    from strata_policy.service.tls import server_credentials  # noqa: PLC0415  # only with TLS

    return server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca or None)


def _auth(config: ServerConfig) -> grpc.ServerInterceptor[Any, Any] | None:
    if not config.token_file:
        return None
    from strata_policy.service.auth import TokenAuthInterceptor  # noqa: PLC0415  # only with tokens

    return TokenAuthInterceptor.from_file(config.token_file)


def _journal(config: ServerConfig) -> SqliteJournal | None:
    if not config.state_dir:
        return None
    from strata_policy.state.durable import SqliteJournal  # noqa: PLC0415  # only with a state dir

    return SqliteJournal(config.state_dir, every=config.checkpoint_every)


def _metrics(config: ServerConfig) -> Metrics | None:
    if not config.metrics_address:
        return None
    from strata_policy.service.metrics import Metrics  # noqa: PLC0415  # only with metrics on

    return Metrics.from_config(config)


def _health_port(config: ServerConfig) -> HealthPort | None:
    if not config.health_address:
        return None
    from strata_policy.service.health_port import HealthPort  # noqa: PLC0415  # only when asked

    return HealthPort(config.health_address, ("", SERVICE_NAME))
