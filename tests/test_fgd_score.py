"""FRAGMENTATION_AWARE's three scores on small named clusters, and the engine's default."""

from __future__ import annotations

import numpy as np
import pytest
from naive_placement import naive_from_matrix
from strata.policy.v1 import types_pb2 as pb

from strata_policy.errors import InvalidArgument
from strata_policy.model import Policy
from strata_policy.placement.fgd_inputs import per_capacity_weights
from strata_policy.placement.place import FgdScore, PlacementOptions, place_one
from strata_policy.service.servicer import options_from_proto
from strata_policy.simulate.policies import parse_policy, placement_options
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.nodes import NodeMatrix
from strata_policy.state.taskmix import TaskType
from strata_policy.testing import node, workload

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

# One GPU shape (11 CPUs per GPU: rho = 11 CPU milli per GPU milli) and one CPU-only shape.
MIX = (TaskType(11_000, 1000, "", 0.8), TaskType(32_000, 0, "", 0.2))


def _matrix_busy_second() -> NodeMatrix:
    """Node a: 8 idle GPUs, 96 CPUs. Node b: 96 CPUs, its 8 GPUs all taken."""
    m = matrix_from_nodes([node("a", cpu=96, gpus=8), node("b", cpu=96, gpus=8)])
    m.allocate(m.index["b"], {"gpu": 8000}, tuple(range(8)))
    return m


@pytest.mark.parametrize(
    ("score", "want"),
    [
        pytest.param(FgdScore.PAPER, "a", id="paper: ΔF is 0 on both, the tie goes to node order"),
        pytest.param(FgdScore.UNTRUNCATED, "a", id="untruncated: equal −ΔF, node order"),
        pytest.param(
            FgdScore.REFINED, "b", id="refined: CPU-only work avoids starving the idle GPUs"
        ),
    ],
)
def test_cpu_only_work_and_stranding(score: FgdScore, want: str) -> None:
    """32 CPUs of CPU-only work: only the refined score sees that node a's 8 idle GPUs would
    be left with 64 CPUs, less than the 88 their typical work needs."""
    m = _matrix_busy_second()
    wl = workload("w", "s", cpu=32)
    out = place_one(m, wl, PlacementOptions(Policy.FRAGMENTATION_AWARE, task_types=MIX,
                                            fgd_score=score))  # fmt: skip
    assert [p.node_id for p in out.placements] == [want]


@pytest.mark.parametrize(
    ("score", "want_node", "want_dev"),
    [
        pytest.param(FgdScore.PAPER, "a", 0, id="paper: same truncated score, node order"),
        pytest.param(FgdScore.REFINED, "b", 1, id="refined: the device left with least free"),
    ],
)
def test_share_tie_break(score: FgdScore, want_node: str, want_dev: int) -> None:
    """A 200-milli share scoring equally on two nodes goes, under the refined score, to the
    device it leaves with the least free milli."""
    mix = (TaskType(0, 100, "", 1.0),)
    m = matrix_from_nodes([node("a", cpu=8, gpus=2), node("b", cpu=8, gpus=2)])
    m.allocate(m.index["b"], {"gpu": 500}, (1,))
    wl = workload("w", "s", cpu=1, gpu_milli=200)
    out = place_one(m, wl, PlacementOptions(Policy.FRAGMENTATION_AWARE, task_types=mix,
                                            fgd_score=score))  # fmt: skip
    assert [(p.node_id, p.gpu_devices) for p in out.placements] == [(want_node, (want_dev,))]


# Model X: one node of 8 GPUs (a fifth of the cluster); model Y: four such nodes. A tenth of the
# tasks need X and a tenth need Y; the rest take any GPU.
MODEL_MIX = (
    TaskType(1000, 1000, "", 0.8),
    TaskType(1000, 1000, "X", 0.1),
    TaskType(1000, 1000, "Y", 0.1),
)


def _matrix_two_models() -> NodeMatrix:
    """Node x0 of model X, then y0 … y3 of model Y; 64 CPUs and 8 GPUs each."""
    nodes = [node("x0", cpu=64, gpus=8, model="X")]
    nodes += [node(f"y{i}", cpu=64, gpus=8, model="Y") for i in range(4)]
    return matrix_from_nodes(nodes)


