"""Build a snapshot from the openb node list (Alibaba cluster-trace-gpu-v2023).

Columns ``sn, cpu_milli, memory_mib, gpu, model``: capacity cpu = cpu_milli, memory = memory_mib
MiB in bytes, gpu = gpu devices × 1000, gpu_model = model. The result is a snapshot in the proto
JSON mapping, ready for PushSnapshot (or ``ctl push``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

MIB = 1024**2


def snapshot_from_openb(nodes_csv: Path, scope_id: str = "") -> dict[str, Any]:
    """A snapshot dict with every node of the CSV, in file order, and optionally one scope."""
    nodes: list[dict[str, Any]] = []
    with nodes_csv.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            try:
                capacity = {
                    "cpu": str(int(row["cpu_milli"])),
                    "memory": str(int(row["memory_mib"]) * MIB),
                }
                gpus = int(row["gpu"] or 0)
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{nodes_csv}:{line}: bad node row ({exc})") from None
            if gpus:
                capacity["gpu"] = str(gpus * 1000)
            node: dict[str, Any] = {"id": row["sn"], "capacity": capacity}
            if gpus and row.get("model"):
                node["gpuModel"] = row["model"]
            nodes.append(node)
    snapshot: dict[str, Any] = {"nodes": nodes}
    if scope_id:
        snapshot["scopes"] = [{"id": scope_id, "kind": "org"}]
    return snapshot
