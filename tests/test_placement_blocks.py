"""The block search (``kernels.blocks``) against the naive twin, with blocks small enough that
every cluster spans many blocks and superblocks, and its summaries against a fresh build."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_placement import naive_from_matrix

from strata_policy.kernels import BlockLayout, search
from strata_policy.kernels.bounds import _bound_rows, _weight_terms
from strata_policy.model import Node, Policy, Workload
from strata_policy.placement.index import BlockIndex, device_set, index_of
from strata_policy.placement.inputs import _build_mask, request_row, weight_rows
from strata_policy.placement.place import POLICY_CODES, PlacementOptions, place_batch, place_one
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.nodes import NodeMatrix
from strata_policy.testing import node, workload

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

RESOURCE_POLICIES = [p for p in Policy if p not in (Policy.RANDOM, Policy.FRAGMENTATION_AWARE)]


@contextmanager
def block_sizes(block: int, sup: int) -> Iterator[None]:
    """Matrices built inside use blocks of ``block`` nodes and superblocks of ``sup`` blocks."""
    saved = (search.BLOCK_SIZE, search.SUPER_SIZE)
    search.BLOCK_SIZE, search.SUPER_SIZE = block, sup
    try:
        yield
    finally:
        search.BLOCK_SIZE, search.SUPER_SIZE = saved


@st.composite
def clusters(draw: st.DrawFn) -> list[Node]:
    """5-30 nodes of a few types (so classes span blocks), some cordoned, some zoned."""
    types = draw(
        st.lists(
            st.tuples(st.sampled_from([2, 4, 8]), st.sampled_from([4, 16]), st.integers(0, 4)),
            min_size=1,
            max_size=3,
        )
    )
    out = []
    for i in range(draw(st.integers(5, 30))):
        cpu, mem, gpus = types[draw(st.integers(0, len(types) - 1))]
        out.append(
            node(
                f"n{i}",
                cpu=cpu,
                memory_gi=mem,
                gpus=gpus,
                model="A" if gpus else "",
                labels={"zone": "z1"} if draw(st.integers(0, 3)) == 0 else {},
                unschedulable=draw(st.integers(0, 12)) == 0,
            )
        )
    return out


SHAPES = st.builds(
    lambda cpu, mem, gpu, sel: workload(
        "w", "s", cpu=cpu, memory_gi=mem, gpu_milli=gpu, node_selector=sel
    ),
    st.sampled_from([0, 0.5, 1, 2, 3]),
    st.sampled_from([0, 1, 4]),
    st.sampled_from([0, 250, 500, 750, 1000, 2000]),
    st.sampled_from([None, None, {"zone": "z1"}]),
)

# Plain (equal) weights take the tight bounds, the others the per-column ones; an infinite weight
# switches bounds off. (NaN is left out: the twin counts a NaN weight, the kernels skip it.)
WEIGHTS = st.one_of(
    st.just({}),
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "gpu"]),
        st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, -1.0, float("inf")]),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    st.lists(SHAPES, min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 15), st.integers(0, 5)), min_size=5, max_size=40),
    st.sampled_from(RESOURCE_POLICIES),
    WEIGHTS,
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_block_search_matches_naive_twin_through_commits(
    ns: list[Node],
    pool: list[Workload],
    steps: list[tuple[int, int]],
    policy: Policy,
    weights: dict[str, float],
    block: int,
    sup: int,
) -> None:
    """place_one answers like the naive twin (node, devices, score) on many small blocks,
    while replicas are committed and released (action 0: release the oldest held)."""
    opts = PlacementOptions(policy=policy, resource_weights=weights)
    with block_sizes(block, sup):
        m = matrix_from_nodes(ns)
        held: list[tuple[Workload, tuple[str, tuple[int, ...]]]] = []
        for pick, action in steps:
            if action == 0 and held:
                wl, (node_id, devices) = held.pop(0)
                m.deallocate(m.index[node_id], wl.request, devices)
                continue
            wl = pool[pick % len(pool)]
            want = naive_from_matrix(m).place(wl, policy, weights)
            got = place_one(m, wl, opts)
            assert got.placements == want.placements, (wl, got, want)
            assert got.score == want.score
            for p in got.placements:
                m.allocate(m.index[p.node_id], wl.request, p.gpu_devices)
                held.append((wl, (p.node_id, p.gpu_devices)))
            if action == 5:
                m = m.copy()  # a copy carries the summaries over and goes on from there


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    st.lists(SHAPES, min_size=1, max_size=12),
    st.sampled_from(RESOURCE_POLICIES),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_block_search_batch_equals_one_by_one(
    ns: list[Node], shapes: list[Workload], policy: Policy, block: int, sup: int
) -> None:
    """A batch on small blocks (summaries refreshed inside the kernel) equals place_one and
    commit, one by one, and leaves the matrix and its summaries untouched."""
    batch = [
        Workload(
            f"w{i}",
            "s",
            wl.request,
            replicas=1 + i % 2,
            node_selector=wl.node_selector,
            spread_key="kubernetes.io/hostname" if i % 4 == 3 else "",
        )
        for i, wl in enumerate(shapes)
    ]
    opts = PlacementOptions(policy=policy)
    with block_sizes(block, sup):
        m = matrix_from_nodes(ns)
        index = index_of(m).block_index(m)
        before = [a.copy() for a in index.summaries]
        got = place_batch(m, batch, opts)
        assert all((a == b).all() for a, b in zip(index.summaries, before, strict=True))
        for wl, out in zip(batch, got, strict=True):
            assert place_one(m, wl, opts) == out
            for p in out.placements:
                m.allocate(m.index[p.node_id], wl.request, p.gpu_devices)


def _fresh(m: NodeMatrix) -> BlockIndex:
    return BlockIndex(
        layout=index_of(m).lineage.layout(m), free=m.free, gpu_free=m.gpu_free, capacity=m.capacity,
        inv_cap=m.inv_capacity, inv_max_cap=m.inv_max_capacity,
    )  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(clusters(), st.lists(st.tuples(st.integers(0, 29), st.sampled_from([0, 500, 1000])),
                            max_size=80))  # fmt: skip
def test_summaries_follow_the_journal(ns: list[Node], takes: list[tuple[int, int]]) -> None:
    """Through allocations and releases (enough for the journal to wrap on small clusters), the
    kept summaries equal a fresh build."""
    with block_sizes(2, 2):
        m = matrix_from_nodes(ns)
        index_of(m).block_index(m)
        for i, (pick, gpu) in enumerate(takes):
            n = pick % len(ns)
            devs = [d for d in range(int(m.gpu_devices[n])) if m.gpu_free[n, d] >= max(gpu, 1)]
            chosen = tuple(devs[:1]) if devs and gpu else ()
            request = {"cpu": 100, "gpu": gpu if chosen else 0}
            if m.replica_fit_error(n, request, chosen) is None:
                m.allocate(n, request, chosen)
                if i % 2:
                    m.deallocate(n, request, chosen)
            if i % 7 == 6:
                kept = index_of(m).block_index(m)
                for a, b in zip(kept.summaries, _fresh(m).summaries, strict=True):
                    assert (a == b).all()
        kept = index_of(m).block_index(m)
        for a, b in zip(kept.summaries, _fresh(m).summaries, strict=True):
            assert (a == b).all()


@pytest.mark.parametrize(
    ("capacities", "block", "sup", "blocks", "supers"),
    [
        pytest.param([], 2, 2, [], [], id="no nodes: no blocks"),
        pytest.param([1, 1, 1], 2, 2, [[0, 1], [2]], [[0, 1]], id="one class cut every 2"),
        pytest.param(
            [1, 2, 1, 2, 1],
            2,
            1,
            [[0, 2], [4], [1, 3]],
            [[0], [1], [2]],
            id="classes interleaved: blocks of one class, in index order",
        ),
        pytest.param(
            [2, 1, 2], 1, 5, [[1], [0], [2]], [[0], [1, 2]], id="superblocks never span classes"
        ),
    ],
)
def test_layout(
    capacities: list[int], block: int, sup: int, blocks: list[list[int]], supers: list[list[int]]
) -> None:
    """Blocks hold one class each, in index order, cut by size; superblocks likewise."""
    cap = np.array([[c, 0, 0] for c in capacities], dtype=np.int64).reshape(-1, 3)
    lay = BlockLayout.build(cap, cap, np.zeros(cap.shape), block, sup)
    got = [
        lay.node_order[a:b].tolist()
        for a, b in zip(lay.block_start[:-1], lay.block_start[1:], strict=True)
    ]
    assert got == blocks
    got_s = [
        list(range(a, b)) for a, b in zip(lay.super_start[:-1], lay.super_start[1:], strict=True)
    ]
    assert got_s == supers
    assert all(lay.block_of[n] == b for b, members in enumerate(blocks) for n in members)


@settings(max_examples=60, deadline=None)
@given(
    clusters(),
    st.sampled_from(
        [
            (),
            (("zone", "z1"),),
            (("zone", "nowhere"),),
            (("nowhere", "z1"),),
            (("kubernetes.io/hostname", "n3"), ("zone", "z1")),
            (("kubernetes.io/hostname", "n4"), ("zone", "nowhere")),
        ]
    ),
    st.sampled_from(["", "A", "B", "A|B"]),
    st.booleans(),
    st.integers(1, 3),
)
def test_static_mask_matches_its_definition(
    ns: list[Node], selector: tuple[tuple[str, str], ...], models: str, wants_gpu: bool, block: int
) -> None:
    """The static mask equals schedulable & selector & model written with NumPy: per node (one
    pass), and its first-failure counts, block levels and selected nodes (per block)."""
    with block_sizes(block, 2):
        m = matrix_from_nodes(ns)
        got = _build_mask(index_of(m).lineage, m, selector, models, wants_gpu)
        sched = m.schedulable
        sel = np.ones(len(ns), dtype=np.bool_)
        for key, value in selector:
            sel &= np.array([nd.label(key) == value for nd in ns], dtype=np.bool_)
        names = {x for x in models.split("|") if x}
        model_ok = np.array(
            [not names or nd.gpu_model in names or (not wants_gpu and not nd.capacity.get("gpu"))
             for nd in ns], dtype=np.bool_,
        )  # fmt: skip
        want = sched & sel & model_ok
        assert got.mask.tolist() == want.tolist()
        assert got.selected.tolist() == sel.tolist()
        assert dict(got.counts) == {
            "unschedulable": int((~sched).sum()),
            "node_selector mismatch": int((sched & ~sel).sum()),
            "gpu_model mismatch": int((sched & sel & ~model_ok).sum()),
        }
        blocks, supers = index_of(m).lineage.layout(m).mask_levels(want)
        assert got.blocks.tolist() == blocks.tolist()
        assert got.supers.tolist() == supers.tolist()


def _take(m: NodeMatrix, n: int, wl: Workload) -> None:
    """Commit one replica of ``wl`` on node ``n`` (best-fit devices) when it fits there."""
    g = int(wl.request.get("gpu", 0))
    per, k = (g, 1) if g < 1000 else (1000, g // 1000)
    devs = [d for d in range(int(m.gpu_devices[n])) if m.gpu_free[n, d] >= per] if g else []
    chosen = tuple(sorted(devs, key=lambda d: (int(m.gpu_free[n, d]), d))[:k])
    if m.replica_fit_error(n, wl.request, chosen) is None:
        m.allocate(n, wl.request, chosen)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    SHAPES,
    st.lists(st.tuples(st.integers(0, 29), SHAPES), max_size=40),
    st.sampled_from(RESOURCE_POLICIES),
    WEIGHTS,
    st.integers(1, 4),
    st.integers(1, 3),
)
def test_bounds_cover_every_fitting_node(
    ns: list[Node],
    wl: Workload,
    takes: list[tuple[int, Workload]],
    policy: Policy,
    weights: dict[str, float],
    block: int,
    sup: int,
) -> None:
    """Every block's and superblock's bound is at least the twin's score of each of its nodes
    that fits the request, on states where the nodes of a block differ."""
    with block_sizes(block, sup):
        m = matrix_from_nodes(ns)
        for pick, other in takes:
            _take(m, pick % len(ns), other)
        index, lay = index_of(m).block_index(m), index_of(m).lineage.layout(m)
        req, _ = request_row(m, wl.request)
        wt = weight_rows(m, req, weights)
        weight_sum, trusted, plain, factor = _weight_terms(wt)
        hi, lo, offer, sums, s_hi, s_lo, s_offer, s_sums, _ = index.summaries
        code = POLICY_CODES[policy]
        out = []
        for rows, level in (
            (
                (hi, lo, offer, sums, lay.block_capacity, lay.block_inv_capacity),
                lay.block_start[:0],
            ),
            (
                (s_hi, s_lo, s_offer, s_sums, lay.super_capacity, lay.super_inv_capacity),
                lay.super_start,
            ),
        ):
            bounds = np.empty(rows[0].shape[0], dtype=np.float64)
            everywhere = np.ones(bounds.shape[0], dtype=np.bool_)
            _bound_rows(code, 0, bounds.shape[0], *rows, m.inv_max_capacity, everywhere,
                        everywhere, lay.node_order, lay.block_start, level, req, wt, weight_sum,
                        trusted, plain, factor, bounds)  # fmt: skip
            out.append(bounds)
        twin = naive_from_matrix(m)
        w = twin._weights(wl, weights)
        for n in range(len(ns)):
            if twin._reason(n, wl, []) is None:
                score = twin._score(policy, n, wl, w)
                if math.isnan(score):  # an infinite weight: never chosen, every bound is inf
                    continue
                b = int(lay.block_of[n])
                assert out[0][b] >= score, (n, b, score, out[0][b])
                assert out[1][int(lay.super_of[b])] >= score, (n, score)


@pytest.mark.parametrize(
    ("gpu_milli", "taken", "devices"),
    [
        pytest.param(500, 66, (66,), id="share: the best-fit device is past bit 62"),
        pytest.param(3000, 64, (64, 65, 66), id="whole devices past bit 62"),
        pytest.param(250, 0, (0,), id="share on a fresh node of 70 devices"),
    ],
)
def test_nodes_with_more_than_62_devices(
    gpu_milli: int, taken: int, devices: tuple[int, ...]
) -> None:
    """The search's device bit set cannot hold them: place_one lists the devices, as the twin."""
    m = matrix_from_nodes([node("big", cpu=64, memory_gi=64, gpus=70)])
    for d in range(taken):
        m.allocate(0, {"gpu": 1000}, (d,))
    wl = workload("w", "s", cpu=1, gpu_milli=gpu_milli)
    want = naive_from_matrix(m).place(wl, Policy.LEAST_ALLOCATED, {})
    for _ in range(2):
        got = place_one(m, wl, PlacementOptions())
        assert got.placements == want.placements
        assert got.placements[0].gpu_devices == devices


