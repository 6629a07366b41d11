"""The sync's two shortcuts equal the plain path: the translation memo and the sent-JSON memo."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strata_policy.kube.mirror import TranslationMemo, mirror
from strata_policy.kube.sync import ServerView, _apply, delta
from strata_policy.kube.testing import container, namespace, node, pod

STEPS = st.lists(
    st.tuples(
        st.integers(0, 5),  # which pod
        st.sampled_from(["1", "2", "500m"]),  # its cpu
        st.sampled_from(["n0", "n1", ""]),  # its node ("" = pending)
        st.sampled_from(["a", "b"]),  # its namespace's scope label
        st.booleans(),  # whether the resourceVersion moves (it always does on a real server)
    ),
    min_size=1,
    max_size=12,
)


def _objects() -> dict[str, dict[str, Any]]:
    return {
        "nodes": {f"n{i}": node(f"n{i}", cpu="8", memory="16Gi", gpus=2) for i in range(2)},
        "namespaces": {"ns": namespace("ns", labels={"strata.dev/scope": "a"})},
        "pods": {},
        "stratascopes": {},
    }


@settings(max_examples=60)
@given(STEPS)
def test_memos_equal_the_plain_path(steps: list[tuple[int, str, str, str, bool]]) -> None:
    """Memoized mirror == fresh mirror, and the memoized delta == a delta from scratch."""
    objects = _objects()
    memo = TranslationMemo()
    view = ServerView()
    version = 1
    for i, cpu, node_name, scope, bump in steps:
        key = f"ns/p{i}"
        old = objects["pods"].get(key)
        new = pod(f"p{i}", "ns", containers=[container(cpu=cpu)], node_name=node_name or None)
        if bump or old is None:
            version += 1
            new["metadata"]["resourceVersion"] = str(version)
        else:  # same version: the server never does this, so the memo may keep the old answer
            new = copy.deepcopy(old)
        objects["pods"][key] = new
        objects["namespaces"]["ns"]["metadata"]["labels"]["strata.dev/scope"] = scope
        fast = mirror(objects, memo=memo)
        plain = mirror(objects)
        assert fast.workloads == plain.workloads
        assert fast.problems == plain.problems
        change, raw = delta(fast, view)
        scratch = ServerView(view.generation, view.nodes, view.scopes, view.workloads)
        assert delta(plain, scratch)[0] == change
        view = _apply(view, change, view.generation + 1, raw)
        assert not any(
            delta(plain, ServerView(0, view.nodes, view.scopes, view.workloads))[0].values()
        )


def test_a_held_workloads_node_stays() -> None:
    """The sync never removes a node under a workload it must keep (a gated pod's hold)."""
    objects = _objects()
    objects["pods"]["ns/g"] = pod("g", "ns", containers=[container(cpu="1")], gated=True)
    del objects["nodes"]["n1"]
    desired = mirror(objects)
    held = {"workload": {"id": "ns/g", "scopeId": "a"}, "placements": [{"nodeId": "n1"}]}
    view = ServerView(1, {"n0": {}, "n1": {}}, {}, {"ns/g": held})
    change, _ = delta(desired, view)
    assert change["removeNodeIds"] == []
    assert change["removeWorkloadIds"] == []
    del objects["pods"]["ns/g"]
    change, _ = delta(mirror(objects), view)
    assert change["removeNodeIds"] == ["n1"]
    assert change["removeWorkloadIds"] == ["ns/g"]
