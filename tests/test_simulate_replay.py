"""Replays through the real engine: protocol 1 on openb slices, protocol 2 with quotas, the CLI."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from strata_policy.engine import Engine
from strata_policy.model import Decision, Order, Policy
from strata_policy.simulate import cli
from strata_policy.simulate.arrivals import build_arrivals, shuffled_nodes
from strata_policy.simulate.metrics import typical_shapes
from strata_policy.simulate.policies import PolicySpec, parse_policy, placement_options
from strata_policy.simulate.protocol1 import CLUSTER_ID, replay1
from strata_policy.simulate.protocol2 import replay2
from strata_policy.simulate.reference import fgd_replay
from strata_policy.simulate.trace import OPENB_NODE_FILE, OPENB_POD_FILE, Trace, load_trace

OPENB = Path(__file__).resolve().parents[1] / "data" / "openb"
NODES, PODS = 60, 400  # a slice that fills: 60 nodes, 400 pods tuned to 130 % of their GPUs


@pytest.fixture(scope="module")
def small() -> Trace:
    """The first 60 gpu nodes and the first 400 pods of the openb default trace."""
    full = load_trace(OPENB)
    return Trace("openb-slice", full.nodes[:NODES], full.workloads[:PODS], full.scopes)


@pytest.fixture
def openb_slice_dir(tmp_path: Path) -> Path:
    """The same slice as an openb-format folder, for the CLI."""
    for name, rows in ((OPENB_NODE_FILE, NODES), (OPENB_POD_FILE, PODS)):
        lines = (OPENB / name).read_text().splitlines()[: rows + 1]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    return tmp_path


SPECS = [
    pytest.param("FRAGMENTATION_AWARE:paper", id="paper FGD"),
    pytest.param("FRAGMENTATION_AWARE", id="our FGD"),
    pytest.param("BEST_FIT:paper", id="paper best-fit"),
    pytest.param("RANDOM", id="random"),
]


@pytest.mark.parametrize("policy", SPECS)
def test_one_batch_equals_one_call_per_arrival(small: Trace, policy: str) -> None:
    """Protocol 1's single place batch gives the figures of one place call per arrival."""
    spec = parse_policy(policy)
    batch = replay1(small, spec, 42)
    single = replay1(small, spec, 42, per_arrival=True)
    assert batch.failed == single.failed
    assert batch.frag_ratio == pytest.approx(single.frag_ratio)
    assert [x for x in batch.curve if not math.isnan(x)] == [
        x for x in single.curve if not math.isnan(x)
    ]


def test_engine_fgd_matches_numpy_reference(small: Trace) -> None:
    """The engine's paper FGD places every arrival where the NumPy twin of the paper does."""
    spec = PolicySpec(Policy.FRAGMENTATION_AWARE, "paper")
    shapes = typical_shapes(t.workload for t in small.workloads)
    arrivals = build_arrivals([t.workload for t in small.workloads], small.gpu_milli, 43)
    snap = shuffled_nodes(small, 43)
    engine = Engine(clock=lambda: 0)
    engine.push_snapshot(CLUSTER_ID, snap)
    got = engine.place(
        CLUSTER_ID, arrivals, options=placement_options(spec, 43, shapes), order=Order.FIFO
    ).results
    index = {n.id: i for i, n in enumerate(snap.nodes)}
    ours = [
        (index[r.placements[0].node_id], r.placements[0].gpu_devices)
        if r.decision is Decision.PLACED
        else None
        for r in got
    ]
    assert ours == fgd_replay(snap.nodes, arrivals, shapes, truncate=True)


def test_protocol1_figures_are_sane(small: Trace) -> None:
    """Allocation never exceeds arrivals or 100 %, and failures happen once the slice is full."""
    result = replay1(small, parse_policy("FRAGMENTATION_AWARE"), 42)
    assert result.failed > 0
    for pct in (50, 90, 100, 130):
        assert result.at(pct) <= min(pct, 100) + 1
    assert result.at(130) > 80
    assert 0 <= result.frag_ratio <= 1


def test_cli_prints_the_replayed_figures(
    small: Trace, openb_slice_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`simulate` prints, per policy, the mean allocation at 130 % that the replays measured."""
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    csv_path = tmp_path / "out.csv"
    args = parser.parse_args(
        ["simulate", str(openb_slice_dir), "--policies", "RANDOM,FRAGMENTATION_AWARE:paper",
         "--seeds", "42-43", "--csv", str(csv_path), "--no-progress"]
    )  # fmt: skip
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    for name in ("RANDOM", "FRAGMENTATION_AWARE:paper"):
        runs = [replay1(small, parse_policy(name), s) for s in (42, 43)]
        mean = sum(r.at(130) for r in runs) / 2
        row = next(line for line in out.splitlines() if f" {name} " in line)
        assert f"{mean:.2f} ±" in row
    assert len(csv_path.read_text().splitlines()) == 5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("42", (42,), id="one seed"),
        pytest.param("42-44", (42, 43, 44), id="inclusive range"),
        pytest.param("5,1-2,5", (5, 1, 2), id="list, order kept, duplicates dropped"),
    ],
)
def test_parse_seeds(text: str, expected: tuple[int, ...]) -> None:
    """--seeds takes single seeds, inclusive ranges and lists."""
    assert cli.parse_seeds(text) == expected


QUOTA_TRACE = {
    "nodes": [{"id": "n1", "capacity": {"cpu": "16", "memory": "64Gi", "gpu": "2"}}],
    "scopes": [
        {"id": "prod", "guarantee": {"gpu": "2"}},
        {"id": "batch", "limit": {"gpu": "2"}},
    ],
    "workloads": [
        {"id": "b1", "scope_id": "batch", "request": {"cpu": "1", "gpu": "1"},
         "arrival_ms": 0, "departure_ms": 100_000},
        {"id": "b2", "scope_id": "batch", "request": {"cpu": "1", "gpu": "1"},
         "arrival_ms": 0, "departure_ms": 100_000},
        {"id": "p1", "scope_id": "prod", "request": {"cpu": "1", "gpu": "1"},
         "arrival_ms": 10_000, "departure_ms": 20_000, "priority": 10},
    ],
}  # fmt: skip


def test_protocol2_reclaims_borrowed_gpus(tmp_path: Path) -> None:
    """prod's guaranteed GPU, borrowed by batch, is reclaimed on arrival; the victim reruns."""
    path = tmp_path / "quota.json"
    path.write_text(json.dumps(QUOTA_TRACE))
    result = replay2(load_trace(path), parse_policy("BEST_FIT"), 42)
    assert (result.reclaims, result.evictions) == (1, 1)
    assert result.never_started == 0
    assert result.started == 3
    assert result.mean_pending_s == 0.0  # pending time counts to the first start
    assert result.timeline[0][1] == 100.0
