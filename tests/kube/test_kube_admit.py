"""``kube admit`` against the protocol fake and the in-process Strata server."""

from __future__ import annotations

from admit_harness import admit_run

from strata_policy.kube.conventions import GpuConventions
from strata_policy.kube.testing import container, namespace, node, pod, strata_scope
from strata_policy.service.client import Client

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
NAMESPACES = "/api/v1/namespaces"
SCOPES = "/apis/strata.dev/v1alpha1/stratascopes"
GPU = {"nvidia.com/gpu": "1"}


def test_placed_pod_is_pinned_and_ungated(client: Client, cluster_id: str) -> None:
    """PLACED: one update adds the hostname selector and devices and removes the gate."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="8", memory="32Gi", gpus=2))
        run.fake.put(PODS, pod("p", "ns", containers=[container(cpu="1", **GPU)], gated=True))
        [outcome] = run.round()
        assert outcome.decision == "PLACED", outcome
        placed = run.pod("ns/p")
        assert "schedulingGates" not in placed["spec"]
        assert placed["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n1"}
        notes = placed["metadata"]["annotations"]
        assert notes["strata.dev/node"] == "n1"
        assert notes["strata.dev/gpu-devices"] == "0"
        assert notes["strata.dev/workload"] == "ns/p"
        assert len(run.writes("/pods/p")) == 1  # one update
        view = run.syncer.view
        assert view is not None
        assert view.workloads["ns/p"]["placements"] == [{"nodeId": "n1", "gpuDevices": [0]}]
        run.check_everything_sent()


def test_denied_pod_stays_gated_with_reasons(client: Client, cluster_id: str) -> None:
    """DENIED: gate kept; one Event and the StrataAdmission condition carry the reasons."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="8", memory="32Gi"))
        run.fake.put(NAMESPACES, namespace("ns", labels={"strata.dev/scope": "small"}))
        run.fake.put(SCOPES, strata_scope("small", limit={"cpu": "1"}))
        run.fake.put(PODS, pod("p", "ns", containers=[container(cpu="2")], gated=True))
        [outcome] = run.round()
        assert outcome.decision == "DENIED"
        assert any("LIMIT_EXCEEDED" in r for r in outcome.reasons), outcome
        held = run.pod("ns/p")
        assert held["spec"]["schedulingGates"] == [{"name": "strata.dev/admission"}]
        [condition] = held["status"]["conditions"]
        assert condition["type"] == "StrataAdmission"
        assert condition["status"] == "False"
        assert "LIMIT_EXCEEDED" in condition["message"]
        assert len(run.writes("/events")) == 1
        run.round()
        assert len(run.writes("/events")) == 1  # the same reasons are not reported again
        run.check_everything_sent()


def test_gang_waits_then_releases_together(client: Client, cluster_id: str) -> None:
    """A gang is decided only when complete, then every member is pinned in the same round."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="4", memory="32Gi"))
        run.fake.put(NODES, node("n2", cpu="4", memory="32Gi"))
        gang = {"labels": {"strata.dev/gang": "g"}, "annotations": {"strata.dev/gang-size": "2"}}
        run.fake.put(PODS, pod("a", "ns", containers=[container(cpu="3")], gated=True, **gang))
        [waiting] = run.round()
        assert waiting.decision == "WAITING"
        run.fake.put(PODS, pod("b", "ns", containers=[container(cpu="3")], gated=True, **gang))
        [outcome] = run.round()
        assert outcome.decision == "PLACED", outcome
        nodes = {
            run.pod(k)["spec"]["nodeSelector"]["kubernetes.io/hostname"] for k in ("ns/a", "ns/b")
        }
        assert nodes == {"n1", "n2"}
        view = run.syncer.view
        assert view is not None
        assert view.workloads["ns/gang-g"]["workload"]["replicas"] == 2
        run.check_everything_sent()


def test_gang_that_does_not_fit_stays_gated(client: Client, cluster_id: str) -> None:
    """All or nothing: a gang with room for one member releases none."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="4", memory="32Gi"))
        gang = {"labels": {"strata.dev/gang": "g"}, "annotations": {"strata.dev/gang-size": "2"}}
        for name in ("a", "b"):
            run.fake.put(PODS, pod(name, "ns", containers=[container(cpu="3")], gated=True, **gang))
        [outcome] = run.round()
        assert outcome.decision == "DENIED"
        assert all(run.pod(k)["spec"].get("schedulingGates") for k in ("ns/a", "ns/b"))
        run.check_everything_sent()


