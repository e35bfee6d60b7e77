"""Placement requests and results (SPEC section 5)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from apportion.domain.workload import Placement, Topology, WorkloadSpec

#: Who occupies or claims devices: (workload id, attempt, part). Part 0 is
#: the attempt's pods; part k > 0 the pods from index k - 1 on that a shrink
#: took and that still exit (see ``Exiting.part``).
Owner = tuple[int, int, int]


class FailureKind(enum.StrEnum):
    """Why a placement failed, in the order the cycle maps them to reason codes."""

    NO_NODE_FITS = "NO_NODE_FITS"  # never: no node could hold one pod / pool too small
    TOPOLOGY_UNSATISFIABLE = "TOPOLOGY_UNSATISFIABLE"  # never: no domain could hold it
    TOPOLOGY_WAITING = "TOPOLOGY_WAITING"  # a domain could, none has room now
    HOST_RESOURCES = "HOST_RESOURCES"  # GPUs are free where it could go; CPU/memory is not
    FRAGMENTED = "FRAGMENTED"  # enough free in total, not where the pods need it
    GANG_WAITING = "GANG_WAITING"  # >= 1 but fewer than min_pods pods fit now
    WAITING_FOR_CAPACITY = "WAITING_FOR_CAPACITY"  # not enough free capacity

    @property
    def is_permanent(self) -> bool:
        return self in (FailureKind.NO_NODE_FITS, FailureKind.TOPOLOGY_UNSATISFIABLE)


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    """What to place: ``pods`` identical pods, at least ``min_pods`` of them.

    ``charge`` is milli-GPU per pod. A pod with ``whole_devices`` > 0 takes
    that many fully free devices on one node; otherwise it takes ``charge``
    (< 1000... or exactly 1000 for a memory-sized request of a whole device)
    of one device. ``owner`` may use devices claimed for it. ``gpu_types``
    lists the acceptable GPU types (() = any); ``cpu_milli`` and
    ``memory_mib`` are each pod's host requests (SPEC 1 and 5).
    """

    pods: int
    min_pods: int
    charge: int
    whole_devices: int = 0
    topology: Topology | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    gpu_types: tuple[str, ...] = ()
    owner: Owner = (0, 0, 0)
    cpu_milli: int = 0
    memory_mib: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_selector", MappingProxyType(dict(self.node_selector)))

    @property
    def is_shared(self) -> bool:
        return self.whole_devices == 0

    @classmethod
    def for_spec(
        cls, spec: WorkloadSpec, device_memory_mib: int, owner: Owner
    ) -> PlacementRequest:
        return cls(
            pods=spec.pods,
            min_pods=spec.min_pods,
            charge=spec.charge(device_memory_mib),
            whole_devices=spec.request.whole_devices,
            topology=spec.topology,
            node_selector=spec.node_selector,
            gpu_types=spec.gpu_types,
            owner=owner,
            cpu_milli=spec.cpu_milli,
            memory_mib=spec.memory_mib,
        )


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """A placement, or why there is none. ``domain`` is ``level=value`` when
    topology decided the place. ``fitting_pods`` is how many pods could be
    placed now (for GANG_WAITING messages); ``free_milli`` the usable free
    capacity in scope."""

    pods: Placement = ()
    failure: FailureKind | None = None
    message: str = ""
    domain: str | None = None
    fitting_pods: int = 0
    free_milli: int = 0

    @property
    def ok(self) -> bool:
        return self.failure is None and bool(self.pods)


@dataclass(slots=True)
class Counters:
    """Work done, so regressions show without timing."""

    placements: int = 0
    nodes_examined: int = 0
    devices_examined: int = 0
    domains_examined: int = 0
    rollbacks: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "placements": self.placements,
            "nodes_examined": self.nodes_examined,
            "devices_examined": self.devices_examined,
            "domains_examined": self.domains_examined,
            "rollbacks": self.rollbacks,
        }
