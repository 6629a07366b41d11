"""Reporting a sweep: the terminal table, the CSV, and the PNG plot (matplotlib, optional).

Protocol 1 results are grouped by (trace, policy) and summarised over seeds as mean ± standard
deviation (population, so one seed shows ± 0); on the openb default trace a column shows the FGD
paper's figure at 130 % arrived beside ours. Protocol 2 results get one row per replay.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from strata_policy.simulate.metrics import BUCKETS, REPORT_POINTS, FloatArray
from strata_policy.simulate.protocol1 import Replay1Result
from strata_policy.simulate.protocol2 import Replay2Result

OPENB_DEFAULT = "openb_pod_list_default"
# The FGD paper's allocation at 130 % arrived on the default trace (mean of seeds 42-51). Its
# DotProd prefers the smallest product, the inverse of our Tetris DOT_PRODUCT; shown for context.
PAPER_130 = {
    "RANDOM": 87.47,
    "DOT_PRODUCT": 90.85,
    "BEST_FIT:paper": 93.08,
    "FRAGMENTATION_AWARE:paper": 95.39,
    "FRAGMENTATION_AWARE": 95.39,
}

# The FGD paper's FGD on its variant traces (its repository's
# experiments/analysis/expected_results/analysis_allo_discrete.csv, rows 06-FGD): allocated % at
# 100 % and 130 % arrived, mean of seeds 42-51. Ours are built by ``simulate/variants.py`` from
# the default trace (same family and share, other draws); the paper's ``cpu050``…``cpu250`` files
# are our ``nongpu5``…``nongpu25``.
PAPER_FGD_VARIANTS: dict[str, tuple[float, float]] = {
    "gpuspec10": (94.66, 94.95),
    "gpuspec20": (94.66, 94.84),
    "gpuspec25": (93.91, 94.74),
    "gpuspec33": (87.84, 94.55),
    "gpushare40": (93.96, 94.15),
    "gpushare60": (91.25, 91.40),
    "gpushare80": (89.08, 89.30),
    "gpushare100": (86.64, 86.90),
    "multigpu20": (95.53, 95.65),
    "multigpu30": (96.36, 96.46),
    "multigpu40": (96.91, 96.99),
    "multigpu50": (97.09, 97.18),
    "nongpu5": (95.00, 95.21),
    "nongpu10": (95.21, 95.35),
    "nongpu20": (94.82, 95.05),
    "nongpu25": (93.20, 93.41),
}


@dataclass(frozen=True, slots=True)
class Summary:
    """One (trace, policy) over its seeds: mean and spread of each figure."""

    trace: str
    policy: str
    seeds: tuple[int, ...]
    alloc_mean: tuple[float, ...]  # per bucket 0 … 130
    alloc_std: tuple[float, ...]
    frag_mean: float
    frag_std: float
    failed_mean: float
    decisions_per_s: float  # all arrivals over all engine time

    def at(self, pct: int) -> tuple[float, float]:
        """(mean, std) allocated % at ``pct`` % arrived."""
        return self.alloc_mean[pct], self.alloc_std[pct]

    @property
    def paper_130(self) -> float | None:
        """The FGD paper's figure for this policy: on the openb default trace, or (FGD only) on
        one of the paper's variants built from it (``<default>+gpuspec33``)."""
        if self.trace == OPENB_DEFAULT:
            return PAPER_130.get(self.policy)
        base, _, variant = self.trace.partition("+")
        if base != OPENB_DEFAULT or not self.policy.startswith("FRAGMENTATION_AWARE"):
            return None
        found = PAPER_FGD_VARIANTS.get(variant)
        return None if found is None else found[1]


def summarise(results: Sequence[Replay1Result]) -> list[Summary]:
    """Group by (trace, policy) in first-seen order and reduce over seeds."""
    groups: dict[tuple[str, str], list[Replay1Result]] = {}
    for r in results:
        groups.setdefault((r.trace, r.policy), []).append(r)
    out = []
    for (trace, policy), rs in groups.items():
        curves = np.array([r.curve for r in rs], dtype=np.float64)
        frags = np.array([r.frag_ratio for r in rs], dtype=np.float64)
        seconds = sum(r.seconds for r in rs)
        out.append(
            Summary(
                trace=trace,
                policy=policy,
                seeds=tuple(r.seed for r in rs),
                alloc_mean=tuple(float(v) for v in _nanmean(curves)),
                alloc_std=tuple(float(v) for v in _nanstd(curves)),
                frag_mean=float(frags.mean()),
                frag_std=float(frags.std()),
                failed_mean=float(np.mean([r.failed for r in rs])),
                decisions_per_s=sum(r.arrivals for r in rs) / seconds if seconds else math.inf,
            )
        )
    return out


