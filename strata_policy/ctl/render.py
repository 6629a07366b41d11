"""Readable tables for ``ctl``: the scope tree in human units, placements, reasons.

Plain, left-aligned columns as kubectl prints them: stable across terminals, so the README's
sample outputs can be checked by a test, and easy to ``grep``/``awk``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from strata_policy.model.resources import format_amount

RESERVED = ("cpu", "memory", "gpu")


def amounts(values: Mapping[str, Any] | None) -> str:
    """``12 CPU, 48 GiB, 6.5 GPU`` (proto JSON renders int64 as strings); zeros left out."""
    names = _ordered(n for n, v in (values or {}).items() if int(v))
    return ", ".join(_amount(n, values[n]) for n in names) if values and names else "-"


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


DRY_RUN = " (dry run: nothing was changed)"
INHERITED = "*"
OVERSUBSCRIBED = "!"


def counts(data: Mapping[str, Any], *names: str) -> str:
    """``4 nodes, 1 scope, 0 workloads`` from a response's ``nodeCount``... fields."""
    parts = []
    for name in names:
        n = int(data.get(f"{name}Count", 0))
        parts.append(f"{n} {name}{'' if n == 1 else 's'}")
    return ", ".join(parts)


def dry_run(flag: bool) -> str:
    """The mark every dry-run answer carries, so it never reads as committed."""
    return DRY_RUN if flag else ""


def _ordered(names: Iterable[str]) -> list[str]:
    return sorted(names, key=lambda n: (RESERVED.index(n) if n in RESERVED else 3, n))


def _amount(name: str, value: Any) -> str:
    return format_amount(name, int(value)) if name in RESERVED else f"{name}={int(value)}"


def guarantee(scope: Mapping[str, Any]) -> str:
    """The effective guarantee the rules use; ``*`` = inherited from the children (not set on
    the scope), ``!`` = oversubscribed (set below the sum of the children's guarantees)."""
    explicit = scope.get("guarantee") or {}
    effective = scope.get("effectiveGuarantee") or explicit
    over = set(scope.get("oversubscribed") or ())
    cells = []
    for name in _ordered(n for n, v in effective.items() if int(v)):
        mark = ("" if name in explicit else INHERITED) + (OVERSUBSCRIBED if name in over else "")
        cells.append(_amount(name, effective[name]) + mark)
    return ", ".join(cells) or "-"


def scope_tree(cluster: Mapping[str, Any], *, borrowed: bool = False, wide: bool = False) -> str:
    """The scope tree, depth-first, indented, with usage / guarantee / limit (and borrowed)."""
    scopes = cluster.get("scopes", [])
    depth: dict[str, int] = {}
    rows = []
    for s in scopes:
        d = depth[s["id"]] = depth.get(s.get("parentId", ""), -1) + 1 if s.get("parentId") else 0
        name = "  " * d + s["id"] + (f" ({s['kind']})" if s.get("kind") else "")
        row = [name, amounts(s.get("usage")), guarantee(s), amounts(s.get("limit"))]
        if borrowed or wide:
            row.append(amounts(s.get("borrowed")))
            row.append(", ".join(s.get("atLimit", [])) or "-")
        if wide:
            row.append(_trim_float(s.get("weight", 1.0)))
            row.append(str(s.get("workloadCount", 0)))
        rows.append(row)
    headers = ["SCOPE", "USAGE", "GUARANTEE", "LIMIT"]
    if borrowed or wide:
        headers += ["BORROWED", "AT LIMIT"]
    if wide:
        headers += ["WEIGHT", "WORKLOADS"]
    head = (
        f"generation {cluster.get('generation', 0)} · "
        f"{counts(cluster, 'node', 'scope', 'workload').replace(', ', ' · ')}\n"
        f"capacity  {amounts(cluster.get('capacity'))}\n"
        f"allocated {amounts(cluster.get('allocated'))}\n"
    )
    marks = " ".join(row[2] for row in rows)
    notes = []
    if INHERITED in marks:
        notes.append(f"{INHERITED} inherited: not set on the scope, the sum of its children's")
    if OVERSUBSCRIBED in marks:
        notes.append(f"{OVERSUBSCRIBED} oversubscribed: set below the sum of its children's")
    body = table(headers, rows) if rows else "(no scopes)"
    return head + "\n" + body + ("\n\n" + "\n".join(notes) if notes else "")


def clusters(response: Mapping[str, Any]) -> str:
    """ListClusters: one row per cluster."""
    rows = [
        [
            c["clusterId"],
            str(c.get("generation", 0)),
            str(c.get("nodeCount", 0)),
            str(c.get("scopeCount", 0)),
            str(c.get("workloadCount", 0)),
        ]
        for c in response.get("clusters", [])
    ]
    if not rows:
        return "(no clusters)"
    return table(["CLUSTER", "GENERATION", "NODES", "SCOPES", "WORKLOADS"], rows)


def _trim_float(value: Any) -> str:
    return f"{float(value):g}"


def results(response: Mapping[str, Any], *, placing: bool, dry: bool = False) -> str:
    """Admit/Place results: one row per workload, then the reasons of those that said no."""
    rows = []
    notes = []
    for r in response.get("results", []):
        decision = r.get("decision", "").removeprefix("DECISION_")
        row = [r["workloadId"], decision]
        if placing:
            row.append(", ".join(_placement(p) for p in r.get("placements", [])) or "-")
        row.append(amounts(r.get("borrowed")))
        if not placing:
            row.append(", ".join(v["workloadId"] for v in r.get("victims", [])) or "-")
        rows.append(row)
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
    headers = ["WORKLOAD", "DECISION"] + (["PLACEMENTS"] if placing else []) + ["BORROWED"]
    headers += [] if placing else ["VICTIMS"]
    out = f"generation {response.get('generation', 0)}{dry_run(dry)}\n" + table(headers, rows)
    return out + ("\n\n" + "\n".join(notes) if notes else "")


def victims(response: Mapping[str, Any], *, dry: bool = False) -> str:
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
    satisfiable = "yes" if response.get("satisfiable", False) else "no"
    head = (
        f"generation {response.get('generation', 0)} · satisfiable: {satisfiable}{dry_run(dry)}\n"
    )
    body = table(["VICTIM", "SCOPE", "REASON", "FREES"], rows) if rows else "(no victims)"
    reasons = [f"{x.get('code', '')}: {x.get('message', '')}" for x in response.get("reasons", [])]
    result = response.get("result")
    if result and result.get("decision"):
        placed = ", ".join(_placement(p) for p in result.get("placements", []))
        decision = result["decision"].removeprefix("DECISION_")
        reasons.insert(
            0, f"{result['workloadId']}: {decision}" + (f" on {placed}" if placed else "")
        )
    return head + body + ("\n\n" + "\n".join(reasons) if reasons else "")


def _placement(p: Mapping[str, Any]) -> str:
    devices = p.get("gpuDevices")
    return str(p["nodeId"]) + (f"[{','.join(str(d) for d in devices)}]" if devices else "")


def _reason(victim: Mapping[str, Any]) -> str:
    return str(victim.get("reason", "")).removeprefix("VICTIM_REASON_")
