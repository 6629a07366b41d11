"""The placement index's lifetimes (``placement.index`` and its ``placement.lineage`` caches):
what a copy shares and what it owns, what a commit invalidates, what is bounded, and that an
index kept up to date through any sequence of commits and copies answers exactly as one built
fresh on the same state."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strata_policy.model import Policy
from strata_policy.placement import index as index_module
from strata_policy.placement.index import PlacementIndex, index_of
from strata_policy.placement.inputs import search_levels, static_mask
from strata_policy.placement.lineage import MAX_FRAG_STATS, MAX_LABEL_KEYS, LineageCaches, remember
from strata_policy.placement.place import PlacementOptions, place_one
from strata_policy.state.matrix_build import matrix_from_nodes
from strata_policy.state.nodes import Lineage, NodeMatrix
from strata_policy.testing import node, workload

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

T_GPU = np.array([250, 500, 1000], dtype=np.int64)  # a mix's per-device milli
FGD = PlacementOptions(policy=Policy.FRAGMENTATION_AWARE)
ZONED = {"zone": "a"}


def cluster(n: int = 12) -> NodeMatrix:
    """``n`` nodes of two kinds (GPU or not), every third zoned."""
    return matrix_from_nodes(
        [
            node(
                f"n{i}",
                cpu=8,
                memory_gi=32,
                gpus=2 if i % 2 else 0,
                model="A" if i % 2 else "",
                labels=ZONED if i % 3 == 0 else {},
            )
            for i in range(n)
        ]
    )


def used(m: NodeMatrix) -> PlacementIndex:
    """``m``'s index after a placement of each kind has built every part of it."""
    place_one(m, workload("w", "s", cpu=1), PlacementOptions())
    place_one(m, workload("g", "s", cpu=1, gpu_milli=500), FGD)
    index = index_of(m)
    index.frag_stats(m, T_GPU)
    return index


@contextmanager
def fresh_index(m: NodeMatrix) -> Iterator[PlacementIndex]:
    """``m`` with an index and lineage built from scratch on its current state (restored
    after)."""
    saved = (m.lineage, m.placement_index)
    m.lineage, m.placement_index = Lineage(), None
    try:
        yield index_of(m)
    finally:
        m.lineage, m.placement_index = saved


# -- copies -------------------------------------------------------------------------------------


def _blocks(index: PlacementIndex, m: NodeMatrix) -> object:
    return index.block_index(m)


Probe = Callable[[PlacementIndex, NodeMatrix], object]


@pytest.mark.parametrize(
    ("probe", "kept"),
    [
        pytest.param(lambda i, m: i.lineage, "same", id="lineage caches: shared"),
        pytest.param(lambda i, m: i.lineage.layout(m), "same", id="block layout: shared"),
        pytest.param(
            lambda i, m: static_mask(m, workload("w", "s", cpu=1)),
            "same",
            id="static masks: shared",
        ),
        pytest.param(_blocks, "own", id="block summaries: copied"),
        pytest.param(
            lambda i, m: i.frag_stats(m, T_GPU).count_ge, "own", id="fgd statistics: copied"
        ),
        pytest.param(lambda i, m: i.trees, "empty", id="score trees: not carried"),
        pytest.param(lambda i, m: i.lock, "own", id="locks: own"),
    ],
)
def test_a_copy_shares_what_the_node_data_decides_and_owns_its_state(
    probe: Probe, kept: str
) -> None:
    """A copy shares the lineage's caches, owns copies of the summaries and statistics, and
    starts without score trees."""
    m = cluster()
    parent = probe(used(m), m)
    c = m.copy()
    child = probe(index_of(c), c)
    if kept == "same":
        assert child is parent
    elif kept == "empty":
        assert parent
        assert not child
    else:
        assert child is not parent
        if isinstance(child, np.ndarray):
            assert np.array_equal(child, parent)  # type: ignore[arg-type]


def test_a_copy_taken_before_any_placement_still_shares_the_lineage() -> None:
    """The lineage lives on the matrix from its making: a copy taken before the first
    placement shares whatever either builds later."""
    m = cluster()
    c = m.copy()
    assert m.placement_index is None
    assert c.placement_index is None
    assert index_of(c).lineage is index_of(m).lineage
    assert index_of(c).lineage.layout(c) is index_of(m).lineage.layout(m)


def test_new_node_data_starts_a_new_lineage() -> None:
    """A matrix made anew (a pushed snapshot, changed nodes) shares nothing with the old."""
    m = cluster()
    used(m)
    again = matrix_from_nodes(m.nodes)
    assert again.placement_index is None
    assert index_of(again).lineage is not index_of(m).lineage


def test_a_copy_and_its_parent_changed_alike_keep_their_own_statistics() -> None:
    """Parent and copy each commit once on the same node (equal versions, different device
    state): each one's statistics and summaries follow its own state."""
    m = cluster()
    used(m)
    c = m.copy()
    c.allocate(1, {"gpu": 250}, (0,))
    index_of(c).frag_stats(c, T_GPU)
    index_of(c).block_index(c)
    m.allocate(1, {"gpu": 1000}, (1,))
    assert m.version.tolist() == c.version.tolist()
    for each in (m, c):
        kept = answers(each, index_of(each))
        with fresh_index(each) as fresh:
            assert kept == answers(each, fresh)