def _reclaim_setup(run, blocked: int) -> None:  # type: ignore[no-untyped-def]
    run.fake.put(NODES, node("n1", cpu="4", memory="32Gi"))
    run.fake.put(
        PODS, pod("low", "ns", containers=[container(cpu="3")], node_name="n1", priority=1)
    )
    run.fake.put(PODS, pod("high", "ns", containers=[container(cpu="3")], gated=True, priority=100))
    run.fake.evict_blocked["ns/low"] = blocked


def test_reclaim_evicts_then_releases(client: Client, cluster_id: str) -> None:
    """NEEDS_RECLAIM: the victim is evicted (a PDB 429 retried) before the pod is released."""
    with admit_run(client, cluster_id) as run:
        _reclaim_setup(run, blocked=1)
        [outcome] = run.round()
        assert outcome.decision == "PLACED", outcome
        assert outcome.victims == ["ns/low"]
        assert len(run.writes("/eviction")) == 2  # one 429, then accepted
        assert "ns/low" not in run.fake.objects[PODS]
        assert "schedulingGates" not in run.pod("ns/high")["spec"]
        run.check_everything_sent()


def test_reclaim_blocked_by_pdb_keeps_the_gate(client: Client, cluster_id: str) -> None:
    """An eviction the PDB keeps refusing is reported; the pod stays gated, its hold released."""
    with admit_run(client, cluster_id, eviction_attempts=2) as run:
        _reclaim_setup(run, blocked=10)
        [outcome] = run.round()
        assert outcome.decision == "EVICTION_BLOCKED"
        assert run.pod("ns/high")["spec"]["schedulingGates"]
        assert "ns/high" not in run.admitter.held
        assert "ns/low" in run.fake.objects[PODS]
        [condition] = run.pod("ns/high")["status"]["conditions"]
        assert condition["reason"] == "StrataEvictionBlocked"
        view = run.syncer.view
        assert view is not None
        assert "ns/low" in view.workloads
        assert "ns/high" not in view.workloads
        run.check_everything_sent()


def test_pod_deleted_while_gated_releases_its_quota(client: Client, cluster_id: str) -> None:
    """A hold whose pod vanished before it was released is given back to Strata."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="4", memory="32Gi"))
        run.fake.put(PODS, pod("p", "ns", containers=[container(cpu="1")], gated=True))
        run.syncer.push(run.objects())
        objects = run.objects()
        run.fake.delete(PODS, "ns/p")  # deleted after we listed it, before we patch it
        [outcome] = run.admitter.step(objects)
        assert outcome.decision == "GONE"
        assert run.admitter.held == {}
        reply = client.call("GetCluster", {"clusterId": cluster_id, "includeSnapshot": True})
        assert reply["snapshot"]["workloads"] == []


def test_device_styles(client: Client, cluster_id: str) -> None:
    """gpushare and HAMi conventions get their device plugin's annotations."""
    register = "GPU-aaa,10,16000,100,NVIDIA,0,true:GPU-bbb,10,16000,100,NVIDIA,0,true:"
    with admit_run(client, cluster_id, gpu=GpuConventions(device_style="hami")) as run:
        n = node("n1", cpu="8", memory="32Gi", gpus=2)
        n["metadata"]["annotations"] = {"hami.io/node-nvidia-register": register}
        run.fake.put(NODES, n)
        run.fake.put(
            PODS, pod("p", "ns", containers=[container(**{"nvidia.com/gpu": "2"})], gated=True)
        )
        [outcome] = run.round()
        assert outcome.decision == "PLACED"
        assert (
            run.pod("ns/p")["metadata"]["annotations"]["nvidia.com/use-gpuuuid"]
            == "GPU-aaa,GPU-bbb"
        )
        run.check_everything_sent()


