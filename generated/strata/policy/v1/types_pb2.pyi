from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_UNSPECIFIED: _ClassVar[Decision]
    DECISION_ADMITTED: _ClassVar[Decision]
    DECISION_DENIED: _ClassVar[Decision]
    DECISION_NEEDS_RECLAIM: _ClassVar[Decision]
    DECISION_PLACED: _ClassVar[Decision]
    DECISION_UNPLACED: _ClassVar[Decision]

class Order(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ORDER_UNSPECIFIED: _ClassVar[Order]
    ORDER_FIFO: _ClassVar[Order]
    ORDER_PRIORITY: _ClassVar[Order]
    ORDER_FAIR: _ClassVar[Order]

class Policy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    POLICY_UNSPECIFIED: _ClassVar[Policy]
    POLICY_FIRST_FIT: _ClassVar[Policy]
    POLICY_BEST_FIT: _ClassVar[Policy]
    POLICY_LEAST_ALLOCATED: _ClassVar[Policy]
    POLICY_MOST_ALLOCATED: _ClassVar[Policy]
    POLICY_BALANCED_ALLOCATION: _ClassVar[Policy]
    POLICY_DOT_PRODUCT: _ClassVar[Policy]
    POLICY_FRAGMENTATION_AWARE: _ClassVar[Policy]
    POLICY_RANDOM: _ClassVar[Policy]

class VictimReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VICTIM_REASON_UNSPECIFIED: _ClassVar[VictimReason]
    VICTIM_REASON_RECLAIM_BORROWED: _ClassVar[VictimReason]
    VICTIM_REASON_LOWER_PRIORITY: _ClassVar[VictimReason]

class FragmentationScore(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FRAGMENTATION_SCORE_UNSPECIFIED: _ClassVar[FragmentationScore]
    FRAGMENTATION_SCORE_PAPER: _ClassVar[FragmentationScore]
    FRAGMENTATION_SCORE_UNTRUNCATED: _ClassVar[FragmentationScore]
    FRAGMENTATION_SCORE_REFINED: _ClassVar[FragmentationScore]
DECISION_UNSPECIFIED: Decision
DECISION_ADMITTED: Decision
DECISION_DENIED: Decision
DECISION_NEEDS_RECLAIM: Decision
DECISION_PLACED: Decision
DECISION_UNPLACED: Decision
ORDER_UNSPECIFIED: Order
ORDER_FIFO: Order
ORDER_PRIORITY: Order
ORDER_FAIR: Order
POLICY_UNSPECIFIED: Policy
POLICY_FIRST_FIT: Policy
POLICY_BEST_FIT: Policy
POLICY_LEAST_ALLOCATED: Policy
POLICY_MOST_ALLOCATED: Policy
POLICY_BALANCED_ALLOCATION: Policy
POLICY_DOT_PRODUCT: Policy
POLICY_FRAGMENTATION_AWARE: Policy
POLICY_RANDOM: Policy
VICTIM_REASON_UNSPECIFIED: VictimReason
VICTIM_REASON_RECLAIM_BORROWED: VictimReason
VICTIM_REASON_LOWER_PRIORITY: VictimReason
FRAGMENTATION_SCORE_UNSPECIFIED: FragmentationScore
FRAGMENTATION_SCORE_PAPER: FragmentationScore
FRAGMENTATION_SCORE_UNTRUNCATED: FragmentationScore
FRAGMENTATION_SCORE_REFINED: FragmentationScore

class Node(_message.Message):
    __slots__ = ("id", "capacity", "labels", "unschedulable", "gpu_model")
    class CapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    id: str
    capacity: _containers.ScalarMap[str, int]
    labels: _containers.ScalarMap[str, str]
    unschedulable: bool
    gpu_model: str
    def __init__(self, id: _Optional[str] = ..., capacity: _Optional[_Mapping[str, int]] = ..., labels: _Optional[_Mapping[str, str]] = ..., unschedulable: _Optional[bool] = ..., gpu_model: _Optional[str] = ...) -> None: ...

class Scope(_message.Message):
    __slots__ = ("id", "parent_id", "kind", "guarantee", "limit", "weight")
    class GuaranteeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LimitEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    GUARANTEE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    id: str
    parent_id: str
    kind: str
    guarantee: _containers.ScalarMap[str, int]
    limit: _containers.ScalarMap[str, int]
    weight: float
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., kind: _Optional[str] = ..., guarantee: _Optional[_Mapping[str, int]] = ..., limit: _Optional[_Mapping[str, int]] = ..., weight: _Optional[float] = ...) -> None: ...

class Spread(_message.Message):
    __slots__ = ("topology_key",)
    TOPOLOGY_KEY_FIELD_NUMBER: _ClassVar[int]
    topology_key: str
    def __init__(self, topology_key: _Optional[str] = ...) -> None: ...

class Workload(_message.Message):
    __slots__ = ("id", "scope_id", "request", "replicas", "priority", "preemptible", "node_selector", "gpu_model", "spread", "queued_at_ms")
    class RequestEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PREEMPTIBLE_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    QUEUED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope_id: str
    request: _containers.ScalarMap[str, int]
    replicas: int
    priority: int
    preemptible: bool
    node_selector: _containers.ScalarMap[str, str]
    gpu_model: str
    spread: Spread
    queued_at_ms: int
    def __init__(self, id: _Optional[str] = ..., scope_id: _Optional[str] = ..., request: _Optional[_Mapping[str, int]] = ..., replicas: _Optional[int] = ..., priority: _Optional[int] = ..., preemptible: _Optional[bool] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., gpu_model: _Optional[str] = ..., spread: _Optional[_Union[Spread, _Mapping]] = ..., queued_at_ms: _Optional[int] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("node_id", "gpu_devices")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    GPU_DEVICES_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    gpu_devices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, node_id: _Optional[str] = ..., gpu_devices: _Optional[_Iterable[int]] = ...) -> None: ...

class RunningWorkload(_message.Message):
    __slots__ = ("workload", "placements", "admitted_at_ms")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    ADMITTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    workload: Workload
    placements: _containers.RepeatedCompositeFieldContainer[Placement]
    admitted_at_ms: int
    def __init__(self, workload: _Optional[_Union[Workload, _Mapping]] = ..., placements: _Optional[_Iterable[_Union[Placement, _Mapping]]] = ..., admitted_at_ms: _Optional[int] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("nodes", "scopes", "workloads")
    NODES_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    scopes: _containers.RepeatedCompositeFieldContainer[Scope]
    workloads: _containers.RepeatedCompositeFieldContainer[RunningWorkload]
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., scopes: _Optional[_Iterable[_Union[Scope, _Mapping]]] = ..., workloads: _Optional[_Iterable[_Union[RunningWorkload, _Mapping]]] = ...) -> None: ...

class Reason(_message.Message):
    __slots__ = ("code", "message", "scope_id", "resource", "usage", "limit", "request", "available", "node_counts")
    class NodeCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    scope_id: str
    resource: str
    usage: int
    limit: int
    request: int
    available: int
    node_counts: _containers.ScalarMap[str, int]
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., scope_id: _Optional[str] = ..., resource: _Optional[str] = ..., usage: _Optional[int] = ..., limit: _Optional[int] = ..., request: _Optional[int] = ..., available: _Optional[int] = ..., node_counts: _Optional[_Mapping[str, int]] = ...) -> None: ...

