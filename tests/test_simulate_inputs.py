"""The simulator's inputs and measures: trace loading, protocol-1 arrivals, FGD fragmentation."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.errors import InvalidArgument
from strata_policy.model import Placement, Workload
from strata_policy.simulate.arrivals import build_arrivals, gpu_of, shuffled_nodes
from strata_policy.simulate.metrics import ClusterMirror, Shape, bucket_curve, typical_shapes
from strata_policy.simulate.progress import Progress
from strata_policy.simulate.trace import load_generic, load_openb, load_trace, pod_gpu_request
from strata_policy.testing import node, workload

OPENB = Path(__file__).resolve().parents[1] / "data" / "openb"
NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,1024,2,P100\nn1,8000,512,0,\n"
PODS_CSV = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "p0,4000,2048,1,500,V100M16|V100M32,LS,Running,10,20,10\n"
    "p1,1000,0,2,1000,,BE,Running,11,,11\n"
    "p2,2000,16,0,0,,BE,Failed,12,13,12\n"
)


@pytest.fixture
def openb_dir(tmp_path: Path) -> Path:
    """A tiny openb-format folder."""
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES_CSV)
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS_CSV)
    return tmp_path


@pytest.mark.parametrize(
    ("num_gpu", "gpu_milli", "expected"),
    [
        pytest.param(0, 0, 0, id="cpu-only pod asks for no gpu"),
        pytest.param(1, 460, 460, id="share of one device"),
        pytest.param(1, 1000, 1000, id="one whole device"),
        pytest.param(8, 1000, 8000, id="eight whole devices"),
        pytest.param(2, 500, 2000, id="several devices are always whole"),
    ],
)
def test_pod_gpu_request(num_gpu: int, gpu_milli: int, expected: int) -> None:
    """openb num_gpu/gpu_milli map to the device-level request of DESIGN §1."""
    assert pod_gpu_request(num_gpu, gpu_milli) == expected


def test_load_openb_maps_units_models_and_times(openb_dir: Path) -> None:
    """Nodes get base units and models; pods get gpu_model, scope = qos, times in ms."""
    trace = load_trace(openb_dir)
    assert trace.nodes[0].capacity == {"cpu": 64000, "memory": 1024 * 2**20, "gpu": 2000}
    assert trace.nodes[0].gpu_model == "P100"
    assert trace.nodes[1].capacity == {"cpu": 8000, "memory": 512 * 2**20}
    p0, p1, p2 = trace.workloads
    assert p0.workload.request == {"cpu": 4000, "memory": 2048 * 2**20, "gpu": 500}
    assert p0.workload.gpu_models == {"V100M16", "V100M32"}
    assert (p0.workload.scope_id, p0.workload.priority) == ("LS", 100)
    assert (p0.arrival_ms, p0.departure_ms) == (10_000, 20_000)
    assert p1.workload.request["gpu"] == 2000
    assert p1.departure_ms is None
    assert "gpu" not in p2.workload.request
    assert [s.id for s in trace.scopes] == ["BE", "LS"]
    assert trace.gpu_milli == 2000


def test_load_openb_rejects_bad_number(tmp_path: Path) -> None:
    """A malformed row names the file, line and field instead of replaying half a trace."""
    (tmp_path / "nodes.csv").write_text(NODES_CSV)
    pods = tmp_path / "pods.csv"
    pods.write_text(PODS_CSV.replace("4000,2048", "four,2048"))
    with pytest.raises(InvalidArgument, match=r"pods.csv:2: cpu_milli='four'"):
        load_openb(pods, tmp_path / "nodes.csv")


def test_load_generic_json(tmp_path: Path) -> None:
    """Our JSON format takes human units and timed workloads."""
    doc = {
        "nodes": [
            {
                "id": "a",
                "capacity": {"cpu": "8", "memory": "32Gi", "gpu": "4"},
                "gpu_model": "A100",
                "labels": {"zone": "z1"},
            }
        ],
        "scopes": [{"id": "team", "guarantee": {"gpu": "2"}, "limit": {"gpu": "3"}}],
        "workloads": [
            {
                "id": "w",
                "scope_id": "team",
                "request": {"cpu": "500m", "gpu": "0.5"},
                "arrival_ms": 5,
                "departure_ms": 9,
                "priority": 3,
            }
        ],
    }
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    trace = load_generic(path)
    assert trace.nodes[0].capacity == {"cpu": 8000, "memory": 32 * 2**30, "gpu": 4000}
    assert trace.scopes[0].limit == {"gpu": 3000}
    (w,) = trace.workloads
    assert w.workload.request == {"cpu": 500, "gpu": 500}
    assert (w.arrival_ms, w.departure_ms, w.workload.priority) == (5, 9, 3)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        pytest.param({"nodes": []}, "no nodes", id="no nodes"),
        pytest.param({"nodes": [{"capacity": {}}]}, "'id' must be", id="node without id"),
        pytest.param(
            {"nodes": [{"id": "a", "capacity": {"cpu": "lots"}}]}, "cannot parse", id="bad amount"
        ),
    ],
)
def test_load_generic_rejects(tmp_path: Path, doc: object, message: str) -> None:
    """A bad JSON trace is an InvalidArgument that says where."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidArgument, match=message):
        load_generic(path)