class _SlowIndex(PlacementIndex):
    """A ``PlacementIndex`` slow to make: a thread making one lets the others run."""

    __slots__ = ()

    def __init__(self, lineage: LineageCaches) -> None:
        time.sleep(0.01)
        super().__init__(lineage)


def test_readers_racing_to_a_new_matrix_share_one_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads reaching a matrix (and its copy) with no index yet all get the same index and
    the same lineage caches, however slow making one is."""
    monkeypatch.setattr(index_module, "PlacementIndex", _SlowIndex)
    m = cluster()
    c = m.copy()
    start = threading.Barrier(8)

    def reach(matrix: NodeMatrix) -> PlacementIndex:
        start.wait(timeout=60)  # a hang guard: 8 threads meet at once unless the machine stalls
        return index_of(matrix)

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(reach, [m, c] * 4))
    assert {id(i) for i in got[::2]} == {id(index_of(m))}
    assert {id(i) for i in got[1::2]} == {id(index_of(c))}
    assert {id(i.lineage) for i in got} == {id(index_of(m).lineage)}


# -- commits ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "touched",
    [
        pytest.param([], id="nothing committed: nothing refreshed"),
        pytest.param([1], id="one replica: its node"),
        pytest.param([3, 3], id="two replicas on one node: that node"),
        pytest.param([1, 6, 11], id="three nodes: those three"),
    ],
)
def test_a_commit_invalidates_exactly_the_touched_rows(touched: list[int]) -> None:
    """After commits, the FGD statistics are stale on the touched nodes only and the block
    summaries change in their blocks and superblocks only; both then equal a fresh build."""
    m = cluster()
    index = used(m)
    before = tuple(a.copy() for a in index.block_index(m).summaries)
    for n in touched:
        m.allocate(n, {"cpu": 1000, "gpu": 500 if n % 2 else 0}, (0,) if n % 2 else ())
    only = index.frag[tuple(T_GPU.tolist())]
    assert np.flatnonzero(only.stamp != m.version).tolist() == sorted(set(touched))
    after = index.block_index(m).summaries
    layout = index.lineage.layout(m)
    blocks = {int(layout.block_of[n]) for n in touched}
    supers = {int(layout.super_of[b]) for b in blocks}
    rows = [blocks] * 4 + [supers] * 4 + [set(touched)]
    for old, new, allowed in zip(before, after, rows, strict=True):
        changed = {int(r) for r in np.flatnonzero((old != new).reshape(old.shape[0], -1).any(1))}
        assert changed <= allowed
    with fresh_index(m) as fresh:
        for got, want in zip(after, fresh.block_index(m).summaries, strict=True):
            assert np.array_equal(got, want)
        want_stats = fresh.frag_stats(m, T_GPU)
    got_stats = index.frag_stats(m, T_GPU)
    assert np.array_equal(got_stats.count_ge, want_stats.count_ge)
    assert np.array_equal(got_stats.below, want_stats.below)


# -- bounds -------------------------------------------------------------------------------------


def test_a_bounded_map_is_emptied_when_full() -> None:
    """``remember`` keeps at most ``bound`` entries: the one that would pass it starts over."""
    cache: dict[int, int] = {}
    for k in range(3):
        remember(cache, k, k, 3)
    assert cache == {0: 0, 1: 1, 2: 2}
    assert remember(cache, 3, 3, 3) == 3
    assert cache == {3: 3}


def test_label_codes_are_bounded_per_key() -> None:
    """At most ``MAX_LABEL_KEYS`` label keys are kept: keys come from requests."""
    m = cluster()
    lineage = index_of(m).lineage
    for k in range(MAX_LABEL_KEYS):
        lineage.label_codes(m, f"k{k}")
    assert len(lineage.label_codes_) == MAX_LABEL_KEYS
    lineage.label_codes(m, "one-more")
    assert list(lineage.label_codes_) == ["one-more"]


def test_fgd_statistics_keep_the_last_mixes_oldest_out_first() -> None:
    """The statistics of ``MAX_FRAG_STATS`` mixes are kept; one more drops the oldest."""
    m = cluster()
    index = index_of(m)
    mixes = [np.array([100 + i], dtype=np.int64) for i in range(MAX_FRAG_STATS + 1)]
    for t_gpu in mixes:
        index.frag_stats(m, t_gpu)
    assert list(index.frag) == [(100 + i,) for i in range(1, MAX_FRAG_STATS + 1)]


def test_score_trees_drop_the_least_recently_used_beyond_their_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With room for two trees, a third shape drops the one used least recently."""
    m = cluster(16)  # a tree of 16 leaves: 32 · 16 bytes
    monkeypatch.setattr(index_module, "TREE_BYTES", 2 * 32 * 16)
    shapes = [workload(f"w{c}", "s", cpu=c) for c in (1, 2, 3)]
    place_one(m, shapes[0], FGD)
    place_one(m, shapes[1], FGD)
    place_one(m, shapes[0], FGD)  # shape 1 is now the least recently used
    place_one(m, shapes[2], FGD)
    cpus = [dict(key[0])["cpu"] for key in index_of(m).trees]
    assert cpus == [1000, 3000]


