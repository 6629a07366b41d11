"""Runs reflectors + a syncer against the protocol fake and a Strata server, and compares them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from protocol_fake import FakeApiServer
from strata.policy.v1 import types_pb2 as pb

from strata_policy.kube.api import HttpKubeApi
from strata_policy.kube.mirror import OPTIONAL, PATHS, mirror
from strata_policy.kube.reflector import Cache, Reflector
from strata_policy.kube.sync import ServerView, Syncer, canonical
from strata_policy.service.client import Client

KINDS = tuple(PATHS)


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Poll ``condition`` until true or ``timeout`` seconds pass (bounded; never a wall assert)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@dataclass
class Running:
    """A running sync: the fake, the syncer, the reflectors' cache."""

    fake: FakeApiServer
    api: HttpKubeApi
    cache: Cache
    syncer: Syncer
    client: Client
    cluster_id: str
    reflectors: list[Reflector] = field(default_factory=list)

    def fake_objects(self) -> dict[str, dict[str, Any]]:
        return {
            kind: {
                (o["metadata"].get("namespace", "") + "/" + o["metadata"]["name"]).lstrip("/"): o
                for o in self.fake.items(path)
            }
            for kind, path in PATHS.items()
        }

    def server_view(self) -> ServerView | None:
        try:
            reply = self.client.call(
                "GetCluster", {"clusterId": self.cluster_id, "includeSnapshot": True}
            )
        except Exception:
            return None
        return ServerView.of_snapshot(int(reply["generation"]), reply.get("snapshot") or {})

    def expected(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        desired = mirror(self.fake_objects())
        return (
            {k: canonical(pb.Node, v) for k, v in desired.nodes.items()},
            {k: canonical(pb.Scope, v) for k, v in desired.scopes.items()},
            {k: canonical(pb.RunningWorkload, v) for k, v in desired.workloads.items()},
        )

    def converged(self) -> bool:
        view = self.server_view()
        if view is None:
            return False
        nodes, scopes, workloads = self.expected()
        if (view.nodes, view.scopes, view.workloads) != (nodes, scopes, workloads):
            return False
        # The server can hold the state before the syncer's call returns and its stats count
        # it: converged means the syncer has taken in the reply too.
        held = self.syncer.view
        return held is not None and held.generation == view.generation

    def watching(self) -> bool:
        """Every reflector of a served kind has its watch open at the fake.

        A fault (drop, expiry, bookmark) reaches only the watches open when it is made: a test
        that makes one right after converging must first wait for this, or a reflector still
        between its list and its watch would miss the fault and the test would prove nothing
        (or fail on a loaded machine). Exact until the first fault: the fake counts open
        handlers, and a dropped one may close after its reflector has watched again.
        """
        served = sum(1 for path in PATHS.values() if path not in self.fake.missing)
        with self.fake.lock:
            return self.fake.open_watches == served


@contextmanager
def running_sync(fake: FakeApiServer, client: Client, cluster_id: str) -> Iterator[Running]:
    """Start the fake, four reflectors and a syncer; stop all of them on exit."""
    with fake.serve() as url:
        api = HttpKubeApi.for_host(url)
        cache = Cache()
        syncer = Syncer(client, cluster_id, cache, batch_window_s=0.05)
        run = Running(fake, api, cache, syncer, client, cluster_id)
        stop = threading.Event()
        threads = []
        for kind, path in PATHS.items():
            reflector = Reflector(
                api,
                cache,
                kind,
                path,
                watch_timeout_s=30,
                backoff_s=0.05,
                optional=kind in OPTIONAL,
            )
            run.reflectors.append(reflector)
            threads.append(
                threading.Thread(target=reflector.run, args=(stop,), daemon=True, name=kind)
            )
        threads.append(
            threading.Thread(target=syncer.run, args=(stop, KINDS), daemon=True, name="sync")
        )
        for t in threads:
            t.start()
        try:
            yield run
        finally:
            stop.set()
            api.close()
            for t in threads:
                t.join(timeout=30)
            alive = [t.name for t in threads if t.is_alive()]
            assert not alive, f"threads did not stop: {alive}"