@pytest.mark.parametrize(
    ("bits", "devices"),
    [
        pytest.param(0, (), id="none"),
        pytest.param(0b101, (0, 2), id="a Python int"),
        pytest.param(np.int64(0b1100), (2, 3), id="a numpy int64, as the kernel answers unjitted"),
        pytest.param(1 << 62, (62,), id="the highest bit the search uses"),
    ],
)
def test_device_set(bits: int, devices: tuple[int, ...]) -> None:
    """A bit set's devices, ascending, whether the kernel ran compiled or as plain Python."""
    assert device_set(bits) == devices


@pytest.mark.parametrize(
    ("n_nodes", "size"),
    [
        pytest.param(0, 4, id="no nodes: the smallest"),
        pytest.param(10_000, 13, id="10k nodes: 313 blocks"),
        pytest.param(100_000, 40, id="100k nodes: 3,125 blocks"),
        pytest.param(10**7, 64, id="capped"),
    ],
)
def test_blocks_per_superblock(n_nodes: int, size: int) -> None:
    """Superblocks hold about sqrt(blocks / 2) blocks, within 4..64."""
    assert search.blocks_per_super(n_nodes) == size


def test_layout_takes_the_adaptive_superblock_size() -> None:
    """With no superblock size set, a matrix's layout cuts its blocks by blocks_per_super."""
    with block_sizes(search.BLOCK_SIZE, 0):
        m = matrix_from_nodes([node(f"n{i}") for i in range(2000)])  # one class, 63 blocks
        assert np.diff(index_of(m).lineage.layout(m).super_start).tolist() == [6] * 10 + [3]