def table1(summaries: Sequence[Summary]) -> str:
    """The protocol-1 table: allocated % of GPUs at each arrived point, mean ± std over seeds."""
    head = ["trace", "policy", "seeds"] + [f"@{p}%" for p in REPORT_POINTS]
    head += ["paper@130%", "frag % of idle", "failed", "decisions/s"]
    rows = [head]
    for s in summaries:
        paper = s.paper_130
        rows.append(
            [s.trace, s.policy, str(len(s.seeds))]
            + [_pm(*s.at(p)) for p in REPORT_POINTS]
            + [
                "-" if paper is None else f"{paper:.2f}",
                _pm(100 * s.frag_mean, 100 * s.frag_std),
                f"{s.failed_mean:.0f}",
                f"{s.decisions_per_s:,.0f}",
            ]
        )
    return _grid(rows)


def table2(results: Sequence[Replay2Result]) -> str:
    """The protocol-2 table: one row per replay."""
    head = [
        "trace",
        "policy",
        "seed",
        "GPU util %",
        "pending mean s",
        "pending p95 s",
        "reclaims",
        "evicted",
        "never started",
        "decisions/s",
    ]
    rows = [head] + [
        [
            r.trace,
            r.policy,
            str(r.seed),
            f"{r.gpu_util_pct:.2f}",
            f"{r.mean_pending_s:,.0f}",
            f"{r.p95_pending_s:,.0f}",
            str(r.reclaims),
            str(r.evictions),
            str(r.never_started),
            f"{r.decisions_per_s:,.0f}",
        ]
        for r in results
    ]
    return _grid(rows)


def write_csv1(path: Path, results: Sequence[Replay1Result]) -> None:
    """One row per replay: the headline figures, then the whole curve (``alloc_0`` … ``_130``)."""
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(
            [
                "trace",
                "policy",
                "seed",
                "arrivals",
                "failed",
                "frag_ratio",
                "seconds",
                "decisions_per_s",
            ]
            + [f"alloc_{b}" for b in range(BUCKETS)]
        )
        for r in results:
            out.writerow(
                [
                    r.trace,
                    r.policy,
                    r.seed,
                    r.arrivals,
                    r.failed,
                    f"{r.frag_ratio:.6f}",
                    f"{r.seconds:.4f}",
                    f"{r.decisions_per_s:.1f}",
                ]
                + ["" if math.isnan(v) else f"{v:.4f}" for v in r.curve]
            )


def write_csv2(path: Path, results: Sequence[Replay2Result]) -> None:
    """One row per replay's timeline point: trace, policy, seed, hours, GPU %, pending."""
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["trace", "policy", "seed", "hours", "gpu_allocated_pct", "pending"])
        for r in results:
            for hours, util, pending in r.timeline:
                out.writerow([r.trace, r.policy, r.seed, f"{hours:.4f}", util, pending])


def plot1(path: Path, summaries: Sequence[Summary], lowest_pct: int = 70) -> None:
    """Allocated vs arrived (mean over seeds, min-max band as ± std), one line per policy."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    x = np.arange(BUCKETS)
    for s in summaries:
        mean, std = np.array(s.alloc_mean), np.array(s.alloc_std)
        label = s.policy if len({t.trace for t in summaries}) == 1 else f"{s.trace} {s.policy}"
        ax.plot(x, mean, label=f"{label} ({mean[-1]:.2f} %)", linewidth=1.8)
        ax.fill_between(x, mean - std, mean + std, alpha=0.2)
    ax.plot([0, 100], [0, 100], linestyle=":", color="grey", label="ideal")
    ax.set_xlim(lowest_pct, BUCKETS - 1)
    ax.set_ylim(lowest_pct - 10, 100)
    ax.set_xlabel("arrived GPU requests (% of cluster GPUs)")
    ax.set_ylabel("allocated GPUs (% of cluster)")
    ax.grid(linestyle="-.", alpha=0.6)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot2(path: Path, results: Sequence[Replay2Result]) -> None:
    """GPU allocated % over the trace's time, one line per replay."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4), dpi=120)
    for r in results:
        hours = [p[0] / 24 for p in r.timeline]
        ax.plot(hours, [p[1] for p in r.timeline], label=f"{r.policy} seed {r.seed}", linewidth=1)
    ax.set_xlabel("trace time (days)")
    ax.set_ylabel("GPUs allocated (% of cluster)")
    ax.grid(linestyle="-.", alpha=0.6)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _pyplot() -> Any:
    try:
        import matplotlib  # noqa: PLC0415  # optional extra: imported only when a plot is asked

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("plotting needs matplotlib: pip install 'strata-policy[sim]'") from exc
    return plt


def _nanmean(a: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore"):
        return np.array([np.nan if np.isnan(col).all() else np.nanmean(col) for col in a.T])


def _nanstd(a: FloatArray) -> FloatArray:
    return np.array([np.nan if np.isnan(col).all() else np.nanstd(col) for col in a.T])


def _pm(mean: float, std: float) -> str:
    return "-" if math.isnan(mean) else f"{mean:.2f} ± {std:.2f}"


def _grid(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
