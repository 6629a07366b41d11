"""Hypothesis strategies that fill every field of the values and messages the hand-written
codecs handle, the field lists derived from the dataclasses and the message descriptors.

Each strategy is built from a table of *filled* strategies, one per field, that never draw the
field's default (an empty value, zero, absent). ``value_of``/``message_of`` refuse a table that
misses a field of the class, or names one it lacks (``MissingStrategy``): a field added to a
``model`` dataclass or to the ``.proto`` fails every test that imports this module until it has
a strategy. ``full=True`` sets every field; otherwise each field with a default is drawn
default or filled, so that the codecs' "empty stays unset" paths are exercised too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from google.protobuf.message import Message
from hypothesis import strategies as st
from strata.policy.v1 import policy_service_pb2 as svc
from strata.policy.v1 import types_pb2 as pb

from strata_policy.model import (
    Decision,
    Placement,
    Reason,
    ReasonCode,
    Victim,
    VictimReason,
    Workload,
    WorkloadResult,
)
from strata_policy.placement.outputs import PlacedColumns
from strata_policy.service.field_coverage import descriptor

Strategies = Mapping[str, st.SearchStrategy[Any]]


class MissingStrategy(TypeError):
    """A strategy table does not match its class's fields."""


def _match(kind: str, have: list[str], table: Strategies) -> None:
    missing = [n for n in have if n not in table]
    stale = [n for n in table if n not in have]
    if missing or stale:
        raise MissingStrategy(
            f"{kind}: no strategy for {missing}; strategies for {stale}, which it lacks"
        )


def value_of(cls: type, filled: Strategies, *, full: bool = False) -> st.SearchStrategy[Any]:
    """Values of dataclass ``cls``, each field drawn from ``filled`` (or left at its default,
    unless ``full`` or the field has none)."""
    fields = dataclasses.fields(cls)
    _match(cls.__name__, [f.name for f in fields], filled)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        default = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        if full or default is dataclasses.MISSING:
            kwargs[f.name] = filled[f.name]
        else:
            kwargs[f.name] = st.just(default) | filled[f.name]
    return st.builds(cls, **kwargs)


def message_of(
    cls: type[Message], filled: Strategies, *, full: bool = False
) -> st.SearchStrategy[Any]:
    """Messages of type ``cls``, each field drawn from ``filled`` (or absent unless ``full``)."""
    names = [f.name for f in descriptor(cls).fields]
    _match(cls.__name__, names, filled)
    kwargs = {n: filled[n] if full else st.none() | filled[n] for n in names}
    return st.builds(cls, **kwargs)


texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6)
int64s = st.integers(-(2**63), 2**63 - 1).filter(bool)
int32s = st.integers(-(2**31), 2**31 - 1).filter(bool)
amounts = st.dictionaries(st.sampled_from(["cpu", "gpu", "memory", "é"]), int64s, min_size=1)
scores = st.floats(allow_nan=False).filter(bool) | st.sampled_from([math.inf, 87.5])

PLACEMENT: Strategies = {
    "node_id": st.sampled_from(["n1", "n2", "nœud-3"]) | texts,
    "gpu_devices": st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=3).map(tuple),
}
REASON: Strategies = {
    "code": st.sampled_from(list(ReasonCode)).map(str),
    "message": texts,
    "scope_id": texts,
    "resource": texts,
    "usage": int64s,
    "limit": int64s,
    "request": int64s,
    "available": int64s,
    "node_counts": st.dictionaries(texts, int32s, min_size=1, max_size=2),
}
VICTIM: Strategies = {
    "workload_id": texts,
    "scope_id": texts,
    "reason": st.sampled_from(list(VictimReason)),
    "freed": amounts,
    "priority": int32s,
}


def placements(*, full: bool = False) -> st.SearchStrategy[tuple[Placement, ...]]:
    """A result's placements (one or more when ``full``)."""
    one = value_of(Placement, PLACEMENT, full=full)
    return st.lists(one, min_size=1 if full else 0, max_size=3).map(tuple)


def results(*, full: bool = False) -> st.SearchStrategy[WorkloadResult]:
    """``WorkloadResult`` values with any fields set (every field, nested too, when ``full``)."""
    return value_of(
        WorkloadResult,
        {
            "workload_id": texts,
            "decision": st.sampled_from(list(Decision)),
            "placements": placements(full=full).filter(bool),
            "reasons": st.lists(value_of(Reason, REASON, full=full), min_size=1, max_size=2).map(
                tuple
            ),
            "borrowed": amounts,
            "victims": st.lists(value_of(Victim, VICTIM, full=full), min_size=1, max_size=2).map(
                tuple
            ),
            "score": scores,
            "explanation": texts,
        },
        full=full,
    )


