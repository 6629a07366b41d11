from strata.policy.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConsolidationAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONSOLIDATION_ACTION_UNSPECIFIED: _ClassVar[ConsolidationAction]
    CONSOLIDATION_ACTION_REMOVE: _ClassVar[ConsolidationAction]
    CONSOLIDATION_ACTION_REPLACE: _ClassVar[ConsolidationAction]

class CapacityCheckKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CAPACITY_CHECK_KIND_UNSPECIFIED: _ClassVar[CapacityCheckKind]
    CAPACITY_CHECK_KIND_GUARANTEE_BACKED: _ClassVar[CapacityCheckKind]
    CAPACITY_CHECK_KIND_N_PLUS_ONE: _ClassVar[CapacityCheckKind]
CONSOLIDATION_ACTION_UNSPECIFIED: ConsolidationAction
CONSOLIDATION_ACTION_REMOVE: ConsolidationAction
CONSOLIDATION_ACTION_REPLACE: ConsolidationAction
CAPACITY_CHECK_KIND_UNSPECIFIED: CapacityCheckKind
CAPACITY_CHECK_KIND_GUARANTEE_BACKED: CapacityCheckKind
CAPACITY_CHECK_KIND_N_PLUS_ONE: CapacityCheckKind

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

class NodeGroup(_message.Message):
    __slots__ = ("id", "template", "price_per_hour", "min_count", "max_count", "current_count")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    PRICE_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    MIN_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    id: str
    template: _types_pb2.Node
    price_per_hour: float
    min_count: int
    max_count: int
    current_count: int
    def __init__(self, id: _Optional[str] = ..., template: _Optional[_Union[_types_pb2.Node, _Mapping]] = ..., price_per_hour: _Optional[float] = ..., min_count: _Optional[int] = ..., max_count: _Optional[int] = ..., current_count: _Optional[int] = ...) -> None: ...

class PlanCapacityRequest(_message.Message):
    __slots__ = ("cluster_id", "node_groups", "workloads", "policy", "disruption_budget", "resource_weights", "fragmentation")
    class ResourceWeightsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_GROUPS_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    DISRUPTION_BUDGET_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    FRAGMENTATION_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    node_groups: _containers.RepeatedCompositeFieldContainer[NodeGroup]
    workloads: _containers.RepeatedCompositeFieldContainer[_types_pb2.Workload]
    policy: _types_pb2.Policy
    disruption_budget: int
    resource_weights: _containers.ScalarMap[str, float]
    fragmentation: _types_pb2.FragmentationOptions
    def __init__(self, cluster_id: _Optional[str] = ..., node_groups: _Optional[_Iterable[_Union[NodeGroup, _Mapping]]] = ..., workloads: _Optional[_Iterable[_Union[_types_pb2.Workload, _Mapping]]] = ..., policy: _Optional[_Union[_types_pb2.Policy, str]] = ..., disruption_budget: _Optional[int] = ..., resource_weights: _Optional[_Mapping[str, float]] = ..., fragmentation: _Optional[_Union[_types_pb2.FragmentationOptions, _Mapping]] = ...) -> None: ...

class ScaleUp(_message.Message):
    __slots__ = ("node_group_id", "count", "workload_ids", "node_ids")
    NODE_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_IDS_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    node_group_id: str
    count: int
    workload_ids: _containers.RepeatedScalarFieldContainer[str]
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_group_id: _Optional[str] = ..., count: _Optional[int] = ..., workload_ids: _Optional[_Iterable[str]] = ..., node_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Move(_message.Message):
    __slots__ = ("workload_id", "node_id")
    WORKLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    workload_id: str
    node_id: str
    def __init__(self, workload_id: _Optional[str] = ..., node_id: _Optional[str] = ...) -> None: ...

class Consolidation(_message.Message):
    __slots__ = ("node_id", "action", "replacement_group_id", "moves", "saving_per_hour", "evictions")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MOVES_FIELD_NUMBER: _ClassVar[int]
    SAVING_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    action: ConsolidationAction
    replacement_group_id: str
    moves: _containers.RepeatedCompositeFieldContainer[Move]
    saving_per_hour: float
    evictions: int
    def __init__(self, node_id: _Optional[str] = ..., action: _Optional[_Union[ConsolidationAction, str]] = ..., replacement_group_id: _Optional[str] = ..., moves: _Optional[_Iterable[_Union[Move, _Mapping]]] = ..., saving_per_hour: _Optional[float] = ..., evictions: _Optional[int] = ...) -> None: ...

class Unplaceable(_message.Message):
    __slots__ = ("workload_id", "reasons")
    WORKLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    workload_id: str
    reasons: _containers.RepeatedCompositeFieldContainer[_types_pb2.Reason]
    def __init__(self, workload_id: _Optional[str] = ..., reasons: _Optional[_Iterable[_Union[_types_pb2.Reason, _Mapping]]] = ...) -> None: ...

class CapacityCheck(_message.Message):
    __slots__ = ("kind", "domain", "scope_id", "resource", "short")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    SHORT_FIELD_NUMBER: _ClassVar[int]
    kind: CapacityCheckKind
    domain: str
    scope_id: str
    resource: str
    short: int
    def __init__(self, kind: _Optional[_Union[CapacityCheckKind, str]] = ..., domain: _Optional[str] = ..., scope_id: _Optional[str] = ..., resource: _Optional[str] = ..., short: _Optional[int] = ...) -> None: ...

class PlannedPlacement(_message.Message):
    __slots__ = ("workload_id", "node_ids")
    WORKLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    workload_id: str
    node_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workload_id: _Optional[str] = ..., node_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class PlanCapacityResponse(_message.Message):
    __slots__ = ("generation", "scale_up", "consolidation", "unplaceable", "checks", "cost_per_hour", "lower_bound_per_hour", "placements")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SCALE_UP_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATION_FIELD_NUMBER: _ClassVar[int]
    UNPLACEABLE_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    COST_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    LOWER_BOUND_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    generation: int
    scale_up: _containers.RepeatedCompositeFieldContainer[ScaleUp]
    consolidation: _containers.RepeatedCompositeFieldContainer[Consolidation]
    unplaceable: _containers.RepeatedCompositeFieldContainer[Unplaceable]
    checks: _containers.RepeatedCompositeFieldContainer[CapacityCheck]
    cost_per_hour: float
    lower_bound_per_hour: float
    placements: _containers.RepeatedCompositeFieldContainer[PlannedPlacement]
    def __init__(self, generation: _Optional[int] = ..., scale_up: _Optional[_Iterable[_Union[ScaleUp, _Mapping]]] = ..., consolidation: _Optional[_Iterable[_Union[Consolidation, _Mapping]]] = ..., unplaceable: _Optional[_Iterable[_Union[Unplaceable, _Mapping]]] = ..., checks: _Optional[_Iterable[_Union[CapacityCheck, _Mapping]]] = ..., cost_per_hour: _Optional[float] = ..., lower_bound_per_hour: _Optional[float] = ..., placements: _Optional[_Iterable[_Union[PlannedPlacement, _Mapping]]] = ...) -> None: ...