def _pool(n: int) -> list[Workload]:
    return [workload(f"p{i:03d}", "s", cpu=1, gpu_milli=(i % 4) * 300) for i in range(n)]


@pytest.mark.parametrize(
    ("size", "capacity", "tune"),
    [
        pytest.param(40, 10_000, 1.3, id="short: appended up to 130 %"),
        pytest.param(40, 4_000, 1.3, id="over: pods deleted down to 130 %"),
        pytest.param(40, 20_000, 0.5, id="tuned down to 50 %"),
    ],
)
def test_build_arrivals_tunes_to_target(size: int, capacity: int, tune: float) -> None:
    """Arrivals request at most tune × capacity, and the next draw would overshoot when short."""
    arrivals = build_arrivals(_pool(size), capacity, seed=42, tune=tune)
    requested = sum(gpu_of(w) for w in arrivals)
    assert requested <= tune * capacity
    assert requested > tune * capacity - 900  # within one pod's gpu of the target
    assert len({w.id for w in arrivals}) == len(arrivals)


def test_build_arrivals_is_a_seeded_shuffle() -> None:
    """Same seed, same order; another seed, another order; order of the input is irrelevant."""
    pool = _pool(30)
    a = build_arrivals(pool, 100_000, seed=42, tune=0.01)
    assert [w.id for w in a] == [w.id for w in build_arrivals(pool[::-1], 100_000, 42, 0.01)]
    b = build_arrivals(pool, 100_000, seed=43, tune=0.01)
    assert [w.id for w in a] != [w.id for w in b]


def test_shuffled_nodes_keeps_every_node(openb_dir: Path) -> None:
    """The per-seed node order is a permutation, with one unlimited scope per workload scope."""
    trace = load_trace(openb_dir)
    snap = shuffled_nodes(trace, 7)
    assert sorted(n.id for n in snap.nodes) == sorted(n.id for n in trace.nodes)
    assert [s.id for s in snap.scopes] == ["BE", "LS"]
    assert all(not s.limit and not s.guarantee for s in snap.scopes)


def test_typical_shapes_on_openb_default() -> None:
    """The default trace has 35 typical shapes covering 95 % of pods, as the paper says."""
    trace = load_trace(OPENB)
    shapes = typical_shapes(t.workload for t in trace.workloads)
    assert len(shapes) == 35
    assert sum(s.weight for s in shapes) == pytest.approx(1.0)
    assert any(s.gpu == 0 for s in shapes)


