"""Server lifecycle: build, warm up, serve, drain.

Threading model: gRPC runs on one asyncio event loop (``grpc.aio``) in its own thread; the
engine runs on a pool of ``--workers`` threads (its kernels release the GIL). Health, reflection
and the steps every PolicyService call goes through before the engine (``service.calls``) run on
the loop, so an idle stream or a flood of bad calls costs memory, never an engine worker, and
Health/Check answers while every worker is busy.

The port is open from the start. Health (``grpc.health.v1``) says NOT_SERVING until start-up is
done — the journal restored and every numba kernel compiled or loaded from cache and run once —
and PolicyService calls meanwhile are answered UNAVAILABLE at once, with a RetryInfo. A log line
reports the warm-up's progress (the first start compiles for about a minute). Health/Check also
says NOT_SERVING while every concurrency slot is taken. On SIGTERM or SIGINT it says NOT_SERVING
again, waits ``drain_seconds`` so load balancers notice, and stops gracefully, letting in-flight
RPCs finish within ``grace_seconds``. Reflection is on, for the services and the error-detail
types (``google.rpc.*``), so that ``grpcurl`` and ``buf curl`` work without the proto files.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import threading
import time
from collections.abc import Coroutine
from concurrent import futures
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import structlog
from google.rpc import error_details_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from strata_policy.engine import Engine
from strata_policy.kernels import warmup
from strata_policy.service.calls import INLINE, CallGate, Slots, dry_runs_only
from strata_policy.service.config import ServerConfig
from strata_policy.service.servicer import SERVICE, PolicyServicer, method_handlers

if TYPE_CHECKING:
    from strata_policy.service.auth import TokenTable
    from strata_policy.service.health_port import HealthPort
    from strata_policy.service.metrics import Metrics
    from strata_policy.state.durable import SqliteJournal

log = structlog.get_logger("strata.server")
SERVICE_NAME = SERVICE.full_name
# Error-detail types a status can carry (``status.to_status``): reflection serves any type of
# the default pool, where importing error_details_pb2 puts them, so clients that resolve a
# status's details over reflection (grpcurl) decode them.
DETAIL_TYPES = tuple(
    error_details_pb2.DESCRIPTOR.message_types_by_name[name].full_name
    for name in ("ErrorInfo", "BadRequest", "RetryInfo")
)
WARMUP_LOG_SECONDS = 5.0
MAX_STREAMS_PER_CONNECTION = 1024
T = TypeVar("T")


class ServerHealth(health.aio.HealthServicer):  # type: ignore[misc,name-defined]  # untyped
    """The standard health service, except that Check says NOT_SERVING while every concurrency
    slot is taken: the server cannot take work, and a readiness probe should say so."""

    def __init__(self, slots: Slots) -> None:
        super().__init__()
        self.slots = slots

    async def Check(  # noqa: N802  # the gRPC method's name
        self, request: health_pb2.HealthCheckRequest, context: Any
    ) -> health_pb2.HealthCheckResponse:
        response: health_pb2.HealthCheckResponse = await super().Check(request, context)
        if self.slots.full and response.status == health_pb2.HealthCheckResponse.SERVING:
            response.status = health_pb2.HealthCheckResponse.NOT_SERVING
        return response


class Server:
    """A built server (port bound, answering UNAVAILABLE until ``start`` is done)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        credentials = _credentials(config)  # before anything starts: a bad TLS setup is fatal
        tokens = _tokens(config)
        self.journal = _journal(config)
        self.metrics = _metrics(config)
        self.engine = Engine(limits=config.limits, journal=self.journal, observer=self.metrics)
        if self.metrics is not None:
            self.metrics.set_cluster_source(self.engine.clusters)
        self.executor = futures.ThreadPoolExecutor(config.workers, thread_name_prefix="engine")
        self.slots = Slots(config.max_concurrent_rpcs)
        self.health_port = _health_port(config, self.slots)
        self.gate = CallGate(
            method_handlers(PolicyServicer(self.engine)),
            SERVICE,
            self.executor,
            self.slots,
            observer=self.metrics,
            tokens=tokens,
            inline=INLINE if self.journal is None else dry_runs_only(INLINE),
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="grpc", daemon=True)
        self._thread.start()
        try:
            self.health, self._aio, self.port = self._on_loop(self._build(credentials))
        except BaseException:
            self._close_loop()
            if self.health_port is not None:
                self.health_port.stop(0)
            if self.journal is not None:
                self.journal.close()
            raise
        self.grpc = LoopServer(self)

    async def _build(
        self, credentials: grpc.ServerCredentials | None
    ) -> tuple[ServerHealth, grpc.aio.Server, int]:
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self.config.max_message_bytes),
                ("grpc.max_send_message_length", self.config.max_message_bytes),
                # Streams per connection: idle ones cost memory only, but not without bound.
                ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
                # gRPC sets SO_REUSEPORT by default: a second server on the same port would
                # start and silently take half the connections, splitting the clusters' state
                # between two processes. Refuse the port instead.
                ("grpc.so_reuseport", 0),
            ],
        )
        self.gate.add_to(server)
        servicer = ServerHealth(self.slots)
        for name in ("", SERVICE_NAME):
            await servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
        try:
            if credentials is None:
                port = server.add_insecure_port(self.config.address)
            else:
                port = server.add_secure_port(self.config.address, credentials)
        except RuntimeError as exc:  # grpcio's "Failed to bind to address ..."
            raise OSError(
                f"cannot listen on {self.config.address} (in use, or not a host:port of this "
                "machine?)"
            ) from exc
        if port == 0:
            raise OSError(f"cannot listen on {self.config.address}")
        await server.start()
        return servicer, server, port

    def start(self) -> None:
        """Restore state, warm the kernels, then say SERVING (calls meanwhile: UNAVAILABLE)."""
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
        _warm_up()
        # Everything alive now (modules, compiled kernels, restored state) lives as long as the
        # server: keep it out of the cyclic collector's full passes, which otherwise walk it
        # all (80-130 ms each, landing inside whichever RPC triggers them).
        gc.freeze()
        if self.metrics is not None and self.config.metrics_address:
            self.metrics.start_http(self.config.metrics_address)
            log.info("metrics", address=self.config.metrics_address)
        self.gate.ready = True
        self._set_health(health_pb2.HealthCheckResponse.SERVING)
        log.info("serving", service=SERVICE_NAME, workers=self.config.workers)

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
        if self.health_port is not None:
            self.health_port.set(status)
        for name in ("", SERVICE_NAME):
            self._on_loop(self.health.set(name, status))

    def _on_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the server's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self.executor.shutdown(wait=True, cancel_futures=True)


