"""kill -9 in a burst of commits, restart: every acknowledged commit is there, none half-done."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cluster_invariants import read, violations

from strata_policy.service.client import Client, RpcError

CLUSTER = "crash"
PUSH = {
    "clusterId": CLUSTER,
    "snapshot": {
        "nodes": [{"id": f"n{i}", "capacity": {"cpu": 64000, "gpu": 8000}} for i in range(4)],
        "scopes": [{"id": "org"}, {"id": "team-a", "parentId": "org"}],
    },
}
WRITERS = 4
STARTUP_SECONDS = 180  # cold numba caches compile on first start; warm starts take a second


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Process:
    """``strata-policy serve --state-dir`` as a child process."""

    def __init__(self, state_dir: Path, log: Path) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "strata_policy.cli", "serve", "--address", self.address,
             "--state-dir", str(state_dir), "--workers", "8"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.client = Client(self.address, timeout=30)
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"server exited; see {log}"
            try:
                if self.client.health() == "SERVING":
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(0.2)
        raise TimeoutError(f"server not SERVING after {STARTUP_SECONDS}s; see {log}")

    def kill9(self) -> None:
        """SIGKILL: no drain, no journal close, no WAL checkpoint."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.client.close()
        self.log.close()

    def stop(self) -> None:
        """SIGTERM and wait."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.client.close()
        self.log.close()


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A fresh state directory."""
    return tmp_path / "state"


def burst(
    client: Client, writer: int, acked: list[tuple[str, str, int]], stop: threading.Event
) -> None:
    """Admit, place and release workloads until stopped; record each acknowledged commit."""
    i = 0
    while not stop.is_set():
        wid = f"w{writer}-{i}"
        i += 1
        try:
            answer = client.call(
                "Place",
                {"clusterId": CLUSTER, "workloads": [
                    {"id": wid, "scopeId": "team-a", "request": {"cpu": 100, "gpu": 250}}
                ]},
            )  # fmt: skip
            placed = answer["results"][0]["decision"] == "DECISION_PLACED"
            acked.append(("place" if placed else "noop", wid, int(answer["generation"])))
            if placed and i % 3 == 0:
                acked.append(("releasing", wid, 0))  # may commit yet never be acknowledged
                answer = client.call("Release", {"clusterId": CLUSTER, "workloadIds": [wid]})
                acked.append(("release", wid, int(answer["generation"])))
        except RpcError:
            return  # the server died under us: this call was not acknowledged


def test_acknowledged_commits_survive_kill_9(state_dir: Path, tmp_path: Path) -> None:
    """After SIGKILL mid-burst, a restart shows every acknowledged commit and continues counting."""
    first = Process(state_dir, tmp_path / "server.log")
    acked: list[tuple[str, str, int]] = []
    try:
        first.client.call("PushSnapshot", PUSH)
        stop = threading.Event()
        threads = [
            threading.Thread(target=burst, args=(first.client, w, acked, stop))
            for w in range(WRITERS)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60  # a hang guard: 60 commits take a second unloaded
        while len(acked) < 60 and time.monotonic() < deadline:
            time.sleep(0.01)
        first.kill9()  # while the writers are still calling
        stop.set()
        for t in threads:
            t.join(timeout=30)
    finally:
        first.stop()
    assert len(acked) >= 10, "the burst committed too little to test anything"

    second = Process(state_dir, tmp_path / "server.log")
    try:
        answer, snap = read(second.client, CLUSTER)
        live = {rw.workload.id for rw in snap.workloads}
        placed = {wid for kind, wid, _ in acked if kind == "place"}
        released = {wid for kind, wid, _ in acked if kind == "release"}
        releasing = {wid for kind, wid, _ in acked if kind == "releasing"}
        assert placed - releasing <= live, "an acknowledged placement was lost"
        assert not (released & live), "an acknowledged release was undone"
        assert all(rw.placed for rw in snap.workloads), "a workload came back half-applied"
        generation = int(answer["generation"])
        assert generation >= max(g for _, _, g in acked)
        assert violations(second.client, CLUSTER) == []
        after = second.client.call(
            "Admit",
            {"clusterId": CLUSTER, "workloads": [{"id": "after", "scopeId": "team-a",
                                                  "request": {"cpu": 1}}]},
        )  # fmt: skip
        assert int(after["generation"]) == generation + 1, "generations continue after restart"
    finally:
        second.stop()
