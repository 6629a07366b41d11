"""Prometheus metrics: counters, histograms, scrape-time scope gauges, and the alert rules."""

from __future__ import annotations

import dataclasses
import re
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from strata_policy.model import (
    ClusterInfo,
    Decision,
    Reason,
    ReasonCode,
    ReclaimResult,
    ScopeStatus,
    Victim,
    VictimReason,
    WorkloadResult,
)
from strata_policy.service.metrics import CountsCollector, Metrics, split_address

ALERTS = Path(__file__).resolve().parent.parent / "deploy" / "prometheus" / "alerts.yaml"


def status(
    scope_id: str,
    usage: dict[str, int],
    limit: dict[str, int] | None = None,
    guarantee: dict[str, int] | None = None,
    borrowed: dict[str, int] | None = None,
) -> ScopeStatus:
    """A scope status with the fields the gauges read."""
    return ScopeStatus(
        id=scope_id, parent_id="", kind="", usage=usage, guarantee=guarantee or {},
        limit=limit or {}, borrowed=borrowed or {}, weight=1.0, at_limit=(), workload_count=0,
    )  # fmt: skip


def info(*scopes: ScopeStatus, generation: int = 7) -> ClusterInfo:
    """A cluster info holding ``scopes``."""
    return ClusterInfo(
        generation=generation, node_count=2, scope_count=len(scopes), workload_count=3,
        scopes=scopes, capacity={}, allocated={},
    )  # fmt: skip


def value(m: Metrics, name: str, **labels: str) -> float | None:
    """One sample's value from the metrics' own registry."""
    return m.registry.get_sample_value(name, labels)


@pytest.mark.parametrize(
    ("usage", "limit", "expected"),
    [
        pytest.param({"gpu": 8000}, {"gpu": 8000}, {"gpu": 1.0}, id="usage equals limit"),
        pytest.param({"gpu": 9000}, {"gpu": 8000}, {"gpu": 1.0}, id="above limit (limit shrank)"),
        pytest.param({"gpu": 7999}, {"gpu": 8000}, {"gpu": 0.0}, id="just under"),
        pytest.param({}, {"gpu": 0}, {"gpu": 1.0}, id="zero limit is always at limit"),
        pytest.param({"cpu": 5}, {"gpu": 1000}, {"gpu": 0.0}, id="unused limited resource"),
        pytest.param({"gpu": 8000}, {}, {}, id="unlimited: no series"),
    ],
)
def test_at_limit(usage: dict[str, int], limit: dict[str, int], expected: dict[str, float]) -> None:
    """strata_scope_at_limit is 1 exactly when usage has reached a resource's limit."""
    m = Metrics()
    m.set_cluster_source(lambda: [("prod", info(status("team-a", usage, limit)))])
    m.registry.collect()
    for resource in ("gpu", "cpu"):
        got = value(m, "strata_scope_at_limit", cluster="prod", scope="team-a", resource=resource)
        assert got == expected.get(resource)


def test_scope_and_cluster_gauges_follow_the_source() -> None:
    """Gauges are read at scrape time: a later scrape sees the new state, gone clusters vanish."""
    m = Metrics()
    state = {"prod": info(status("org", {"cpu": 4000}, {"cpu": 8000}, {"cpu": 2000}))}
    m.set_cluster_source(lambda: list(state.items()))
    labels = {"cluster": "prod", "scope": "org", "resource": "cpu"}
    assert value(m, "strata_scope_usage_cores", **labels) == 4
    assert value(m, "strata_scope_guarantee_cores", **labels) == 2
    assert value(m, "strata_scope_limit_cores", **labels) == 8
    assert value(m, "strata_cluster_generation", cluster="prod") == 7
    state["prod"] = info(status("org", {"cpu": 8000}, {"cpu": 8000}), generation=9)
    assert value(m, "strata_scope_usage_cores", **labels) == 8
    assert value(m, "strata_cluster_generation", cluster="prod") == 9
    state.clear()
    assert value(m, "strata_cluster_generation", cluster="prod") is None


def test_a_failing_source_does_not_break_the_scrape() -> None:
    """When the engine cannot answer, the scrape still succeeds, without scope series."""
    m = Metrics()

    def broken() -> Iterable[tuple[str, ClusterInfo]]:
        raise RuntimeError("boom")

    m.set_cluster_source(broken)
    m.observe_rpc("Admit", "OK", 0.001)
    text = generate_latest(m.registry).decode()
    assert "strata_rpcs_total" in text
    assert "strata_scope_usage" not in text


