"""Measure the server's memory for the deploy manifests' requests and limits.

Starts ``strata-policy serve`` on loopback (in memory, metrics on), then reads the process's
resident set (``VmRSS``) and its peak (``VmHWM``) from ``/proc`` after each step:

1. started and warm (kernels compiled or loaded);
2. holding the README's openb cluster (``ctl import-openb``, a team scope, two placed jobs);
3. plus a 10,000-node cluster (8 GPUs each, 100 scopes) with ``--fill`` placed workloads;
4. after a metrics scrape (the scope gauges are built at scrape time).

Usage: ``python scripts/measure_rss.py [--fill 20000]``; prints one line per step in MiB. The
figures feed the ``resources`` of deploy/kubernetes/statefulset.yaml (docs/operations.md, Sizing).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "generated")]

from strata_policy.ctl.openb import snapshot_from_openb  # noqa: E402
from strata_policy.service.client import Client, RpcError  # noqa: E402

GI = 1024**3
BATCH = 10_000


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(rest.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def wait_serving(client: Client, deadline: float) -> None:
    """Poll health until SERVING (bounded by ``deadline``)."""
    while time.monotonic() < deadline:
        try:
            if client.health() == "SERVING":
                return
        except Exception:  # not listening yet
            pass
        time.sleep(0.5)
    raise SystemExit("the server did not become SERVING in time")


def big_cluster(nodes: int, scopes: int) -> dict[str, Any]:
    """A snapshot of ``nodes`` 8-GPU nodes and ``scopes`` team scopes under one org."""
    return {
        "nodes": [
            {
                "id": f"node-{i:05d}",
                "capacity": {"cpu": "128000", "memory": str(1024 * GI), "gpu": "8000"},
                "gpuModel": "A100" if i % 2 else "H100",
                "labels": {"zone": f"z{i % 4}"},
            }
            for i in range(nodes)
        ],
        "scopes": [{"id": "org", "kind": "org"}]
        + [
            {
                "id": f"team-{j:03d}",
                "parentId": "org",
                "guarantee": {"gpu": str(8000 * nodes // scopes // 2)},
                "limit": {"gpu": str(8000 * nodes // scopes * 2)},
            }
            for j in range(scopes)
        ],
    }


def fill(client: Client, count: int, scopes: int) -> int:
    """Place ``count`` one-GPU workloads in batches; returns how many were placed."""
    placed = 0
    for start in range(0, count, BATCH):
        batch = [
            {
                "id": f"w-{i:07d}",
                "scopeId": f"team-{i % scopes:03d}",
                "request": {"cpu": "8000", "memory": str(32 * GI), "gpu": "1000"},
            }
            for i in range(start, min(count, start + BATCH))
        ]
        reply = client.call("Place", {"clusterId": "big", "workloads": batch})
        placed += sum(1 for r in reply["results"] if r["decision"] == "DECISION_PLACED")
    return placed


def main() -> int:
    """Run the steps and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--scopes", type=int, default=100)
    parser.add_argument("--fill", type=int, default=20_000)
    args = parser.parse_args()
    port, metrics_port = free_port(), free_port()
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'generated'}")
    server = subprocess.Popen(
        [sys.executable, "-m", "strata_policy.cli", "serve", "--address", f"127.0.0.1:{port}",
         "--metrics-address", f"127.0.0.1:{metrics_port}", "--log-level", "warning"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    client = Client(f"127.0.0.1:{port}", timeout=300)
    try:
        wait_serving(client, time.monotonic() + 600)
        print("warm: RSS {:.0f} MiB, peak {:.0f} MiB".format(*memory(server.pid)))
        openb = snapshot_from_openb(ROOT / "data/openb/openb_node_list_gpu_node.csv", "default")
        openb["scopes"].append({"id": "team-a", "parentId": "default"})
        client.call("PushSnapshot", {"clusterId": "openb", "snapshot": openb})
        readme = ROOT / "examples/place.yaml"
        import yaml  # noqa: PLC0415

        client.call("Place", {"clusterId": "openb", **yaml.safe_load(readme.read_text())})
        print("openb: RSS {:.0f} MiB, peak {:.0f} MiB".format(*memory(server.pid)))
        client.call(
            "PushSnapshot", {"clusterId": "big", "snapshot": big_cluster(args.nodes, args.scopes)}
        )
        placed = fill(client, args.fill, args.scopes)
        print(
            f"{args.nodes} nodes, {placed} placed: "
            + "RSS {:.0f} MiB, peak {:.0f} MiB".format(*memory(server.pid))
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=60) as r:
            size = len(r.read())
        print(
            f"after a scrape ({size} bytes): "
            + "RSS {:.0f} MiB, peak {:.0f} MiB".format(*memory(server.pid))
        )
    except RpcError as exc:
        print(f"call failed: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
