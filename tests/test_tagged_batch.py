"""A tagged batch (workloads and a tag each, as ``service.place_request_decoder`` decodes Place
and ``Engine.place(..., tags=...)`` takes it) is grouped and checked by its tags with the same
outcome as by its fields: the same groups, answers, errors and state."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.engine import Engine, place
from strata_policy.errors import InvalidArgument
from strata_policy.model import BatchResult, Order, Policy, Snapshot, Workload
from strata_policy.placement.place import PlacementOptions
from strata_policy.quota.batch import group, group_tagged, representatives
from strata_policy.testing import node, scope

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

NODES = tuple(node(f"n{i}", cpu=16, gpus=4 + 4 * (i % 2)) for i in range(12))
SCOPES = (scope("org"), scope("a", "org", limit={"gpu": 20000}), scope("b", "org"))
FAST = place.FAST_PATH_MIN
Tagged = tuple[list[Workload], list[object]]  # a batch and its tags

# a shape: scope, cpu, gpu, replicas, priority, spread, gpu model; "zz", "", -1 and 0 replicas
# are invalid, 1500 milli-GPUs too
shapes = st.tuples(
    st.sampled_from(["org", "a", "b", "zz", ""]),
    st.sampled_from([0, 1000, 2000, -1]),
    st.sampled_from([0, 500, 1000, 1500]),
    st.sampled_from([1, 1, 2, 0]),
    st.integers(0, 1),
    st.booleans(),
    st.sampled_from(["", "A100"]),
)


def _workload(shape: tuple[str, int, int, int, int, bool, str], wid: str, at: int) -> Workload:
    s, cpu, gpu, replicas, priority, spread, model = shape
    return Workload(
        wid,
        s,
        {"cpu": cpu, "gpu": gpu},
        replicas=replicas,
        priority=priority,
        spread_key="kubernetes.io/hostname" if spread else "",
        gpu_model=model,
        queued_at_ms=at,
    )


@st.composite
def tagged_batches(draw: st.DrawFn, valid: bool, min_size: int = 0) -> Tagged:
    """Workloads drawn from a few shapes, each shape's workloads under one or two tags (so
    equal keys come under distinct tags too); ids mostly distinct, sometimes repeated, empty
    or held ("running"), and queued_at_ms differing within a tag."""
    kinds = draw(st.lists(shapes, min_size=1, max_size=4))
    if valid:
        kinds = [("org", abs(c), g % 1500, max(r, 1), p, sp, m) for c, g, r, p, sp, m in [
            k[1:] for k in kinds]]  # fmt: skip
    picks = draw(
        st.lists(st.tuples(st.integers(0, len(kinds) - 1), st.booleans()), min_size=min_size,
                 max_size=FAST * 2 + 8)
    )  # fmt: skip
    odd_ids = st.sampled_from(["w0", "", "running"])
    tags = {(k, half): object() for k in range(len(kinds)) for half in (False, True)}
    workloads, out_tags = [], []
    for i, (k, half) in enumerate(picks):
        wid = f"w{i}" if valid or draw(st.integers(0, 9)) else draw(odd_ids)
        workloads.append(_workload(kinds[k], wid, draw(st.integers(0, 3))))
        out_tags.append(tags[k, half])
    return workloads, out_tags


@pytest.mark.parametrize(
    ("keys", "tags", "group_of", "sizes"),
    [
        pytest.param([], [], [], [], id="empty batch: no groups"),
        pytest.param([0, 0, 0], [0, 0, 0], [0, 0, 0], [3], id="one tag: one group"),
        pytest.param([0, 0, 1, 0], [0, 1, 2, 1], [0, 0, 1, 0], [3, 1], id="two tags, one key"),
        pytest.param([1, 0, 1, 0], [0, 1, 0, 1], [0, 1, 0, 1], [2, 2], id="tags interleaved"),
        pytest.param([0, 1, 0], [0, 1, 2], [0, 1, 0], [2, 1], id="a later tag joins group 0"),
    ],
)
def test_group_tagged_cases(
    keys: list[int], tags: list[int], group_of: list[int], sizes: list[int]
) -> None:
    """Tags of equal keys merge into one group; groups are numbered by first appearance."""
    objects = [object() for _ in range(3)]
    workloads = [Workload(f"w{i}", "org", {"cpu": 1 + k}) for i, k in enumerate(keys)]
    got = group_tagged(workloads, [objects[t] for t in tags])
    assert (got.group, got.sizes) == (group_of, sizes)
    assert got == group(workloads)


@settings(max_examples=150)
@given(batch=tagged_batches(valid=False))
def test_group_tagged_equals_group(batch: Tagged) -> None:
    """Grouping by tags gives exactly the groups (numbers, firsts, sizes) grouping by fields
    gives."""
    workloads, tags = batch
    got = group_tagged(workloads, tags)
    want = group(workloads)
    assert got == want
    assert all(a is b for a, b in zip(got.firsts, want.firsts, strict=True))


def test_representatives_are_each_tags_first() -> None:
    """Each distinct tag's first index, in order, whatever repeats in between."""
    a, b, c = object(), object(), object()
    assert representatives([a, a, b, a, c, b]) == [0, 2, 4]
    assert representatives([]) == []


