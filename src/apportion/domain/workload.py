"""Workloads: the submitted spec, the placement, and the validated spec builder."""

from __future__ import annotations

import enum
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from apportion.domain import limits
from apportion.domain.errors import ValidationError
from apportion.domain.host import parse_cpu, parse_memory_mib
from apportion.domain.jobcontrol import Dependency, parse_dependencies, parse_time_limit
from apportion.domain.quantities import GpuRequest, parse_gpu_request


class WorkloadClass(enum.StrEnum):
    RESERVED = "reserved"
    ELASTIC = "elastic"


class TopologyMode(enum.StrEnum):
    REQUIRED = "required"
    PREFERRED = "preferred"


RESERVED_PRIORITIES = (100, 1000)
ELASTIC_PRIORITIES = (0, 99)


@dataclass(frozen=True, slots=True)
class Topology:
    level: str
    mode: TopologyMode = TopologyMode.REQUIRED


@dataclass(frozen=True, slots=True)
class DeviceShare:
    """``milli`` of device ``index`` (1000 for a whole device)."""

    index: int
    milli: int


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """Where one pod runs: a node and the device shares it holds."""

    node: str
    devices: tuple[DeviceShare, ...]

    @property
    def milli(self) -> int:
        return sum(d.milli for d in self.devices)


Placement = tuple[PodPlacement, ...]


def placement_milli(placement: Sequence[PodPlacement]) -> int:
    return sum(p.milli for p in placement)


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """What a user submitted (SPEC section 3). Build it with :func:`make_spec`."""

    name: str
    team: str
    wclass: WorkloadClass
    priority: int
    request: GpuRequest
    pods: int = 1
    min_pods: int = 1
    gang: bool = False
    topology: Topology | None = None
    #: acceptable GPU types (SPEC 3: one type or a list), sorted; () = any type
    gpu_types: tuple[str, ...] = ()
    pool: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    requeue_on_preemption: bool = False
    command: tuple[str, ...] = ()
    image: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    duration: int | None = None
    time_limit: int | None = None
    #: host resources per pod (SPEC 1): milli-CPU and MiB; 0 = none asked for.
    #: Placement constraints only (SPEC 5): a pod fits a node only if its free
    #: CPU and memory hold them; quotas stay in GPUs.
    cpu_milli: int = 0
    memory_mib: int = 0
    #: job control (issue 16): a run past its time limit is requeued instead
    #: of ending Failed; the workloads this one waits for (submitted earlier)
    requeue_on_timeout: bool = False
    after: tuple[Dependency, ...] = ()

    @property
    def is_reserved(self) -> bool:
        return self.wclass is WorkloadClass.RESERVED

    def charge(self, device_memory_mib: int) -> int:
        """Milli-GPU per pod on devices of this memory size."""
        return self.request.charge(device_memory_mib)

    def size(self, device_memory_mib: int) -> int:
        """pods x per-pod charge."""
        return self.pods * self.charge(device_memory_mib)

    def min_size(self, device_memory_mib: int) -> int:
        """min_pods x per-pod charge (what must start together)."""
        return self.min_pods * self.charge(device_memory_mib)


