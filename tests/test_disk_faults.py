"""A real disk refusing writes, end to end: ``strata-policy serve`` under ``RLIMIT_FSIZE``.

The server process may not grow any file past a limit, as on a full disk or quota. A push too
big for it answers UNAVAILABLE with ``ErrorInfo`` reason ``STORAGE_UNAVAILABLE`` and changes
nothing; the server keeps serving, smaller commits still succeed, and a restart without the
limit serves exactly what the server acknowledged.
"""

from __future__ import annotations

import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from strata_policy.kernels import warmup
from strata_policy.service.client import Client, RpcError

FILE_LIMIT_BYTES = 1 << 20
STARTUP_SECONDS = 180
SMALL = {
    "nodes": [{"id": "n1", "capacity": {"cpu": "64000", "gpu": "8000"}}],
    "scopes": [{"id": "team-a"}],
}
# About 3 MB as the journal stores it: more than the file limit allows.
BIG = {
    "nodes": [
        {"id": f"node-{i:05d}", "capacity": {"cpu": "64000"}, "labels": {"zone": f"z{i % 7}"}}
        for i in range(20_000)
    ],
    "scopes": [{"id": "team-a"}],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The child sets its own file-size limit, then runs the CLI (SIGXFSZ is ignored by the journal,
# so a write over the limit fails with EFBIG instead of killing the process).
LIMITED_SERVE = (
    "import resource, runpy, sys\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
    "sys.argv[0] = 'strata-policy'\n"
    "runpy.run_module('strata_policy.cli', run_name='__main__')\n"
)


class Served:
    """``strata-policy serve --state-dir`` in a child process, optionally file-size limited."""

    def __init__(self, state_dir: Path, *, limited: bool) -> None:
        address = f"127.0.0.1:{_free_port()}"
        limit = FILE_LIMIT_BYTES if limited else resource.RLIM_INFINITY
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LIMITED_SERVE.format(limit=limit), "serve",
             "--address", address, "--state-dir", str(state_dir), "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,  # a pipe or a file is limited
        )  # fmt: skip
        self.client = Client(address, timeout=60)
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "the server exited"
            try:
                if self.client.health() == "SERVING":
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"server not SERVING after {STARTUP_SECONDS}s")

    def get(self) -> dict[str, Any]:
        """The cluster with its snapshot."""
        return self.client.call("GetCluster", {"clusterId": "c", "includeSnapshot": True})

    def stop(self) -> None:
        """SIGTERM, and wait."""
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no RLIMIT_FSIZE here")
def test_a_full_disk_fails_the_call_and_changes_nothing(tmp_path: Path) -> None:
    """Over the file limit: UNAVAILABLE/STORAGE_UNAVAILABLE, state and generation unchanged,
    later small commits acknowledged, and a restart serves exactly the acknowledged state."""
    warmup()  # the kernel cache written here, unlimited: the limited server only loads it
    state_dir = tmp_path / "state"
    limited = Served(state_dir, limited=True)
    try:
        limited.client.call("PushSnapshot", {"clusterId": "c", "snapshot": SMALL})
        before = limited.get()
        with pytest.raises(RpcError) as err:
            limited.client.call("PushSnapshot", {"clusterId": "c", "snapshot": BIG})
        assert (err.value.code, err.value.reason) == ("UNAVAILABLE", "STORAGE_UNAVAILABLE")
        assert limited.get() == before, "the refused push changed the served state"
        answer = limited.client.call(
            "Admit",
            {"clusterId": "c", "workloads": [{"id": "w1", "scopeId": "team-a",
                                              "request": {"cpu": "1000"}}]},
        )  # fmt: skip
        assert answer["generation"] == str(int(before["generation"]) + 1)
        acknowledged = limited.get()
    finally:
        limited.stop()
    restarted = Served(state_dir, limited=False)
    try:
        assert restarted.get() == acknowledged
    finally:
        restarted.stop()
