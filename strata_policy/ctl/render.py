"""Readable tables for ``ctl``: the scope tree in human units, placements, reasons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from strata_policy.model.resources import format_amount

RESERVED = ("cpu", "memory", "gpu")


def amounts(values: Mapping[str, Any] | None) -> str:
    """``12 CPU, 48 GiB, 6.5 GPU`` (proto JSON renders int64 as strings)."""
    if not values:
        return "-"
    names = sorted(values, key=lambda n: (RESERVED.index(n) if n in RESERVED else 3, n))
    return ", ".join(
        format_amount(n, int(values[n])) if n in RESERVED else f"{n}={int(values[n])}"
        for n in names
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain left-aligned text table."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines)


def scope_tree(cluster: Mapping[str, Any], *, borrowed: bool = False) -> str:
    """The scope tree, depth-first, indented, with usage / guarantee / limit (and borrowed)."""
    scopes = cluster.get("scopes", [])
    depth: dict[str, int] = {}
    rows = []
    for s in scopes:
        d = depth[s["id"]] = depth.get(s.get("parentId", ""), -1) + 1 if s.get("parentId") else 0
        name = "  " * d + s["id"] + (f" ({s['kind']})" if s.get("kind") else "")
        row = [name, amounts(s.get("usage")), amounts(s.get("guarantee")), amounts(s.get("limit"))]
        if borrowed:
            row.append(amounts(s.get("borrowed")))
            row.append(", ".join(s.get("atLimit", [])) or "-")
        rows.append(row)
    headers = ["SCOPE", "USAGE", "GUARANTEE", "LIMIT"]
    if borrowed:
        headers += ["BORROWED", "AT LIMIT"]
    head = (
        f"generation {cluster.get('generation', 0)} · {cluster.get('nodeCount', 0)} nodes · "
        f"{cluster.get('scopeCount', 0)} scopes · {cluster.get('workloadCount', 0)} workloads\n"
        f"capacity  {amounts(cluster.get('capacity'))}\n"
        f"allocated {amounts(cluster.get('allocated'))}\n"
    )
    return head + "\n" + (table(headers, rows) if rows else "(no scopes)")


def results(response: Mapping[str, Any]) -> str:
    """Admit/Place results: one row per workload, then the reasons of those that said no."""
    rows = []
    notes = []
    for r in response.get("results", []):
        decision = r.get("decision", "").removeprefix("DECISION_")
        nodes = ", ".join(
            p["nodeId"]
            + (f"[{','.join(str(d) for d in p['gpuDevices'])}]" if p.get("gpuDevices") else "")
            for p in r.get("placements", [])
        )
        rows.append([r["workloadId"], decision, nodes or "-", amounts(r.get("borrowed"))])
        if r.get("explanation"):
            notes.append(f"{r['workloadId']}: {r['explanation']}")
        notes += [
            f"{r['workloadId']}: {x.get('code', '')} {x.get('message', '')}"
            for x in r.get("reasons", [])
        ]
        notes += [
            f"{r['workloadId']}: would evict {v['workloadId']} ({_reason(v)})"
            for v in r.get("victims", [])
        ]
    out = f"generation {response.get('generation', 0)}\n" + table(
        ["WORKLOAD", "DECISION", "PLACEMENTS", "BORROWED"], rows
    )
    return out + ("\n\n" + "\n".join(notes) if notes else "")


def victims(response: Mapping[str, Any]) -> str:
    """Reclaim's answer."""
    rows = [
        [
            v["workloadId"],
            v.get("scopeId", ""),
            _reason(v),
            amounts(v.get("freed")),
        ]
        for v in response.get("victims", [])
    ]
    satisfiable = response.get("satisfiable", False)
    head = f"generation {response.get('generation', 0)} · satisfiable: {satisfiable}\n"
    body = table(["VICTIM", "SCOPE", "REASON", "FREES"], rows) if rows else "(no victims)"
    reasons = [f"{x.get('code', '')}: {x.get('message', '')}" for x in response.get("reasons", [])]
    return head + body + ("\n\n" + "\n".join(reasons) if reasons else "")


def _placement(p: Mapping[str, Any]) -> str:
    devices = p.get("gpuDevices")
    return str(p["nodeId"]) + (f"[{','.join(str(d) for d in devices)}]" if devices else "")


def _reason(victim: Mapping[str, Any]) -> str:
    return str(victim.get("reason", "")).removeprefix("VICTIM_REASON_")
