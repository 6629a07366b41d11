"""A plaintext, health-only gRPC listener for probes (``--health-address``).

Kubernetes' native ``grpc:`` probes speak plaintext and cannot present a client certificate, so
they cannot check a server whose only port has TLS (or mutual TLS); and a sidecar that binds its
API to ``127.0.0.1`` cannot be probed by the kubelet, which connects to the pod IP. This listener
serves only ``grpc.health.v1.Health`` (Check and Watch), with the same statuses as the API port,
on its own address (``0.0.0.0:8081`` in the manifests) and its own two threads: probes never wait
behind API calls, and the port exposes nothing but SERVING / NOT_SERVING.

The statuses are mirrored, not shared: the server calls ``set`` whenever it changes its own
health (start-up done, draining), so this module depends on nothing of the server's threading
model. Like the API port, Check says NOT_SERVING while ``busy()`` (every concurrency slot
taken): readiness should drop a pod that cannot take work. One more name, ``liveness``, ignores
both: it is SERVING while this listener runs, so a liveness probe restarts a process that is
gone or wedged, never one that is merely busy or still warming up.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

# Check is answered from a dict; a Watch stream holds a thread only while it waits, so two
# threads keep Check answering with one Watch open, and more streams queue instead of piling up.
THREADS = 2
LIVENESS = "liveness"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class _ProbeHealth(health.HealthServicer):
    """The standard servicer, with Check turned NOT_SERVING while ``busy()`` (not ``liveness``)."""

    def __init__(self, busy: Callable[[], bool]) -> None:
        super().__init__()
        self.busy = busy

    def Check(  # noqa: N802  # the gRPC method's name
        self, request: health_pb2.HealthCheckRequest, context: Any
    ) -> health_pb2.HealthCheckResponse:
        response: health_pb2.HealthCheckResponse = super().Check(request, context)
        if request.service != LIVENESS and response.status == SERVING and self.busy():
            response.status = NOT_SERVING
        return response


class HealthPort:
    """Health, alone, on a plaintext address; ``set`` mirrors the API port's statuses."""

    def __init__(
        self,
        address: str,
        services: tuple[str, ...] = ("",),
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self.address = address
        self.services = services
        self.servicer = _ProbeHealth(busy)
        self._started = False
        self.set(NOT_SERVING)
        self.servicer.set(LIVENESS, NOT_SERVING)
        self.grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="health"),
            options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", 4096)],
            maximum_concurrent_rpcs=64,
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, self.grpc)
        try:
            self.port = self.grpc.add_insecure_port(address)
        except RuntimeError as exc:  # grpcio's "Failed to bind to address ..."
            raise OSError(f"cannot listen for health on {address} (in use?)") from exc
        if self.port == 0:
            raise OSError(f"cannot listen for health on {address}")

    def set(self, status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        """Report ``status`` for every service name this port answers for."""
        for service in self.services:
            self.servicer.set(service, status)

    def start(self) -> None:
        """Listen (NOT_SERVING until the server says otherwise); again is a no-op."""
        if not self._started:
            self.grpc.start()
            self._started = True
            self.servicer.set(LIVENESS, SERVING)

    def stop(self, grace: float = 1.0) -> None:
        """NOT_SERVING to every watcher, then stop listening."""
        self.servicer.enter_graceful_shutdown()
        self.grpc.stop(grace).wait()