# Blocks of two nodes: block 1 (n2, n3) bounds above block 0 (n0, n1) and is opened first; with
# these weights n2 scores what block 0's bound is, so block 0 is opened for the tie.
TIE = [(0, 2, 0), (1, 2, 0), (2, 2, 0), (3, 0, 12), (4, 4, 0), (5, 4, 0), (6, 4, 0), (7, 4, 0)]


@pytest.mark.parametrize("policy", RESOURCE_POLICIES)
@pytest.mark.parametrize(
    ("takes", "weights", "placed_on"),
    [
        pytest.param([], {}, "n0", id="alike nodes: the best block's first node, the rest skipped"),
        pytest.param([(0, 8, 0)], {}, "n1", id="the best block's first node does not fit"),
        pytest.param([(0, 2, 0)], {}, "n1", id="a better node after the first that fits"),
        pytest.param(
            TIE, {"cpu": 1.0, "memory": 2.0}, "n0",
            id="a tie in a lower block opened after a higher one: the lowest index wins",
        ),
        pytest.param(
            [(0, 3, 0), *TIE[1:]], {"cpu": 1.0, "memory": 2.0}, "n1",
            id="that tie after a node of the block that scores less: still the lowest index",
        ),
    ],
)  # fmt: skip
def test_opened_block_stops_at_its_bound(
    policy: Policy, takes: list[tuple[int, int, int]], weights: dict[str, float], placed_on: str
) -> None:
    """An opened block stops once its best reaches the block's bound, and the answer is still
    the twin's (highest score, lowest index), whichever block was opened first (the node named
    is LEAST_ALLOCATED's)."""
    with block_sizes(2, 2):
        m = matrix_from_nodes([node(f"n{i}", cpu=8, memory_gi=16) for i in range(8)])
        for n, cpu, mem in takes:
            _take(m, n, workload("t", "s", cpu=cpu, memory_gi=mem))
        wl = workload("w", "s", cpu=1, memory_gi=1)
        want = naive_from_matrix(m).place(wl, policy, weights)
        got = place_one(m, wl, PlacementOptions(policy=policy, resource_weights=weights))
        assert got.placements == want.placements
        assert got.score == want.score
        if policy is Policy.LEAST_ALLOCATED:
            assert [p.node_id for p in got.placements] == [placed_on]