@pytest.mark.parametrize(
    ("score", "gpu_model", "want"),
    [
        pytest.param(
            FgdScore.PAPER, "", "x0", id="paper: X and Y tasks weigh the same, node order"
        ),
        pytest.param(
            FgdScore.REFINED,
            "",
            "y0",
            id="refined: X's tasks claim X's fewer GPUs, so free work goes to Y",
        ),
        pytest.param(FgdScore.REFINED, "X", "x0", id="refined: an X task still runs on X"),
        pytest.param(FgdScore.REFINED, "X|Y", "y0", id="refined: either model, the roomier"),
    ],
)
def test_model_specific_nodes_kept_for_their_tasks(
    score: FgdScore, gpu_model: str, want: str
) -> None:
    """One GPU of free work: the paper's FGD rewards every node by the share of tasks that
    cannot use it (a tenth on both models) and takes the first; the refined mix weighs a task
    per unit of the GPUs it may use (X's tenth on a fifth of the GPUs weighs 0.5, Y's 0.125), so
    X's one node is kept for X's tasks. The naive twin agrees on the node and the score."""
    m = _matrix_two_models()
    twin = naive_from_matrix(m)
    wl = workload("w", "s", cpu=1, gpu_milli=1000, gpu_model=gpu_model)
    opts = PlacementOptions(Policy.FRAGMENTATION_AWARE, task_types=MODEL_MIX, fgd_score=score)
    out = place_one(m, wl, opts)
    assert [p.node_id for p in out.placements] == [want]
    naive = twin.place(wl, opts.policy, {}, 0, MODEL_MIX, score.value)
    assert (out.placements, out.score) == (naive.placements, naive.score)


@pytest.mark.parametrize(
    ("weights", "share", "want"),
    [
        pytest.param([0.8, 0.2], [1.0, 0.2], [0.8, 1.0], id="a fifth of the GPUs: five times"),
        pytest.param([0.5], [0.0], [0.5], id="a model no node has: unchanged"),
        pytest.param([0.5], [1.0], [0.5], id="any model: unchanged"),
    ],
)
def test_per_capacity_weights(weights: list[float], share: list[float], want: list[float]) -> None:
    """A shape's weight is divided by the share of the GPUs it may use, when that is in (0, 1)."""
    got = per_capacity_weights(np.array(weights), np.array(share))
    assert got.tolist() == pytest.approx(want)


def test_engine_default_is_refined() -> None:
    """A caller that names no score gets the refined one (the best on the openb trace)."""
    assert PlacementOptions(Policy.FRAGMENTATION_AWARE).fgd_score is FgdScore.REFINED


@pytest.mark.parametrize(
    ("wire", "want"),
    [
        pytest.param(
            pb.FRAGMENTATION_SCORE_UNSPECIFIED, FgdScore.REFINED, id="unspecified: default"
        ),
        pytest.param(pb.FRAGMENTATION_SCORE_PAPER, FgdScore.PAPER, id="paper"),
        pytest.param(pb.FRAGMENTATION_SCORE_UNTRUNCATED, FgdScore.UNTRUNCATED, id="untruncated"),
        pytest.param(pb.FRAGMENTATION_SCORE_REFINED, FgdScore.REFINED, id="refined"),
    ],
)
def test_score_from_the_wire(wire: int, want: FgdScore) -> None:
    """FragmentationOptions.score maps to PlacementOptions.fgd_score; UNSPECIFIED = REFINED."""
    frag = pb.FragmentationOptions(score=wire)
    opts = options_from_proto(pb.POLICY_FRAGMENTATION_AWARE, {}, 0, frag)
    assert opts.fgd_score is want


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("FRAGMENTATION_AWARE", FgdScore.REFINED, id="plain: the engine's default"),
        pytest.param("FRAGMENTATION_AWARE:paper", FgdScore.PAPER, id="paper"),
        pytest.param("fragmentation_aware:Untruncated", FgdScore.UNTRUNCATED, id="untruncated"),
        pytest.param("FRAGMENTATION_AWARE:refined", FgdScore.REFINED, id="refined"),
    ],
)
def test_simulate_variant_names(name: str, want: FgdScore) -> None:
    """The simulator's FGD variant names choose the engine's score."""
    assert placement_options(parse_policy(name), 42, ()).fgd_score is want


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("BEST_FIT:refined", id="refined is FGD's only"),
        pytest.param("FRAGMENTATION_AWARE:exact", id="unknown variant"),
    ],
)
def test_simulate_bad_variant(name: str) -> None:
    """A variant its policy does not have is refused."""
    with pytest.raises(InvalidArgument):
        parse_policy(name)
