"""A batch's results in columns (``placement.outputs``) are the values ``Engine.place`` answers,
and ``result_encoder.columnar_bytes`` writes them as ``response_bytes`` writes those values."""

from __future__ import annotations

import math
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from message_servicer import add_results
from strata.policy.v1 import policy_service_pb2 as svc

from strata_policy.engine import Engine
from strata_policy.errors import StrataError
from strata_policy.model import (
    Decision,
    Order,
    Placement,
    Reason,
    ReasonCode,
    Scope,
    Snapshot,
    Workload,
    WorkloadResult,
)
from strata_policy.model.resources import Resources
from strata_policy.placement.outputs import ColumnarBatch, Part, PlacedColumns
from strata_policy.placement.place import PlacementOptions
from strata_policy.service import result_encoder
from strata_policy.service.metrics import Metrics
from strata_policy.service.result_encoder import columnar_bytes, response_bytes
from strata_policy.testing import node

pytestmark = pytest.mark.nojit  # also run without the JIT (Makefile: test)

ON_N1 = (Placement("n1", (0,)),)
ON_N2 = (Placement("n2", (1, 2)), Placement("n3", ()))
LENT = {"cpu": 2000, "gpu": 1000}
UNPLACED = WorkloadResult(
    "u", Decision.UNPLACED, reasons=(Reason(ReasonCode.NODES_UNFIT, "0/3 nodes fit"),)
)


def _run(ids: list[str], scores: list[float], borrowed: list[Resources] | None = None) -> Part:
    held = [ON_N1 if i % 2 else ON_N2 for i in range(len(ids))]
    return PlacedColumns(ids, held, borrowed or [LENT] * len(ids), scores)


def _expected(batch: ColumnarBatch) -> bytes:
    """The bytes gRPC serializes from the message the field-by-field path fills."""
    response = svc.PlaceResponse(generation=batch.generation)
    add_results(response, batch.batch_result().results)
    return response.SerializeToString()


@pytest.mark.parametrize(
    "batch",
    [
        pytest.param(ColumnarBatch(0, ()), id="no results"),
        pytest.param(ColumnarBatch(7, (_run(["a", "b", "c"], [1.0, 2.5, 0.5]),)), id="one run"),
        pytest.param(ColumnarBatch(7, (_run(["a", "b"], [0.0, -0.0]),)), id="no scores"),
        pytest.param(ColumnarBatch(7, (_run(["a", "b"], [0.0, 3.0]),)), id="some scores"),
        pytest.param(ColumnarBatch(7, (_run(["a", ""], [1.0, 1.0]),)), id="an empty id"),
        pytest.param(ColumnarBatch(7, (_run(["a", "x" * 128], [1.0, 1.0]),)), id="a long id"),
        pytest.param(ColumnarBatch(7, (_run(["é", "ü"], [math.inf, 1.0]),)), id="not ascii"),
        pytest.param(ColumnarBatch(7, (_run(["a\x00", "b"], [1.0, 1.0]),)), id="an id with NUL"),
        pytest.param(ColumnarBatch(7, (_run(["a", "b"], [math.nan, -1.0]),)), id="nan"),
        pytest.param(
            ColumnarBatch(7, (_run(["a", "b"], [1.0, 1.0], [{}, {"gpu": 1}]),)),
            id="mappings differ",
        ),
        pytest.param(
            ColumnarBatch(7, (_run(["a", "b"], [1.0, 1.0], [{}, {}]),)), id="nothing borrowed"
        ),
        pytest.param(
            ColumnarBatch(2**40, ((UNPLACED,), _run(["a"], [1.0]), (UNPLACED, UNPLACED))),
            id="values between runs",
        ),
    ],
)
def test_columnar_bytes_cases(batch: ColumnarBatch) -> None:
    """Written from the columns, or left to the per-result writer: the serialized bytes."""
    for _ in range(2):  # the second time from the cached fragments
        assert columnar_bytes(batch) == _expected(batch)


def test_batch_result_is_the_rows_as_values_in_order() -> None:
    """Each row is the PLACED result its columns name; parts keep their order."""
    batch = ColumnarBatch(3, ((UNPLACED,), _run(["a", "b"], [0.5, 0.0])))
    assert batch.batch_result().results == (
        UNPLACED,
        WorkloadResult("a", Decision.PLACED, ON_N2, borrowed=LENT, score=0.5),
        WorkloadResult("b", Decision.PLACED, ON_N1, borrowed=LENT, score=0.0),
    )
    assert len(batch) == 3
    assert batch.held_as_values() == [UNPLACED]
    assert batch.placed_in_columns() == 2


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6) | st.just("x" * 130)
amounts = st.dictionaries(st.sampled_from(["cpu", "gpu", "é"]), st.integers(-(2**63), 2**63 - 1))
placements = st.lists(
    st.builds(
        Placement,
        node_id=st.sampled_from(["", "n1", "nœud-3"]),
        gpu_devices=st.lists(st.integers(0, 2**31 - 1), max_size=3).map(tuple),
    ),
    max_size=3,
).map(tuple)
scores = st.floats() | st.sampled_from([0.0, -0.0, math.inf, 87.5])


@st.composite
def runs(draw: st.DrawFn) -> PlacedColumns:
    """A run whose rows share some placement tuples and mappings (as the engine's do) and
    whose scores are all set, all zero or mixed."""
    n = draw(st.integers(0, 8))
    tuples = draw(st.lists(placements, min_size=1, max_size=3))
    mappings = draw(st.lists(amounts, min_size=1, max_size=2))
    shared_score = draw(st.sampled_from(["own", "zero", "one"]))
    return PlacedColumns(
        draw(st.lists(texts, min_size=n, max_size=n)),
        draw(st.lists(st.sampled_from(tuples), min_size=n, max_size=n)),
        draw(st.lists(st.sampled_from(mappings), min_size=n, max_size=n)),
        [0.0] * n
        if shared_score == "zero"
        else [2.5] * n
        if shared_score == "one"
        else draw(st.lists(scores, min_size=n, max_size=n)),
    )


