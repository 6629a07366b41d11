"""ctl's tables and its file reader, without a server: marks, dry runs, quantities in files."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from strata.policy.v1 import policy_service_pb2 as svc

from strata_policy.ctl import render
from strata_policy.ctl.request_files import FileError, decode
from strata_policy.model.quantity import MAX_AMOUNT, format_quantity
from strata_policy.service.client import request_descriptor, snapshot_descriptor

CLUSTER: dict[str, Any] = {
    "generation": "7",
    "nodeCount": 4,
    "scopeCount": 3,
    "workloadCount": 0,
    "capacity": {"gpu": "32000"},
    "scopes": [
        {"id": "acme", "kind": "org", "effectiveGuarantee": {"gpu": "24000", "cpu": "64000"}},
        {
            "id": "training",
            "parentId": "acme",
            "guarantee": {"gpu": "8000"},
            "effectiveGuarantee": {"gpu": "8000"},
            "oversubscribed": ["gpu"],
        },
        {"id": "batch", "guarantee": {"gpu": "0"}},
    ],
}


@pytest.mark.parametrize(
    ("scope", "cell"),
    [
        pytest.param(0, "64 CPU*, 24 GPU*", id="inherited from the children"),
        pytest.param(1, "8 GPU!", id="explicit and oversubscribed"),
        pytest.param(2, "-", id="explicit zero is no guarantee"),
    ],
)
def test_guarantee_cell(scope: int, cell: str) -> None:
    """GUARANTEE shows the effective guarantee, * where inherited, ! where oversubscribed."""
    assert render.guarantee(CLUSTER["scopes"][scope]) == cell


def test_marks_are_explained() -> None:
    """A mark in the table comes with its footnote, and only then."""
    text = render.scope_tree(CLUSTER)
    assert "* inherited: not set on the scope, the sum of its children's" in text
    assert "! oversubscribed: set below the sum of its children's" in text
    plain = render.scope_tree({**CLUSTER, "scopes": CLUSTER["scopes"][2:]})
    assert "inherited" not in plain
    assert "oversubscribed" not in plain


@pytest.mark.parametrize(
    ("text", "dry"),
    [
        pytest.param(render.results({"generation": "3"}, placing=True, dry=True), True, id="place"),
        pytest.param(render.results({"generation": "3"}, placing=False), False, id="admit"),
        pytest.param(render.victims({"generation": "3"}, dry=True), True, id="reclaim"),
    ],
)
def test_dry_run_mark(text: str, dry: bool) -> None:
    """A dry-run answer is marked on its first line; a committed one is not."""
    assert ("(dry run: nothing was changed)" in text.splitlines()[0]) is dry


AMOUNTS = st.dictionaries(
    st.sampled_from(["cpu", "gpu", "memory", "rdma"]),
    st.integers(min_value=0, max_value=MAX_AMOUNT),
    min_size=1,
)


@settings(max_examples=40)  # each example dumps and reads YAML: keep the suite fast
@given(AMOUNTS)
def test_quantities_in_a_file_are_base_units_on_the_wire(amounts: dict[str, int]) -> None:
    """Any amount written as its quantity in a file reaches the request in base units."""
    request = {k: format_quantity(k, v) for k, v in amounts.items()}
    text = yaml.safe_dump({"workloads": [{"id": "w", "scopeId": "s", "request": request}]})
    decoded = decode("f.yaml", text, request_descriptor("Admit"))
    assert decoded.data["workloads"][0]["request"] == {k: str(v) for k, v in amounts.items()}


@settings(max_examples=40)  # each example dumps and reads YAML: keep the suite fast
@given(AMOUNTS)
def test_raw_files_keep_base_units(amounts: dict[str, int]) -> None:
    """With --raw, integers are base units, unchanged, in any field style."""
    text = yaml.safe_dump({"nodes": [{"id": "n", "capacity": amounts, "gpu_model": "A"}]})
    decoded = decode("f.yaml", text, snapshot_descriptor(), raw=True)
    node = decoded.data["nodes"][0]
    assert node == {"id": "n", "capacity": {k: str(v) for k, v in amounts.items()}, "gpuModel": "A"}


@given(st.text(max_size=200))
def test_any_text_is_a_request_or_one_file_error(text: str) -> None:
    """Whatever a file holds, reading it gives a request or a FileError, never another error."""
    try:
        decode("f.yaml", text, request_descriptor("Place"))
    except FileError as exc:
        message = str(exc)
    else:
        return
    assert message.startswith("f.yaml")


KEYS = st.sampled_from(
    ["workloads", "id", "scopeId", "scope_id", "request", "replicas", "spread", "topologyKey",
     "policy", "order", "dryRun", "gpu", "cpu", "memory", "preemptible", "nodeSelector", "junk"]
)  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
    st.sampled_from(["4Gi", "500m", "0.5", "-1", "FAIR", "best_fit", "1e400", "0x1f"]),
)  # fmt: skip
DOCS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=40)  # each example dumps and reads YAML: keep the suite fast
@given(st.dictionaries(KEYS, DOCS, max_size=4))
def test_any_structure_is_a_request_or_one_file_error(doc: dict[str, Any]) -> None:
    """Mis-shaped requests are a FileError, never another error; what passes, protobuf takes."""
    try:
        decoded = decode("f.yaml", yaml.safe_dump(doc), request_descriptor("Place"))
    except FileError as exc:
        assert str(exc).startswith("f.yaml:")  # noqa: PT017  # the error is the value under test
    else:  # what the reader lets through, the client's protobuf parser takes
        json_format.ParseDict(decoded.data, svc.PlaceRequest())