@st.composite
def placed_columns(draw: st.DrawFn, *, full: bool = False) -> PlacedColumns:
    """A run of PLACED results in columns, rows sharing placement tuples and mappings as the
    engine's do; every column set (ids, placements, mappings and scores not empty) when
    ``full``, else scores all zero, all one value, or mixed."""
    n = draw(st.integers(1 if full else 0, 6))
    tuples = draw(st.lists(placements(full=full), min_size=1, max_size=3))
    mappings = draw(st.lists(amounts if full else st.just({}) | amounts, min_size=1, max_size=2))
    row_scores = st.floats(allow_nan=False).filter(bool) if full else st.just(0.0) | scores
    columns = {
        "ids": st.lists(texts.filter(lambda t: "\x00" not in t), min_size=n, max_size=n),
        "placements": st.lists(st.sampled_from(tuples), min_size=n, max_size=n),
        "borrowed": st.lists(st.sampled_from(mappings), min_size=n, max_size=n),
        "scores": st.lists(row_scores, min_size=n, max_size=n),
    }
    _match(PlacedColumns.__name__, [f.name for f in dataclasses.fields(PlacedColumns)], columns)
    return PlacedColumns(**{name: draw(s) for name, s in columns.items()})


names = st.text("abcxyz-./0123é", min_size=1, max_size=8)
SPREAD: Strategies = {"topology_key": st.sampled_from(["kubernetes.io/hostname", "zone"])}


def workload_messages(*, full: bool = False) -> st.SearchStrategy[pb.Workload]:
    """``pb.Workload`` messages with any fields set (every one, ``spread``'s too, when
    ``full``); ids of one byte's length and longer, stamps of every varint size."""
    return message_of(
        pb.Workload,
        {
            "id": names | st.sampled_from(["x" * 127, "y" * 128, "z" * 300]),
            "scope_id": st.sampled_from(["org", "team"]),
            "request": st.dictionaries(
                st.sampled_from(["cpu", "gpu", "memory"]), int64s, min_size=1
            ),
            "replicas": int32s,
            "priority": st.sampled_from([5, -1]) | int32s,
            "preemptible": st.booleans(),
            "node_selector": st.dictionaries(names, names, min_size=1, max_size=2),
            "gpu_model": st.sampled_from(["A100", "V100M16|V100M32"]),
            "spread": message_of(pb.Spread, SPREAD, full=full),
            "queued_at_ms": st.sampled_from([17, 2**62, 2**63 - 1, -1]) | st.integers(1, 2**45),
        },
        full=full,
    )


def place_requests(*, full: bool = False) -> st.SearchStrategy[svc.PlaceRequest]:
    """``PlaceRequest`` messages with any fields set (every one, nested too, when ``full``)."""
    task_type = message_of(
        pb.TaskType,
        {
            "request": st.dictionaries(st.sampled_from(["cpu", "gpu"]), int64s, min_size=1),
            "gpu_model": st.just("A100"),
            "weight": st.sampled_from([0.5, 2.0]),
        },
        full=full,
    )
    fragmentation = message_of(
        pb.FragmentationOptions,
        {
            "task_types": st.lists(task_type, min_size=1, max_size=2),
            "coverage": st.just(0.9),
            "score": st.sampled_from([pb.FRAGMENTATION_SCORE_PAPER]),
        },
        full=full,
    )
    return message_of(
        svc.PlaceRequest,
        {
            "cluster_id": names,
            "workloads": st.lists(workload_messages(full=full), min_size=1, max_size=6),
            "workload_ids": st.lists(names, min_size=1, max_size=2),
            "order": st.sampled_from([pb.ORDER_FAIR, pb.ORDER_PRIORITY]),
            "policy": st.sampled_from([pb.POLICY_BEST_FIT]),
            "dry_run": st.just(True),
            "expected_generation": st.sampled_from([7, 2**40]),
            "request_id": names,
            "resource_weights": st.dictionaries(
                st.sampled_from(["cpu", "gpu"]), st.floats(0.5, 2), min_size=1, max_size=2
            ),
            "seed": st.sampled_from([1, 2**64 - 1]),
            "fragmentation": fragmentation,
            "now_ms": st.sampled_from([1234, 2**50]),
        },
        full=full,
    )


def workloads_equal_field_by_field(got: list[Workload], want: list[Workload]) -> list[str]:
    """The fields (named by ``dataclasses.fields``) where ``got`` and ``want`` differ, as
    ``index.field`` lines: equal dataclasses compare equal, this also says where they do not."""
    out = [f"length {len(got)} != {len(want)}"] if len(got) != len(want) else []
    for i, (a, b) in enumerate(zip(got, want, strict=False)):
        out += [
            f"{i}.{f.name}: {getattr(a, f.name)!r} != {getattr(b, f.name)!r}"
            for f in dataclasses.fields(Workload)
            if getattr(a, f.name) != getattr(b, f.name)
        ]
    return out
