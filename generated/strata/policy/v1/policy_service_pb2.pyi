from strata.policy.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PushSnapshotRequest(_message.Message):
    __slots__ = ("cluster_id", "snapshot", "dry_run", "expected_generation", "request_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    snapshot: _types_pb2.Snapshot
    dry_run: bool
    expected_generation: int
    request_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., snapshot: _Optional[_Union[_types_pb2.Snapshot, _Mapping]] = ..., dry_run: _Optional[bool] = ..., expected_generation: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class PushSnapshotResponse(_message.Message):
    __slots__ = ("generation", "node_count", "scope_count", "workload_count")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_COUNT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_COUNT_FIELD_NUMBER: _ClassVar[int]
    generation: int
    node_count: int
    scope_count: int
    workload_count: int
    def __init__(self, generation: _Optional[int] = ..., node_count: _Optional[int] = ..., scope_count: _Optional[int] = ..., workload_count: _Optional[int] = ...) -> None: ...

class UpdateSnapshotRequest(_message.Message):
    __slots__ = ("cluster_id", "upsert_nodes", "remove_node_ids", "upsert_scopes", "remove_scope_ids", "upsert_workloads", "remove_workload_ids", "dry_run", "expected_generation", "request_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    UPSERT_NODES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_SCOPES_FIELD_NUMBER: _ClassVar[int]
    REMOVE_SCOPE_IDS_FIELD_NUMBER: _ClassVar[int]
    UPSERT_WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_WORKLOAD_IDS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    upsert_nodes: _containers.RepeatedCompositeFieldContainer[_types_pb2.Node]
    remove_node_ids: _containers.RepeatedScalarFieldContainer[str]
    upsert_scopes: _containers.RepeatedCompositeFieldContainer[_types_pb2.Scope]
    remove_scope_ids: _containers.RepeatedScalarFieldContainer[str]
    upsert_workloads: _containers.RepeatedCompositeFieldContainer[_types_pb2.RunningWorkload]
    remove_workload_ids: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    expected_generation: int
    request_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., upsert_nodes: _Optional[_Iterable[_Union[_types_pb2.Node, _Mapping]]] = ..., remove_node_ids: _Optional[_Iterable[str]] = ..., upsert_scopes: _Optional[_Iterable[_Union[_types_pb2.Scope, _Mapping]]] = ..., remove_scope_ids: _Optional[_Iterable[str]] = ..., upsert_workloads: _Optional[_Iterable[_Union[_types_pb2.RunningWorkload, _Mapping]]] = ..., remove_workload_ids: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ..., expected_generation: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class UpdateSnapshotResponse(_message.Message):
    __slots__ = ("generation", "node_count", "scope_count", "workload_count")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_COUNT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_COUNT_FIELD_NUMBER: _ClassVar[int]
    generation: int
    node_count: int
    scope_count: int
    workload_count: int
    def __init__(self, generation: _Optional[int] = ..., node_count: _Optional[int] = ..., scope_count: _Optional[int] = ..., workload_count: _Optional[int] = ...) -> None: ...

class GetClusterRequest(_message.Message):
    __slots__ = ("cluster_id", "include_snapshot")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    include_snapshot: bool
    def __init__(self, cluster_id: _Optional[str] = ..., include_snapshot: _Optional[bool] = ...) -> None: ...

class GetClusterResponse(_message.Message):
    __slots__ = ("generation", "node_count", "scope_count", "workload_count", "scopes", "capacity", "allocated", "snapshot")
    class CapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class AllocatedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_COUNT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    generation: int
    node_count: int
    scope_count: int
    workload_count: int
    scopes: _containers.RepeatedCompositeFieldContainer[_types_pb2.ScopeStatus]
    capacity: _containers.ScalarMap[str, int]
    allocated: _containers.ScalarMap[str, int]
    snapshot: _types_pb2.Snapshot
    def __init__(self, generation: _Optional[int] = ..., node_count: _Optional[int] = ..., scope_count: _Optional[int] = ..., workload_count: _Optional[int] = ..., scopes: _Optional[_Iterable[_Union[_types_pb2.ScopeStatus, _Mapping]]] = ..., capacity: _Optional[_Mapping[str, int]] = ..., allocated: _Optional[_Mapping[str, int]] = ..., snapshot: _Optional[_Union[_types_pb2.Snapshot, _Mapping]] = ...) -> None: ...

class ListClustersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListClustersResponse(_message.Message):
    __slots__ = ("clusters",)
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterSummary]
    def __init__(self, clusters: _Optional[_Iterable[_Union[ClusterSummary, _Mapping]]] = ...) -> None: ...

class ClusterSummary(_message.Message):
    __slots__ = ("cluster_id", "generation", "node_count", "scope_count", "workload_count")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_COUNT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_COUNT_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    generation: int
    node_count: int
    scope_count: int
    workload_count: int
    def __init__(self, cluster_id: _Optional[str] = ..., generation: _Optional[int] = ..., node_count: _Optional[int] = ..., scope_count: _Optional[int] = ..., workload_count: _Optional[int] = ...) -> None: ...

class DeleteClusterRequest(_message.Message):
    __slots__ = ("cluster_id", "expected_generation", "request_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    expected_generation: int
    request_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., expected_generation: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteClusterResponse(_message.Message):
    __slots__ = ("generation",)
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    generation: int
    def __init__(self, generation: _Optional[int] = ...) -> None: ...

class AdmitRequest(_message.Message):
    __slots__ = ("cluster_id", "workloads", "order", "dry_run", "expected_generation", "request_id", "now_ms")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    workloads: _containers.RepeatedCompositeFieldContainer[_types_pb2.Workload]
    order: _types_pb2.Order
    dry_run: bool
    expected_generation: int
    request_id: str
    now_ms: int
    def __init__(self, cluster_id: _Optional[str] = ..., workloads: _Optional[_Iterable[_Union[_types_pb2.Workload, _Mapping]]] = ..., order: _Optional[_Union[_types_pb2.Order, str]] = ..., dry_run: _Optional[bool] = ..., expected_generation: _Optional[int] = ..., request_id: _Optional[str] = ..., now_ms: _Optional[int] = ...) -> None: ...

class AdmitResponse(_message.Message):
    __slots__ = ("generation", "results")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    generation: int
    results: _containers.RepeatedCompositeFieldContainer[_types_pb2.WorkloadResult]
    def __init__(self, generation: _Optional[int] = ..., results: _Optional[_Iterable[_Union[_types_pb2.WorkloadResult, _Mapping]]] = ...) -> None: ...

class PlaceRequest(_message.Message):
    __slots__ = ("cluster_id", "workloads", "workload_ids", "order", "policy", "dry_run", "expected_generation", "request_id", "resource_weights", "seed", "fragmentation", "now_ms")
    class ResourceWeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_IDS_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    FRAGMENTATION_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    workloads: _containers.RepeatedCompositeFieldContainer[_types_pb2.Workload]
    workload_ids: _containers.RepeatedScalarFieldContainer[str]
    order: _types_pb2.Order
    policy: _types_pb2.Policy
    dry_run: bool
    expected_generation: int
    request_id: str
    resource_weights: _containers.ScalarMap[str, float]
    seed: int
    fragmentation: _types_pb2.FragmentationOptions
    now_ms: int
    def __init__(self, cluster_id: _Optional[str] = ..., workloads: _Optional[_Iterable[_Union[_types_pb2.Workload, _Mapping]]] = ..., workload_ids: _Optional[_Iterable[str]] = ..., order: _Optional[_Union[_types_pb2.Order, str]] = ..., policy: _Optional[_Union[_types_pb2.Policy, str]] = ..., dry_run: _Optional[bool] = ..., expected_generation: _Optional[int] = ..., request_id: _Optional[str] = ..., resource_weights: _Optional[_Mapping[str, float]] = ..., seed: _Optional[int] = ..., fragmentation: _Optional[_Union[_types_pb2.FragmentationOptions, _Mapping]] = ..., now_ms: _Optional[int] = ...) -> None: ...

class PlaceResponse(_message.Message):
    __slots__ = ("generation", "results")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    generation: int
    results: _containers.RepeatedCompositeFieldContainer[_types_pb2.WorkloadResult]
    def __init__(self, generation: _Optional[int] = ..., results: _Optional[_Iterable[_Union[_types_pb2.WorkloadResult, _Mapping]]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("cluster_id", "workload_ids", "dry_run", "expected_generation", "request_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_IDS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    workload_ids: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    expected_generation: int
    request_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., workload_ids: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ..., expected_generation: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("generation", "released", "not_found")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    generation: int
    released: _containers.RepeatedScalarFieldContainer[str]
    not_found: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, generation: _Optional[int] = ..., released: _Optional[_Iterable[str]] = ..., not_found: _Optional[_Iterable[str]] = ...) -> None: ...

class ReclaimRequest(_message.Message):
    __slots__ = ("cluster_id", "workload", "require_placement", "policy", "dry_run", "expected_generation", "request_id", "resource_weights", "seed", "now_ms")
    class ResourceWeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    workload: _types_pb2.Workload
    require_placement: bool
    policy: _types_pb2.Policy
    dry_run: bool
    expected_generation: int
    request_id: str
    resource_weights: _containers.ScalarMap[str, float]
    seed: int
    now_ms: int
    def __init__(self, cluster_id: _Optional[str] = ..., workload: _Optional[_Union[_types_pb2.Workload, _Mapping]] = ..., require_placement: _Optional[bool] = ..., policy: _Optional[_Union[_types_pb2.Policy, str]] = ..., dry_run: _Optional[bool] = ..., expected_generation: _Optional[int] = ..., request_id: _Optional[str] = ..., resource_weights: _Optional[_Mapping[str, float]] = ..., seed: _Optional[int] = ..., now_ms: _Optional[int] = ...) -> None: ...

class ReclaimResponse(_message.Message):
    __slots__ = ("generation", "satisfiable", "victims", "reasons", "result")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SATISFIABLE_FIELD_NUMBER: _ClassVar[int]
    VICTIMS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    generation: int
    satisfiable: bool
    victims: _containers.RepeatedCompositeFieldContainer[_types_pb2.Victim]
    reasons: _containers.RepeatedCompositeFieldContainer[_types_pb2.Reason]
    result: _types_pb2.WorkloadResult
    def __init__(self, generation: _Optional[int] = ..., satisfiable: _Optional[bool] = ..., victims: _Optional[_Iterable[_Union[_types_pb2.Victim, _Mapping]]] = ..., reasons: _Optional[_Iterable[_Union[_types_pb2.Reason, _Mapping]]] = ..., result: _Optional[_Union[_types_pb2.WorkloadResult, _Mapping]] = ...) -> None: ...