def test_restart_adopts_a_committed_decision(client: Client, cluster_id: str) -> None:
    """A hold committed before a restart (pod still gated) is released, not decided again."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="4", memory="8Gi"))
        run.fake.put(NODES, node("n2", cpu="4", memory="8Gi"))
        run.fake.put(PODS, pod("p", "ns", containers=[container(cpu="1")], gated=True))
        run.syncer.push(run.objects())
        workload = {"id": "ns/p", "scopeId": "ns", "request": {"cpu": 1000, "pods": 1}}
        placed = client.call(
            "Place",
            {"clusterId": cluster_id, "workloads": [workload], "policy": "POLICY_FIRST_FIT"},
        )
        node_id = placed["results"][0]["placements"][0]["nodeId"]
        [outcome] = run.round()
        assert outcome.decision == "PLACED", outcome
        assert run.pod("ns/p")["spec"]["nodeSelector"] == {"kubernetes.io/hostname": node_id}
        run.check_everything_sent()


def test_job_gang_waits_for_parallelism(client: Client, cluster_id: str) -> None:
    """Pods of a Job are a gang of the Job's parallelism (capped by completions)."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="8", memory="32Gi"))
        run.fake.jobs["ns/train"] = {"spec": {"parallelism": 3, "completions": 2}}
        run.fake.put(
            PODS, pod("t-0", "ns", containers=[container(cpu="1")], gated=True, owner_job="train")
        )
        [waiting] = run.round()
        assert waiting.decision == "WAITING"
        assert waiting.reasons == ["gang has 1 of 2 pods"]
        run.fake.put(
            PODS, pod("t-1", "ns", containers=[container(cpu="1")], gated=True, owner_job="train")
        )
        [outcome] = run.round()
        assert outcome.decision == "PLACED"
        assert outcome.workload_id == "ns/job-train"
        run.check_everything_sent()


def test_held_pod_is_decided_again_only_on_change(client: Client, cluster_id: str) -> None:
    """A denied pod is not re-decided every batch; a new node makes it decide (and place) again."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="2", memory="8Gi"))
        run.fake.put(PODS, pod("p", "ns", containers=[container(cpu="4")], gated=True))
        [denied] = run.round()
        assert denied.decision == "DENIED"
        assert run.round() == []  # nothing changed: no Place, no outcome
        run.fake.put(NODES, node("n2", cpu="8", memory="8Gi"))
        [placed] = run.round()
        assert placed.decision == "PLACED"
        assert run.pod("ns/p")["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n2"}
        run.check_everything_sent()


def test_chosen_node_gone_decides_again(client: Client, cluster_id: str) -> None:
    """A hold on a node that was deleted is released and the pod decided again elsewhere."""
    with admit_run(client, cluster_id) as run:
        run.fake.put(NODES, node("n1", cpu="4", memory="8Gi"))
        run.fake.put(NODES, node("n2", cpu="4", memory="8Gi"))
        run.fake.put(PODS, pod("p", "ns", containers=[container(cpu="1")], gated=True))
        run.syncer.push(run.objects())
        workload = {"id": "ns/p", "scopeId": "ns", "request": {"cpu": 1000, "pods": 1}}
        client.call(
            "Place",
            {"clusterId": cluster_id, "workloads": [workload], "policy": "POLICY_FIRST_FIT"},
        )
        run.fake.delete(NODES, "n1")
        [gone] = run.round()
        assert gone.decision == "ERROR"
        assert gone.reasons == ["chosen node gone: n1"]
        [placed] = run.round()
        assert placed.decision == "PLACED", placed
        assert run.pod("ns/p")["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "n2"}
        view = run.syncer.view
        assert view is not None
        assert sorted(view.nodes) == ["n2"]
        run.check_everything_sent()