class LoopServer:
    """``grpc.Server``'s stop and wait, for a server whose gRPC runs on its own loop thread:
    ``stop(grace)`` ends the calls (within ``grace`` seconds), the engine workers and the loop,
    and returns an event set when all are done."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    def stop(self, grace: float | None) -> threading.Event:
        """Stop serving; the event is set once everything has stopped."""
        with self._lock:
            if not self._stopped.is_set():
                server = self._server
                server._on_loop(server._aio.stop(grace))  # the owner's parts
                server._close_loop()
                server.gate.rpc_log.flush()  # the last calls' summary (the loop is gone)
                self._stopped.set()
        return self._stopped

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        """Block until ``stop`` is done (or ``timeout``); whether it is."""
        return self._stopped.wait(timeout)


def _warm_up() -> None:
    """Compile or load every kernel, logging progress while it runs (a first start compiles for
    about a minute; later starts load numba's cache in seconds)."""
    started = time.perf_counter()
    done = threading.Event()

    def progress() -> None:
        while not done.wait(WARMUP_LOG_SECONDS):
            log.info(
                "warming kernels",
                seconds=round(time.perf_counter() - started, 1),
                note="first start compiles for about a minute; calls get UNAVAILABLE meanwhile",
            )

    log.info("warming kernels", seconds=0.0)
    ticker = threading.Thread(target=progress, name="warmup-log", daemon=True)
    ticker.start()
    try:
        warmup()
    finally:
        done.set()
        ticker.join()
    log.info("kernels warm", seconds=round(time.perf_counter() - started, 3))


class _StopDuringStart(BaseException):
    """SIGTERM/SIGINT before the server was SERVING: start-up is abandoned where it stands."""


def serve(config: ServerConfig) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code.

    A signal during start-up (restoring the journal, compiling the kernels: a minute on a first
    start) stops at once instead of after the warm-up: there is nothing to drain yet, and a pod
    deleted during its first start must not wait for a compile it will throw away. The handler
    raises into the main thread, which is running the start-up's Python code (numba compiles in
    Python between LLVM passes), so it stops within a pass.
    """
    server = Server(config)
    stopping = threading.Event()
    started = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # No logging here: the handler runs between two bytecodes of the main thread, which may
        # be inside the log writer's lock (a non-reentrant lock: logging would deadlock).
        received.append(signal.Signals(signum).name)
        stopping.set()
        if not started.is_set():
            raise _StopDuringStart

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server.start()
        started.set()
    except BaseException as exc:  # a damaged journal, say: close the port and the journal first
        started.set()  # a second signal while closing must not interrupt the close
        server.grpc.stop(0)
        if server.journal is not None:
            server.journal.close()
        if isinstance(exc, _StopDuringStart):
            log.info("signal", signal=received[0])
            log.info("stopped during start-up")
            return 0
        raise
    stopping.wait()
    log.info("signal", signal=received[0])
    server.stop()
    return 0


def _credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    if not (config.tls_cert or config.tls_key or config.tls_client_ca):
        return None
    from strata_policy.service.tls import server_credentials  # noqa: PLC0415  # only with TLS

    return server_credentials(config.tls_cert, config.tls_key, config.tls_client_ca or None)


def _tokens(config: ServerConfig) -> TokenTable | None:
    if not config.token_file:
        return None
    from strata_policy.service.auth import TokenTable  # noqa: PLC0415  # only with tokens

    return TokenTable.from_file(config.token_file)


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


def _health_port(config: ServerConfig, slots: Slots) -> HealthPort | None:
    if not config.health_address:
        return None
    from strata_policy.service.health_port import HealthPort  # noqa: PLC0415  # only when asked

    return HealthPort(config.health_address, ("", SERVICE_NAME), busy=lambda: slots.full)
