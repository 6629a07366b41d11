"""The names a cluster uses: Strata's gate and annotations, and the GPU device conventions.

Everything the translators and controllers read or write on a Kubernetes object is named here,
so an operator can see (and configure) the whole contract in one place. GPU conventions follow
the NVIDIA device plugin and GPU Feature Discovery (``nvidia.com/gpu``, ``nvidia.com/gpu.product``,
``nvidia.com/gpu.count``, ``nvidia.com/gpu.replicas``), time-slicing renamed resources
(``nvidia.com/gpu.shared``), HAMi (``nvidia.com/gpucores`` in percent of a device,
``nvidia.com/gpumem`` in MiB) and Alibaba gpushare (``aliyun.com/gpu-mem`` in GiB,
``aliyun.com/gpu-count``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GATE = "strata.dev/admission"
SCOPE_KEY = "strata.dev/scope"  # namespace label or annotation: the scope of its pods
PARENT_KEY = "strata.dev/parent"  # namespace annotation: the parent of the namespace's scope
GUARANTEE_KEY = "strata.dev/guarantee"  # namespace annotation: "cpu=8,memory=32Gi,nvidia.com/gpu=2"
LIMIT_KEY = "strata.dev/limit"
WEIGHT_KEY = "strata.dev/weight"
GANG_KEY = "strata.dev/gang"  # pod label: pods with the same value are one all-or-nothing gang
GANG_SIZE_KEY = "strata.dev/gang-size"  # pod annotation: how many pods the gang has
PREEMPTIBLE_KEY = "strata.dev/preemptible"  # pod annotation: "false" = never a victim
GPU_MODEL_KEY = "strata.dev/gpu-model"  # pod annotation: required model, `A|B` for either
WORKLOAD_KEY = "strata.dev/workload"  # written on admission: the Strata workload id
NODE_KEY = "strata.dev/node"  # written on admission: the node Strata chose
DEVICES_KEY = "strata.dev/gpu-devices"  # written on admission: device indices, "0,3"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_REPLICAS = "nvidia.com/gpu.replicas"
CONDITION_TYPE = "StrataAdmission"  # the pod condition that carries Strata's reasons
FIELD_MANAGER = "strata-policy-kube"

DeviceStyle = Literal["strata", "hami", "gpushare"]


@dataclass(frozen=True, slots=True)
class GpuConventions:
    """How GPUs appear on nodes and pods, and where the chosen devices are written.

    ``device_memory_mib`` is the memory of one device, needed only to turn a memory share
    (HAMi ``gpumem``, gpushare ``gpu-mem``) into a fraction of a device; 0 means such requests
    cannot be translated and are reported as such. ``ignore_taint_keys`` are NoSchedule taints
    the workloads Strata decides for are expected to tolerate (the GPU taint most clusters put
    on GPU nodes); any other NoSchedule/NoExecute taint makes the node unschedulable for Strata.
    ``device_style`` picks the annotation a device plugin reads (``strata``: ``DEVICES_KEY``
    only; ``hami``: also ``hami.io/vgpu-node``; ``gpushare``: also ``ALIYUN_COM_GPU_MEM_IDX``).
    """

    resource: str = "nvidia.com/gpu"
    shared_resource: str = "nvidia.com/gpu.shared"
    shared_replicas: int = 1
    hami_cores: str = "nvidia.com/gpucores"
    hami_memory: str = "nvidia.com/gpumem"
    gpushare_memory: str = "aliyun.com/gpu-mem"
    gpushare_count: str = "aliyun.com/gpu-count"
    device_memory_mib: int = 0
    ignore_taint_keys: tuple[str, ...] = ("nvidia.com/gpu",)
    device_style: DeviceStyle = "strata"

    def __post_init__(self) -> None:
        if self.shared_replicas < 1:
            raise ValueError(f"shared_replicas must be at least 1, got {self.shared_replicas}")
        if self.device_memory_mib < 0:
            raise ValueError(f"device_memory_mib must be >= 0, got {self.device_memory_mib}")

    @property
    def consumed(self) -> frozenset[str]:
        """Kubernetes resource names folded into Strata's ``gpu`` (never passed through)."""
        return frozenset(
            (
                self.resource,
                self.shared_resource,
                self.hami_cores,
                self.hami_memory,
                self.gpushare_memory,
                self.gpushare_count,
            )
        )


DEFAULT_GPU = GpuConventions()


class TranslationError(ValueError):
    """An object Strata cannot represent faithfully; ``what`` names it, ``why`` says why."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")
        self.what = what
        self.why = why