FRAG_CASES = [
    # (device free, cpu free, shape, expected F_n)
    pytest.param([1000, 300], 8000, Shape(1000, 500, "", 1.0), 300, id="share: small device left"),
    pytest.param([200, 300], 8000, Shape(1000, 500, "", 1.0), 500, id="share fits nowhere: all"),
    pytest.param([1000, 300], 500, Shape(1000, 500, "", 1.0), 1300, id="too little cpu: all"),
    pytest.param([1000, 300], 8000, Shape(0, 0, "", 1.0), 1300, id="cpu-only shape: all idle"),
    pytest.param([1000, 1000], 8000, Shape(1000, 2000, "", 1.0), 0, id="two whole devices fit"),
    pytest.param([1000, 999], 8000, Shape(1000, 2000, "", 1.0), 1999, id="one whole short: all"),
    pytest.param([1000, 300], 8000, Shape(1000, 500, "T4", 1.0), 1300, id="model not allowed"),
    pytest.param([1000, 300], 8000, Shape(1000, 500, "P100|T4", 0.5), 150, id="weighted, allowed"),
]


@pytest.mark.parametrize(("free", "cpu", "shape", "expected"), FRAG_CASES)
def test_fragmentation_definition(free: list[int], cpu: int, shape: Shape, expected: float) -> None:
    """F_n(m) follows the paper's frag.go definition case by case."""
    mirror = ClusterMirror([node("n", cpu=cpu / 1000, gpus=len(free), model="P100")])
    mirror.gpu_free[0, : len(free)] = free
    assert mirror.fragmentation([shape])[0] == pytest.approx(expected)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=1, max_size=8), st.integers(1, 999))
def test_fragmentation_bounded_by_idle(free: list[int], share: int) -> None:
    """0 ≤ F_n ≤ idle GPU milli for any device state, so the ratio is a share."""
    mirror = ClusterMirror([node("n", cpu=8, gpus=len(free))])
    mirror.gpu_free[0, : len(free)] = free
    f = mirror.fragmentation([Shape(0, share, "", 0.5), Shape(0, 1000, "", 0.5)])[0]
    assert 0 <= f <= sum(free) + 1e-9


def test_mirror_apply_and_release() -> None:
    """Replaying placements takes and gives back exactly; overfilling a device is refused."""
    mirror = ClusterMirror([node("n", cpu=8, gpus=2)])
    w = workload("w", "s", cpu=2, gpu_milli=600)
    mirror.apply(w, [Placement("n", (1,))])
    assert mirror.gpu_allocated == 600
    with pytest.raises(AssertionError, match="out of range"):
        mirror.apply(w, [Placement("n", (1,))])
    assert (mirror.gpu_allocated, int(mirror.cpu_free[0])) == (600, 6000)  # nothing half-applied
    mirror.apply(w, [Placement("n", (1,))], sign=-1)
    assert (mirror.gpu_allocated, int(mirror.cpu_free[0])) == (0, 8000)


def test_bucket_curve_rounds_and_fills_gaps() -> None:
    """Events bucket by rounded arrived %, averaged; an empty bucket takes its ±1 neighbours."""
    capacity = 1000
    arrived = np.array([10, 20, 40, 41], dtype=np.int64)  # 1 %, 2 %, 4 %, 4 %
    allocated = np.array([10, 20, 30, 40], dtype=np.int64)
    curve = bucket_curve(arrived, allocated, capacity)
    assert curve[1] == pytest.approx(1.0)
    assert curve[4] == pytest.approx(3.5)
    assert curve[3] == pytest.approx((2.0 + 3.0 + 4.0) / 3)  # neighbours 2 and 4
    assert np.isnan(curve[10])


def test_progress_is_quiet_then_draws() -> None:
    """Nothing is drawn before quiet_s; then one carriage-returned line, ended on close."""
    now = [0.0]
    out = io.StringIO()
    bar = Progress(4, stream=out, quiet_s=2.0, clock=lambda: now[0])
    bar.update()
    assert out.getvalue() == ""
    now[0] = 3.0
    bar.update()
    bar.close()
    text = out.getvalue()
    assert text.startswith("\r[")
    assert "2/4 replays" in text
    assert "~0:03 left" in text
    assert text.endswith("\n")