class Victim(_message.Message):
    __slots__ = ("workload_id", "scope_id", "reason", "freed", "priority")
    class FreedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    WORKLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FREED_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    workload_id: str
    scope_id: str
    reason: VictimReason
    freed: _containers.ScalarMap[str, int]
    priority: int
    def __init__(self, workload_id: _Optional[str] = ..., scope_id: _Optional[str] = ..., reason: _Optional[_Union[VictimReason, str]] = ..., freed: _Optional[_Mapping[str, int]] = ..., priority: _Optional[int] = ...) -> None: ...

class WorkloadResult(_message.Message):
    __slots__ = ("workload_id", "decision", "placements", "reasons", "borrowed", "victims", "score", "explanation")
    class BorrowedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    WORKLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    BORROWED_FIELD_NUMBER: _ClassVar[int]
    VICTIMS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    workload_id: str
    decision: Decision
    placements: _containers.RepeatedCompositeFieldContainer[Placement]
    reasons: _containers.RepeatedCompositeFieldContainer[Reason]
    borrowed: _containers.ScalarMap[str, int]
    victims: _containers.RepeatedCompositeFieldContainer[Victim]
    score: float
    explanation: str
    def __init__(self, workload_id: _Optional[str] = ..., decision: _Optional[_Union[Decision, str]] = ..., placements: _Optional[_Iterable[_Union[Placement, _Mapping]]] = ..., reasons: _Optional[_Iterable[_Union[Reason, _Mapping]]] = ..., borrowed: _Optional[_Mapping[str, int]] = ..., victims: _Optional[_Iterable[_Union[Victim, _Mapping]]] = ..., score: _Optional[float] = ..., explanation: _Optional[str] = ...) -> None: ...

class ScopeStatus(_message.Message):
    __slots__ = ("id", "parent_id", "kind", "usage", "guarantee", "limit", "borrowed", "weight", "at_limit", "workload_count", "effective_guarantee", "oversubscribed")
    class UsageEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class GuaranteeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LimitEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class BorrowedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class EffectiveGuaranteeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    GUARANTEE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    BORROWED_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    AT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_COUNT_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_GUARANTEE_FIELD_NUMBER: _ClassVar[int]
    OVERSUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    id: str
    parent_id: str
    kind: str
    usage: _containers.ScalarMap[str, int]
    guarantee: _containers.ScalarMap[str, int]
    limit: _containers.ScalarMap[str, int]
    borrowed: _containers.ScalarMap[str, int]
    weight: float
    at_limit: _containers.RepeatedScalarFieldContainer[str]
    workload_count: int
    effective_guarantee: _containers.ScalarMap[str, int]
    oversubscribed: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., kind: _Optional[str] = ..., usage: _Optional[_Mapping[str, int]] = ..., guarantee: _Optional[_Mapping[str, int]] = ..., limit: _Optional[_Mapping[str, int]] = ..., borrowed: _Optional[_Mapping[str, int]] = ..., weight: _Optional[float] = ..., at_limit: _Optional[_Iterable[str]] = ..., workload_count: _Optional[int] = ..., effective_guarantee: _Optional[_Mapping[str, int]] = ..., oversubscribed: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskType(_message.Message):
    __slots__ = ("request", "gpu_model", "weight")
    class RequestEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    request: _containers.ScalarMap[str, int]
    gpu_model: str
    weight: float
    def __init__(self, request: _Optional[_Mapping[str, int]] = ..., gpu_model: _Optional[str] = ..., weight: _Optional[float] = ...) -> None: ...

class FragmentationOptions(_message.Message):
    __slots__ = ("task_types", "coverage", "score")
    TASK_TYPES_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    task_types: _containers.RepeatedCompositeFieldContainer[TaskType]
    coverage: float
    score: FragmentationScore
    def __init__(self, task_types: _Optional[_Iterable[_Union[TaskType, _Mapping]]] = ..., coverage: _Optional[float] = ..., score: _Optional[_Union[FragmentationScore, str]] = ...) -> None: ...
