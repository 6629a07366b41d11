"""A CallGate served by a real asyncio gRPC server, for tests that need their own handlers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from strata_policy.service.calls import CallGate


@contextmanager
def serve_gate(gate: CallGate) -> Iterator[grpc.Channel]:
    """``gate`` (made ready) and the health service on a loopback port; yields a channel."""
    with serve_gate_at(gate) as address:
        channel = grpc.insecure_channel(address)
        try:
            yield channel
        finally:
            channel.close()


@contextmanager
def serve_gate_at(gate: CallGate) -> Iterator[str]:
    """``gate`` (made ready) and the health service on a loopback port; yields its address."""
    gate.ready = True
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def build() -> tuple[grpc.aio.Server, int]:
        srv = grpc.aio.server()
        gate.add_to(srv)
        health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), srv)
        port = srv.add_insecure_port("127.0.0.1:0")
        await srv.start()
        return srv, port

    srv, port = asyncio.run_coroutine_threadsafe(build(), loop).result()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(srv.stop(None), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