@pytest.mark.parametrize(
    ("resource", "amount", "family", "expected"),
    [
        pytest.param("cpu", 2500, "strata_scope_usage_cores", 2.5, id="millicores → cores"),
        pytest.param("gpu", 250, "strata_scope_usage_gpus", 0.25, id="milli-GPUs → GPUs"),
        pytest.param("gpu", 8000, "strata_scope_usage_gpus", 8.0, id="whole GPUs"),
        pytest.param("memory", 3 * 2**30, "strata_scope_usage_bytes", 3 * 2**30, id="bytes"),
        pytest.param("licenses", 7, "strata_scope_usage", 7.0, id="other: no unit suffix"),
    ],
)
def test_scope_gauges_are_in_base_units(
    resource: str, amount: int, family: str, expected: float
) -> None:
    """Each resource's gauge is in its Prometheus base unit, named by the family's suffix."""
    m = Metrics()
    m.set_cluster_source(lambda: [("prod", info(status("a", {resource: amount})))])
    assert value(m, family, cluster="prod", scope="a", resource=resource) == expected
    others = {"strata_scope_usage", "strata_scope_usage_cores", "strata_scope_usage_gpus",
              "strata_scope_usage_bytes"} - {family}  # fmt: skip
    for name in others:
        assert value(m, name, cluster="prod", scope="a", resource=resource) is None


def test_cluster_capacity_and_allocation_in_base_units() -> None:
    """The cluster's capacity and allocation are exported per resource in base units."""
    m = Metrics()
    cluster = dataclasses.replace(
        info(status("a", {})), capacity={"gpu": 16000, "cpu": 128000}, allocated={"gpu": 1500}
    )
    m.set_cluster_source(lambda: [("prod", cluster)])
    assert value(m, "strata_cluster_capacity_gpus", cluster="prod", resource="gpu") == 16
    assert value(m, "strata_cluster_capacity_cores", cluster="prod", resource="cpu") == 128
    assert value(m, "strata_cluster_allocated_gpus", cluster="prod", resource="gpu") == 1.5


def test_every_known_error_counter_starts_at_zero() -> None:
    """Before any call, every labelled counter with known label values is exported at 0."""
    m = Metrics()
    for method in ("PushSnapshot", "Admit", "Place", "Release", "Reclaim", "GetCluster"):
        for code in ("OK", "INTERNAL", "UNKNOWN", "UNAVAILABLE", "RESOURCE_EXHAUSTED"):
            assert value(m, "strata_rpcs_total", method=method, code=code) == 0, (method, code)
        assert value(m, "strata_rpc_duration_seconds_count", method=method) == 0
    assert value(m, "strata_reclaims_total", satisfiable="false") == 0
    assert value(m, "strata_reclaims_total", satisfiable="true") == 0
    for reason in VictimReason:
        assert value(m, "strata_reclaim_victims_total", reason=reason.value) == 0
    for method in ("Admit", "Place"):
        for reason in ReasonCode:
            got = value(m, "strata_decisions_total", method=method, outcome="DENIED", reason=reason)
            assert got == 0, (method, reason)
        assert value(m, "strata_decisions_total", method=method, outcome="ADMITTED", reason="") == 0


def test_counters_at_zero_still_count() -> None:
    """A counter created at 0 counts from 0: the first error reads 1, not 2 and not absent."""
    m = Metrics()
    m.observe_rpc("Admit", "INTERNAL", 0.01)
    m.observe_results(
        "Place", [WorkloadResult("w", Decision.DENIED, reasons=(Reason("NO_HEADROOM", "x"),))]
    )
    assert value(m, "strata_rpcs_total", method="Admit", code="INTERNAL") == 1
    got = value(m, "strata_decisions_total", method="Place", outcome="DENIED", reason="NO_HEADROOM")
    assert got == 1


def test_methods_come_from_the_service() -> None:
    """The zero series cover exactly the methods named (the server passes PolicyService's)."""
    m = Metrics(methods=("Admit",))
    assert value(m, "strata_rpcs_total", method="Admit", code="INTERNAL") == 0
    assert value(m, "strata_rpcs_total", method="Place", code="INTERNAL") is None


def test_process_start_time_is_exported() -> None:
    """process_start_time_seconds (the restart alert's input) is in the server's registry."""
    m = Metrics()
    started = value(m, "process_start_time_seconds")
    assert started is not None
    assert started > 0