def _int_field(value: object, fname: str, lo: int, hi: int | None, allowed: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValidationError(fname, f"must be an integer, got {value!r}", allowed)
    if value < lo or (hi is not None and value > hi):
        raise ValidationError(fname, f"{value} is out of range", allowed)
    return value


def split_command(command: str) -> tuple[str, ...]:
    """A command given as one string, split into argv the way a POSIX shell
    would (``shlex``: quotes group, backslashes escape; no variables, globs or
    pipes). ``"python train.py --lr 0.1"`` → ``("python", "train.py", "--lr",
    "0.1")``."""
    try:
        return tuple(shlex.split(command))
    except ValueError as err:
        raise ValidationError("command", f"cannot split {command!r} into arguments: {err}",
                              "a list of strings, or a string split as a shell would") from None


def _str_map(value: object, fname: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(fname, "must be a mapping of strings to strings")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or isinstance(v, dict | list) or v is None:
            raise ValidationError(f"{fname}.{k}", "keys and values must be strings")
        out[k] = str(v)
    return out


def _priority(klass: WorkloadClass, priority: object) -> int:
    """The priority, by class: 100-1000 (default 100) reserved, 0-99 (50) elastic."""
    if klass is WorkloadClass.RESERVED:
        lo, hi = RESERVED_PRIORITIES
        if priority is None:
            return 100
        return _int_field(priority, "priority", lo, hi, "100-1000 for reserved work")
    lo, hi = ELASTIC_PRIORITIES
    if priority is None:
        return 50
    return _int_field(priority, "priority", lo, hi, "0-99 for elastic work")


def _gang(gang: object, pods: int) -> bool:
    """``gang`` as given, else true for more than one pod."""
    if gang is None:
        return pods > 1
    if isinstance(gang, bool):
        return gang
    raise ValidationError("gang", f"must be true or false, got {gang!r}")


def make_spec(
    *,
    name: object,
    team: object,
    wclass: object = "elastic",
    priority: object = None,
    gpus: object = None,
    gpu_memory_mib: object = None,
    pods: object = 1,
    min_pods: object = None,
    gang: object = None,
    topology: object = None,
    gpu_type: object = None,
    pool: object = None,
    node_selector: object = None,
    requeue_on_preemption: object = False,
    command: object = None,
    image: object = None,
    env: object = None,
    labels: object = None,
    duration: object = None,
    cpu: object = None,
    memory_mib: object = None,
    time_limit: object = None,
    requeue_on_timeout: object = False,
    after: object = None,
) -> WorkloadSpec:
    """Validate raw input into a WorkloadSpec; every error names its field."""
    if not isinstance(name, str) or not 1 <= len(name) <= 255:
        raise ValidationError("name", f"must be a string of 1-255 characters, got {name!r}")
    if not isinstance(team, str) or not team:
        raise ValidationError("team", "must name a team")
    try:
        klass = WorkloadClass(str(wclass))
    except ValueError:
        raise ValidationError("class", f"{wclass!r} is not a class", "reserved, elastic") from None
    prio = _priority(klass, priority)
    request = parse_gpu_request(gpus, gpu_memory_mib)
    n_pods = _int_field(pods, "pods", 1, limits.MAX_PODS, f"an integer 1..{limits.MAX_PODS}")
    n_min = n_pods if min_pods is None else _int_field(
        min_pods, "min_pods", 1, n_pods, f"an integer 1..pods ({n_pods})"
    )
    is_gang = _gang(gang, n_pods)
    topo = _parse_topology(topology)
    types = parse_gpu_types(gpu_type)
    for fname, val in (("pool", pool), ("image", image)):
        if val is not None and (not isinstance(val, str) or not val):
            raise ValidationError(fname, f"must be a non-empty string, got {val!r}")
    if not isinstance(requeue_on_preemption, bool):
        raise ValidationError("requeue_on_preemption", "must be true or false")
    cmd: tuple[str, ...]
    if command is None:
        cmd = ()
    elif isinstance(command, str):
        cmd = split_command(command)
    elif isinstance(command, list | tuple) and all(isinstance(c, str) for c in command):
        cmd = tuple(command)
    else:
        raise ValidationError("command", "must be a string or a list of strings")
    dur = None if duration is None else _int_field(
        duration, "duration", 0, limits.MAX_SECONDS, f"seconds 0..{limits.MAX_SECONDS}"
    )
    if not isinstance(requeue_on_timeout, bool):
        raise ValidationError("requeue_on_timeout", "must be true or false")
    limit = None if time_limit is None else parse_time_limit(time_limit)
    return WorkloadSpec(
        name=name,
        team=team,
        wclass=klass,
        priority=prio,
        request=request,
        pods=n_pods,
        min_pods=n_min,
        gang=is_gang,
        topology=topo,
        gpu_types=types,
        pool=pool if isinstance(pool, str) else None,
        node_selector=MappingProxyType(_str_map(node_selector, "node_selector")),
        requeue_on_preemption=requeue_on_preemption,
        command=cmd,
        image=image if isinstance(image, str) else None,
        env=MappingProxyType(_str_map(env, "env")),
        labels=MappingProxyType(_str_map(labels, "labels")),
        duration=dur,
        cpu_milli=parse_cpu(cpu, "cpu"),
        memory_mib=parse_memory_mib(memory_mib, "memory_mib"),
        time_limit=limit,
        requeue_on_timeout=requeue_on_timeout,
        after=parse_dependencies(after),
    )


MAX_GPU_TYPES = 16
ALLOWED_GPU_TYPES = f"a GPU type name, or a list of 1-{MAX_GPU_TYPES} of them"


def parse_gpu_types(value: object) -> tuple[str, ...]:
    """``gpu_type`` as submitted: one type name or a list of acceptable ones
    (SPEC 3); the sorted distinct names, () for none given."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValidationError("gpu_type", f"must be a type or a list of types, got {value!r}",
                              ALLOWED_GPU_TYPES)
    if not 1 <= len(items) <= MAX_GPU_TYPES:
        raise ValidationError("gpu_type", f"must list 1-{MAX_GPU_TYPES} types, got "
                              f"{len(items)}", ALLOWED_GPU_TYPES)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValidationError("gpu_type", f"each type must be a non-empty string, got "
                                  f"{item!r}", ALLOWED_GPU_TYPES)
    return tuple(sorted(set(items)))


def gpu_types_value(types: tuple[str, ...]) -> str | list[str] | None:
    """``gpu_type`` as shown and stored: None, one name, or the list."""
    if not types:
        return None
    return types[0] if len(types) == 1 else list(types)


def _parse_topology(topology: object) -> Topology | None:
    if topology is None:
        return None
    if isinstance(topology, Topology):
        return topology
    if not isinstance(topology, Mapping):
        raise ValidationError("topology", "must be {level: <label key>, mode: required|preferred}")
    extra = set(topology) - {"level", "mode"}
    if extra:
        raise ValidationError(f"topology.{sorted(extra)[0]}", "unknown key", "level, mode")
    level = topology.get("level")
    if not isinstance(level, str) or not level:
        raise ValidationError("topology.level", "must name a topology level (a label key)")
    try:
        mode = TopologyMode(topology.get("mode", "required"))
    except ValueError:
        raise ValidationError(
            "topology.mode", f"{topology.get('mode')!r} is not a mode", "required, preferred"
        ) from None
    return Topology(level, mode)
