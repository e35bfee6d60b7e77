"""Pools (clusters), their nodes and GPU devices."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from apportion.domain import limits
from apportion.domain.errors import ValidationError
from apportion.domain.host import cpu_number, parse_cpu, parse_memory_mib
from apportion.domain.quantities import MILLI_PER_GPU, gpus_number, parse_gpu_request

DEFAULT_GPU_MEMORY_MIB = 81920


class Packing(enum.StrEnum):
    """A pool's packing policy (SPEC 5; docs/placement.md)."""

    FRAGMENTATION = "fragmentation"
    BEST_FIT = "best_fit"


ALLOWED_PACKING = ", ".join(p.value for p in Packing)


@dataclass(frozen=True, slots=True)
class TypicalPod:
    """One shape of a pool's prior (SPEC 5, "plus a configured prior"): ``count``
    pods asking ``milli`` milli-GPU each (250, 500, 750, or N x 1000 for N whole
    GPUs) and ``cpu_milli`` / ``memory_mib`` of host resources."""

    milli: int
    count: int = 1
    cpu_milli: int = 0
    memory_mib: int = 0

    def to_json(self) -> dict[str, object]:
        """The form users write: ``{"gpus": 8, "count": 1, "cpu": 0, "memory_mib": 0}``."""
        return {"gpus": gpus_number(self.milli), "count": self.count,
                "cpu": cpu_number(self.cpu_milli), "memory_mib": self.memory_mib}


TYPICAL_POD_KEYS = ("gpus", "count", "cpu", "memory_mib")
ALLOWED_TYPICAL_PODS = ("null (a whole node of each node size), or a list of at most "
                        f"{limits.MAX_TYPICAL_SHAPES} pods "
                        "{gpus, count, cpu, memory_mib}")


def parse_typical_pods(value: object, field: str = "typical_pods"
                       ) -> tuple[TypicalPod, ...] | None:
    """A pool's prior as users write it (``None``: the default prior, a whole
    node of each node size; ``[]``: none). Raises ValidationError naming the
    field (``typical_pods[1].gpus``) and what is allowed."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ValidationError(field, f"must be a list or null, got {value!r}",
                              ALLOWED_TYPICAL_PODS)
    if len(value) > limits.MAX_TYPICAL_SHAPES:
        raise ValidationError(field, f"has {len(value)} shapes", ALLOWED_TYPICAL_PODS)
    out = []
    for k, item in enumerate(value):
        at = f"{field}[{k}]"
        if isinstance(item, TypicalPod):
            out.append(item)
            continue
        if not isinstance(item, dict):
            raise ValidationError(at, f"must be a mapping, got {item!r}", ALLOWED_TYPICAL_PODS)
        unknown = sorted(set(item) - set(TYPICAL_POD_KEYS))
        if unknown:
            raise ValidationError(f"{at}.{unknown[0]}", "is not a field of a typical pod",
                                  ", ".join(TYPICAL_POD_KEYS))
        request = parse_gpu_request(item.get("gpus"), field_prefix=f"{at}.")
        count = item.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not (
                1 <= count <= limits.MAX_TYPICAL_COUNT):
            raise ValidationError(f"{at}.count", f"must be a whole number, got {count!r}",
                                  f"1..{limits.MAX_TYPICAL_COUNT}")
        out.append(TypicalPod(request.charge(1), count,
                              parse_cpu(item.get("cpu"), f"{at}.cpu"),
                              parse_memory_mib(item.get("memory_mib"), f"{at}.memory_mib")))
    return tuple(out)


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
    #: the prior of ``fragmentation`` packing (SPEC 5); None: a whole node of each
    #: node size (engine/pool_mixes.py), () : none
    typical_pods: tuple[TypicalPod, ...] | None = None
    #: job control (issue 16): the time limit of work that gives none, and the
    #: largest one allowed (seconds; None: no default, no maximum)
    default_time_limit: int | None = None
    max_time_limit: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValidationError("name", "must not be empty")
        for fname in ("default_time_limit", "max_time_limit"):
            value = getattr(self, fname)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValidationError(fname, f"must be an integer >= 1 seconds, got {value!r}")
        if (self.default_time_limit is not None and self.max_time_limit is not None
                and self.default_time_limit > self.max_time_limit):
            raise ValidationError("default_time_limit", f"{self.default_time_limit} s is above "
                                  f"max_time_limit ({self.max_time_limit} s)",
                                  f"at most {self.max_time_limit} seconds")
        object.__setattr__(self, "typical_pods", parse_typical_pods(self.typical_pods))
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