def test_rpc_counter_and_latency() -> None:
    """Each observed RPC counts once by method and code and lands in the latency histogram."""
    m = Metrics()
    for code, seconds in (("OK", 0.0002), ("OK", 0.003), ("INVALID_ARGUMENT", 0.0001)):
        m.observe_rpc("Admit", code, seconds)
    assert value(m, "strata_rpcs_total", method="Admit", code="OK") == 2
    assert value(m, "strata_rpcs_total", method="Admit", code="INVALID_ARGUMENT") == 1
    assert value(m, "strata_rpc_duration_seconds_count", method="Admit") == 3
    assert value(m, "strata_rpc_duration_seconds_bucket", method="Admit", le="0.001") == 2


@pytest.mark.parametrize(
    ("result", "labels"),
    [
        pytest.param(
            WorkloadResult("w", Decision.ADMITTED), ("ADMITTED", ""), id="admitted: no reason"
        ),
        pytest.param(
            WorkloadResult("w", Decision.DENIED, reasons=(Reason("LIMIT_EXCEEDED", "x"),)),
            ("DENIED", "LIMIT_EXCEEDED"),
            id="denied: first reason code",
        ),
        pytest.param(
            WorkloadResult(
                "w",
                Decision.UNPLACED,
                reasons=(Reason("NODES_UNFIT", "a"), Reason("NO_HEADROOM", "b")),
            ),
            ("UNPLACED", "NODES_UNFIT"),
            id="several reasons: the first",
        ),
    ],
)
def test_decisions(result: WorkloadResult, labels: tuple[str, str]) -> None:
    """Decisions count by method, outcome and first reason code."""
    m = Metrics()
    m.observe_results("Place", [result, result])
    outcome, reason = labels
    got = value(m, "strata_decisions_total", method="Place", outcome=outcome, reason=reason)
    assert got == 2


def test_mixed_batch_counts_each_outcome() -> None:
    """A batch of mixed outcomes adds each outcome's count, on top of earlier batches."""
    m = Metrics()
    admitted = WorkloadResult("w", Decision.ADMITTED)
    denied = WorkloadResult("w", Decision.DENIED, reasons=(Reason("LIMIT_EXCEEDED", "x"),))
    m.observe_results("Admit", [admitted, denied, admitted, admitted, denied])
    m.observe_results("Admit", [admitted])
    assert value(m, "strata_decisions_total", method="Admit", outcome="ADMITTED", reason="") == 4
    assert (
        value(
            m, "strata_decisions_total", method="Admit", outcome="DENIED", reason="LIMIT_EXCEEDED"
        )
        == 2
    )


def test_reclaims_and_victims() -> None:
    """Reclaims count by satisfiable; victims by reason."""
    m = Metrics()
    victims = (
        Victim("v1", "t", VictimReason.RECLAIM_BORROWED, {"gpu": 1000}),
        Victim("v2", "t", VictimReason.RECLAIM_BORROWED, {"gpu": 1000}),
        Victim("v3", "s", VictimReason.LOWER_PRIORITY, {"gpu": 1000}),
    )
    m.observe_reclaim(ReclaimResult(1, True, victims))
    m.observe_reclaim(ReclaimResult(1, False))
    assert value(m, "strata_reclaims_total", satisfiable="true") == 1
    assert value(m, "strata_reclaims_total", satisfiable="false") == 1
    assert value(m, "strata_reclaim_victims_total", reason="RECLAIM_BORROWED") == 2
    assert value(m, "strata_reclaim_victims_total", reason="LOWER_PRIORITY") == 1


def test_registries_are_separate() -> None:
    """Two Metrics objects (two servers in one process) never share a series."""
    a, b = Metrics(), Metrics()
    a.observe_rpc("Admit", "OK", 0.1)
    assert value(a, "strata_rpcs_total", method="Admit", code="OK") == 1
    assert value(b, "strata_rpcs_total", method="Admit", code="OK") == 0


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        pytest.param("127.0.0.1:9090", ("127.0.0.1", 9090), id="host and port"),
        pytest.param(":9090", ("0.0.0.0", 9090), id="all interfaces"),
        pytest.param("[::1]:9090", ("::1", 9090), id="IPv6"),
    ],
)
def test_split_address(address: str, expected: tuple[str, int]) -> None:
    """--metrics-address accepts host:port, :port and [v6]:port."""
    assert split_address(address) == expected


def test_split_address_rejects_garbage() -> None:
    """An address without a numeric port is refused."""
    with pytest.raises(ValueError, match="host:port"):
        split_address("localhost")


