"""Pools (clusters), their nodes and GPU devices."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from apportion.domain.errors import ValidationError
from apportion.domain.quantities import MILLI_PER_GPU

DEFAULT_GPU_MEMORY_MIB = 81920


class Packing(enum.StrEnum):
    """A pool's packing policy (SPEC 5). Stored and shown; until fragmentation-
    aware placement arrives both values pack as ``best_fit``."""

    FRAGMENTATION = "fragmentation"
    BEST_FIT = "best_fit"


ALLOWED_PACKING = ", ".join(p.value for p in Packing)


class NodeState(enum.StrEnum):
    READY = "ready"
    CORDONED = "cordoned"
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class Node:
    """A GPU node. Devices are indexed 0..gpus-1 and hold 1000 milli-GPU each.

    ``cpu_milli`` and ``memory_mib`` are what pods may be given (Kubernetes'
    allocatable); ``None`` means not limited. A pod fits only where both hold it.
    """

    name: str
    pool: str
    gpus: int
    gpu_type: str | None = None
    gpu_memory_mib: int = DEFAULT_GPU_MEMORY_MIB
    labels: Mapping[str, str] = field(default_factory=dict)
    state: NodeState = NodeState.READY
    cpu_milli: int | None = None
    memory_mib: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValidationError("name", "must not be empty")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 0:
            raise ValidationError("gpus", f"must be an integer >= 0, got {self.gpus!r}")
        if self.gpu_memory_mib < 1:
            raise ValidationError("gpu_memory_mib", "must be >= 1")
        for fname, allowed in (("cpu_milli", "milli-CPU >= 0 or null"),
                               ("memory_mib", "MiB >= 0 or null")):
            value = getattr(self, fname)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise ValidationError(fname, f"must be an integer >= 0, got {value!r}", allowed)
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "state", NodeState(self.state))

    @property
    def is_schedulable(self) -> bool:
        """Takes new pods (ready only; cordoned and down nodes take none)."""
        return self.state is NodeState.READY

    @property
    def capacity(self) -> int:
        """Milli-GPU counted in the pool's capacity (down nodes count 0)."""
        return 0 if self.state is NodeState.DOWN else self.gpus * MILLI_PER_GPU


@dataclass(frozen=True, slots=True)
class Pool:
    """A pool (cluster). ``topology`` lists label keys, coarsest first."""

    name: str
    gpu_type: str | None = None
    gpu_memory_mib: int = DEFAULT_GPU_MEMORY_MIB
    topology: tuple[str, ...] = ()
    start_delay: int = 0
    preemption_grace: int = 0
    starvation_hold_after: int | None = None
    #: how placement picks among nodes that fit (SPEC 5; engine/placement/packing.py)
    packing: Packing = Packing.FRAGMENTATION

    def __post_init__(self) -> None:
        if not self.name:
            raise ValidationError("name", "must not be empty")
        try:
            object.__setattr__(self, "packing", Packing(self.packing))
        except ValueError:
            raise ValidationError("packing", f"{self.packing!r} is not a packing policy",
                                  ALLOWED_PACKING) from None
        for fname in ("start_delay", "preemption_grace"):
            value = getattr(self, fname)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(fname, f"must be an integer >= 0 seconds, got {value!r}")
        hold = self.starvation_hold_after
        if hold is not None and (isinstance(hold, bool) or not isinstance(hold, int) or hold < 0):
            raise ValidationError(
                "starvation_hold_after", f"must be seconds >= 0 or null, got {hold!r}"
            )
        if len(set(self.topology)) != len(self.topology):
            raise ValidationError("topology", "levels must be distinct")
        object.__setattr__(self, "topology", tuple(self.topology))


def pool_capacity(nodes: Iterable[Node]) -> int:
    """Capacity in milli-GPU: GPUs of nodes that are not down (cordoned count)."""
    return sum(n.capacity for n in nodes)
