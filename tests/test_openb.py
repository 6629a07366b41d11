"""The openb cluster (1,213 GPU nodes) pushes and reads back identically; ctl import builds it."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import json_format
from strata.policy.v1 import types_pb2 as pb

from strata_policy.ctl.openb import snapshot_from_openb
from strata_policy.service.client import Client

OPENB = Path(__file__).resolve().parents[1] / "data" / "openb"
NODES = OPENB / "openb_node_list_gpu_node.csv"


def test_openb_pushes_and_reads_back_identically(client: Client, cluster_id: str) -> None:
    """1,213 nodes and 6,212 GPUs go in; GetCluster returns the very same snapshot."""
    snapshot = snapshot_from_openb(NODES, scope_id="default")
    pushed = client.call("PushSnapshot", {"clusterId": cluster_id, "snapshot": snapshot})
    assert pushed["nodeCount"] == 1213
    got = client.call("GetCluster", {"clusterId": cluster_id, "includeSnapshot": True})
    assert got["capacity"]["gpu"] == str(6212 * 1000)
    sent = json_format.ParseDict(snapshot, pb.Snapshot())
    back = json_format.ParseDict(got["snapshot"], pb.Snapshot())
    for s in back.scopes:
        s.weight = 0 if s.weight == 1 else s.weight  # 1 is the default the server fills in
    assert back == sent