values = st.lists(
    st.builds(
        WorkloadResult,
        workload_id=texts,
        decision=st.sampled_from(list(Decision)),
        placements=placements,
        reasons=st.just(()) | st.just(UNPLACED.reasons),
        borrowed=amounts,
        score=scores,
    ),
    max_size=3,
).map(tuple)


@settings(max_examples=300)
@given(st.lists(runs() | values, max_size=4), st.sampled_from([0, 3, 2**40]))
def test_columnar_bytes_equal_the_serialized_response(parts: list[Part], generation: int) -> None:
    """Any batch of parts: the bytes ``response_bytes`` writes for its values, which are the
    serialized message's."""
    batch = ColumnarBatch(generation, tuple(parts))
    expected = response_bytes(generation, batch.batch_result().results)
    assert expected == _expected(batch)
    for _ in range(2):  # the second time from the cached fragments
        assert columnar_bytes(batch) == expected


@given(runs())
def test_rows_equal_the_constructed_results(run: PlacedColumns) -> None:
    """``results()`` equals the values the constructor builds, row by row."""
    assert run.results() == [
        WorkloadResult(i, Decision.PLACED, p, borrowed=b, score=s)
        for i, p, b, s in zip(run.ids, run.placements, run.borrowed, run.scores, strict=True)
    ]


@given(st.lists(runs() | values, max_size=4))
def test_metrics_count_columns_as_their_values(parts: list[Part]) -> None:
    """Counting a batch's values and its columns gives the counts of all its values."""
    batch = ColumnarBatch(1, tuple(parts))
    split, whole = Metrics(), Metrics()
    split.observe_results("Place", batch.held_as_values(), placed=batch.placed_in_columns())
    whole.observe_results("Place", batch.batch_result().results)
    assert split.decisions._counts == whole.decisions._counts


NODES = tuple(node(f"n{i}", cpu=16, gpus=2 * (i % 3)) for i in range(8))
SCOPES = (Scope("org"), Scope("a", "org", guarantee={"gpu": 2000}, limit={"cpu": 60000}))


def _engine() -> Engine:
    engine = Engine(clock=lambda: 5)
    engine.push_snapshot("c", Snapshot(NODES, SCOPES))
    return engine


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(0, 90),
    cpu=st.sampled_from([500, 2000, 7000]),
    gpu=st.sampled_from([0, 500, 1000]),
    scope=st.sampled_from(["a", "org", "nope"]),
    dry_run=st.booleans(),
    request_id=st.sampled_from(["", "r"]),
)
def test_place_columnar_equals_place(
    count: int, cpu: int, gpu: int, scope: str, dry_run: bool, request_id: str
) -> None:
    """Batches big enough for the lane, filling the nodes or the limit part way: the columns'
    values are ``place``'s answer, errors and state alike, and a retry is answered the same
    by either call."""
    batch = [Workload(f"w{i}", scope, {"cpu": cpu, "gpu": gpu}) for i in range(count)]
    kwargs = {
        "order": Order.FIFO,
        "options": PlacementOptions(),
        "dry_run": dry_run,
        "request_id": request_id,
    }
    plain, columnar = _engine(), _engine()
    try:
        want: object = plain.place("c", batch, **kwargs)  # type: ignore[arg-type]
    except StrataError as exc:
        want = exc
    try:
        answer = columnar.place_columnar("c", batch, **kwargs)  # type: ignore[arg-type]
        got: object = answer.batch_result()
    except StrataError as exc:
        got = exc
    assert type(got) is type(want)
    if isinstance(want, StrataError):
        assert str(got) == str(want)
    else:
        assert got == want
    if request_id and not isinstance(want, StrataError):  # a retry: the first answer, either way
        assert columnar.place("c", batch, **kwargs) == want  # type: ignore[arg-type]
        again = columnar.place_columnar("c", batch, **kwargs)  # type: ignore[arg-type]
        assert again.batch_result() == want
    assert plain.snapshot("c") == columnar.snapshot("c")


def test_full_tables_are_emptied_and_refilled() -> None:
    """Past the tables' bound the fragments are worked out again: the same bytes."""
    held = [(Placement(f"n{i}", (i,)),) for i in range(12)]
    batch = ColumnarBatch(
        1, (PlacedColumns([f"w{i}" for i in range(12)], held, [LENT] * 12, [1.0] * 12),)
    )
    with mock.patch.object(result_encoder, "_MAX_CACHED", 5):
        for _ in range(3):
            assert columnar_bytes(batch) == _expected(batch)


def test_fragments_follow_values_not_identities() -> None:
    """Tuples made and freed one after another (a new one may take a freed one's address)
    each encode as their own value: the fragments are memoized by value, not by ``id``."""
    for i in range(200):
        held = (Placement(f"n{i}", (i % 3,)),)
        batch = ColumnarBatch(1, (PlacedColumns(["w"], [held], [LENT], [1.0]),))
        assert columnar_bytes(batch) == _expected(batch)
        assert response_bytes(1, batch.batch_result().results) == _expected(batch)
        del held, batch
    tables = [result_encoder._tuple_fragments, *result_encoder._middles_by_lent.values()]
    assert all(isinstance(key, tuple) for table in tables for key in table)