def test_http_endpoint_serves_the_registry() -> None:
    """start_http serves this registry's text format on /metrics."""
    m = Metrics()
    m.observe_rpc("GetCluster", "OK", 0.01)
    m.start_http("127.0.0.1:0")
    try:
        port = m.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
            body = reply.read().decode()
    finally:
        m.stop_http()
    assert 'strata_rpcs_total{code="OK",method="GetCluster"} 1.0' in body


# --- the alert rules use only what is exported ------------------------------------------------

SERIES = re.compile(r"\b((?:strata|process)_[a-z_]+)\s*(\{[^}]*\})?")
# Labels Prometheus adds to every scraped series (not the server's to export).
TARGET_LABELS = {"job", "instance"}
MATCHER = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")


def alert_series() -> list[tuple[str, str, set[str]]]:
    """(alert, series name, label names matched) for every series an alert expression uses."""
    rules = yaml.safe_load(ALERTS.read_text())
    out = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            for name, selector in SERIES.findall(rule["expr"]):
                out.append((rule["alert"], name, set(MATCHER.findall(selector))))
    return out


def exported(m: Metrics) -> dict[str, set[str]]:
    """Every sample name a scrape shows, with the label names it carries."""
    text = generate_latest(m.registry).decode()
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


def busy_metrics() -> Metrics:
    """Metrics after one of everything, so every series has at least one sample."""
    m = Metrics()
    one = {"gpu": 1}
    every = {"gpu": 1000, "cpu": 1000, "memory": 1}
    m.set_cluster_source(lambda: [("prod", info(status("a", every, one, every, every)))])
    m.observe_rpc("Admit", "OK", 0.001)
    m.observe_results("Admit", [WorkloadResult("w", Decision.ADMITTED)])
    m.observe_reclaim(ReclaimResult(1, True, (Victim("v", "a", VictimReason.LOWER_PRIORITY, {}),)))
    return m


def test_alert_names_are_the_required_ones() -> None:
    """alerts.yaml has CapacityAtLimit on strata_scope_at_limit and a failing-reclaim alert."""
    uses = alert_series()
    assert ("CapacityAtLimit", "strata_scope_at_limit") in {(a, n) for a, n, _ in uses}
    assert any(a == "ReclaimKeepsFailing" and n == "strata_reclaims_total" for a, n, _ in uses)
    assert ("StrataRestarting", "process_start_time_seconds") in {(a, n) for a, n, _ in uses}
    rules = {
        r["alert"]: r["expr"]
        for g in yaml.safe_load(ALERTS.read_text())["groups"]
        for r in g["rules"]
    }
    assert rules["StrataTargetDown"] == 'up{job="strata-policy"} == 0'
    assert rules["StrataTargetAbsent"] == 'absent(up{job="strata-policy"})'


@pytest.mark.parametrize(
    ("alert", "name", "labels"),
    [pytest.param(*use, id=f"{use[0]}: {use[1]}") for use in alert_series()],
)
def test_every_alert_series_is_exported(alert: str, name: str, labels: set[str]) -> None:
    """Every series an alert rule reads is exported, with the labels the rule matches on."""
    series = exported(busy_metrics())
    assert name in series, f"{alert} uses {name}, which the server does not export"
    missing = labels - series[name] - TARGET_LABELS
    assert not missing, f"{alert} matches labels {missing} not exported"


def test_counts_collector_exposes_what_a_labelled_counter_does() -> None:
    """The same ``_total`` samples and ``_created`` series as ``Counter(...).labels().inc()``."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    counts = CountsCollector("x_decisions", "Help.", ("method", "outcome"))
    ours.register(counts)
    counter = Counter("x_decisions", "Help.", ("method", "outcome"), registry=theirs)
    for labels, n in [
        (("Admit", "ADMITTED"), 1),
        (("Place", "PLACED"), 3),
        (("Admit", "ADMITTED"), 2),
    ]:
        counts.inc(labels, n)
        counter.labels(*labels).inc(n)

    def lines(registry: CollectorRegistry) -> list[str]:
        text = generate_latest(registry).decode()
        return sorted(
            line.rsplit(" ", 1)[0] if "_created" in line else line for line in text.splitlines()
        )

    assert lines(ours) == lines(theirs)
    assert (
        ours.get_sample_value("x_decisions_total", {"method": "Admit", "outcome": "ADMITTED"}) == 3
    )