def test_tags_must_match_the_workloads() -> None:
    """A tag per workload: any other count is refused before anything changes."""
    w = Workload("w1", "org", {"cpu": 1})
    engine = Engine(clock=lambda: 1)
    engine.push_snapshot("c", Snapshot(NODES, SCOPES))
    before = engine.snapshot("c")
    with pytest.raises(ValueError, match="2 tags for 1 workloads"):
        engine.place("c", [w], tags=[1, 2])
    assert engine.snapshot("c") == before


def _place(engine: Engine, workloads: list[Workload], **kwargs: object) -> BatchResult | str:
    try:
        return engine.place("c", workloads, **kwargs)  # type: ignore[arg-type]
    except InvalidArgument as exc:
        return repr(exc.violations)


@settings(max_examples=60, deadline=None)
@given(
    batch=tagged_batches(valid=False) | tagged_batches(valid=True, min_size=FAST),
    order=st.sampled_from([Order.FIFO, Order.PRIORITY, Order.FAIR]),
    policy=st.sampled_from(list(Policy)),
    dry_run=st.booleans(),
)
def test_tagged_place_equals_the_plain_list(
    batch: Tagged, order: Order, policy: Policy, dry_run: bool
) -> None:
    """Engine.place of a tagged batch answers (or refuses, with the same violations) and
    commits exactly as the same workloads as a plain list."""
    engines = Engine(clock=lambda: 1), Engine(clock=lambda: 1)
    for e in engines:
        e.push_snapshot("c", Snapshot(NODES, SCOPES))
        e.place("c", [Workload("running", "b", {"cpu": 4000, "gpu": 1000})])
    kwargs = {"order": order, "options": PlacementOptions(policy=policy), "dry_run": dry_run}
    workloads, tags = batch
    got = _place(engines[0], workloads, tags=tags, **kwargs)
    want = _place(engines[1], workloads, **kwargs)
    assert got == want
    assert engines[0].snapshot("c") == engines[1].snapshot("c")


def test_a_tagged_batch_with_a_bad_field_is_refused_as_usual() -> None:
    """A violation in any workload of a tag (here its first's only) names that workload."""
    good = Workload("w0", "org", {"cpu": 1000})
    bad = replace(good, id="w1", scope_id="zz")
    engine = Engine(clock=lambda: 1)
    engine.push_snapshot("c", Snapshot(NODES, SCOPES))
    with pytest.raises(InvalidArgument) as caught:
        engine.place("c", [good, bad, replace(good, id="w2")], tags=[1, 2, 1])
    assert [v.field for v in caught.value.violations] == ["workloads[1].scope_id"]