# -- fresh equals maintained --------------------------------------------------------------------

PROBES = [
    workload("p-cpu", "s", cpu=1, memory_gi=1),
    workload("p-gpu", "s", cpu=1, gpu_milli=500),
    workload("p-whole", "s", cpu=2, gpu_milli=1000, gpu_model="A"),
    workload("p-zoned", "s", cpu=1, node_selector=ZONED),
]
POLICIES = [Policy.LEAST_ALLOCATED, Policy.MOST_ALLOCATED, Policy.FRAGMENTATION_AWARE]


def answers(m: NodeMatrix, index: PlacementIndex) -> list[object]:
    """What every field of ``index`` answers on ``m``'s state: summaries, FGD statistics,
    static masks and search levels, and each probe's placement under each policy."""
    out: list[object] = [a.tolist() for a in index.block_index(m).summaries]
    stats = index.frag_stats(m, T_GPU)
    out += [stats.count_ge.tolist(), stats.below.tolist()]
    out += [index.lineage.node_ids, index.lineage.zero_request(m)]
    for wl in PROBES:
        mask = static_mask(m, wl)
        out += [mask.mask.tolist(), mask.blocks.tolist(), dict(mask.counts)]
        out += [a.tolist() for a in search_levels(m, wl)]
        for policy in POLICIES:
            got = place_one(m, wl, PlacementOptions(policy=policy))
            out.append((got.placements, got.score, got.reasons))
    return out


def _fits(m: NodeMatrix, n: int, gpu: int) -> tuple[int, ...] | None:
    """Devices for a replica of ``gpu`` milli on node ``n`` (None: none fit)."""
    if gpu == 0:
        return ()
    free = m.gpu_free[n]
    need = gpu if gpu < 1000 else 1000
    devices = [d for d in range(m.gpu_devices[n]) if free[d] >= need]
    return (devices[0],) if devices else None


steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("allocate"), st.sampled_from([0, 1, 3, 8]), st.sampled_from([0, 250, 1000])
        ),
        st.tuples(st.just("release"), st.integers(0, 50), st.just(0)),
        st.tuples(st.just("copy"), st.just(0), st.just(0)),
        st.tuples(st.just("back"), st.integers(0, 10), st.just(0)),  # on with an earlier one
        st.tuples(st.just("place"), st.integers(0, len(PROBES) - 1), st.integers(0, 2)),
        st.tuples(st.just("churn"), st.integers(20, 70), st.just(0)),  # wraps the journal
    ),
    min_size=1,
    max_size=12,
)
Held = list[tuple[int, dict[str, int], tuple[int, ...]]]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps)
def test_a_maintained_index_answers_as_a_fresh_one(steps: list[tuple[str, int, int]]) -> None:
    """Through allocations, releases, placements, copies (then changing parent and copy alike)
    and journal wraps, every matrix's index answers exactly as one built fresh on its state."""
    m = cluster()
    answers(m, index_of(m))
    held: Held = []
    lineage: list[tuple[NodeMatrix, Held]] = [(m, held)]
    for kind, a, b in steps:
        if kind == "allocate":
            request = {"cpu": 500, "gpu": b}
            devices = _fits(m, a, b)
            if devices is not None and m.replica_fit_error(a, request, devices) is None:
                m.allocate(a, request, devices)
                held.append((a, request, devices))
        elif kind == "release" and held:
            m.deallocate(*held.pop(a % len(held)))
        elif kind == "copy":
            m, held = m.copy(), list(held)
            lineage.append((m, held))
        elif kind == "back":
            m, held = lineage[a % len(lineage)]
        elif kind == "place":
            wl = PROBES[a]
            got = place_one(m, wl, PlacementOptions(policy=POLICIES[b]))
            for p in got.placements:
                m.allocate(m.index[p.node_id], wl.request, p.gpu_devices)
                held.append((m.index[p.node_id], dict(wl.request), p.gpu_devices))
        elif kind == "churn":
            for _ in range(a):
                m.allocate(0, {"cpu": 1}, ())
                m.deallocate(0, {"cpu": 1}, ())
        kept = answers(m, index_of(m))
        with fresh_index(m) as fresh:
            assert kept == answers(m, fresh)
    for each, _ in lineage:
        kept = answers(each, index_of(each))
        with fresh_index(each) as fresh:
            assert kept == answers(each, fresh)


def test_fresh_index_helper_restores_the_matrix() -> None:
    """The fresh-index helper leaves the matrix's own index and lineage as they were."""
    m = cluster()
    index = used(m)
    lineage = m.lineage
    with fresh_index(m) as fresh:
        assert fresh is not index
        assert isinstance(fresh.lineage, LineageCaches)
    assert m.placement_index is index
    assert m.lineage is lineage
