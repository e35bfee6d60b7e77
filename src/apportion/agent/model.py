"""What the agent and its executors exchange: runs, decisions, observations, nodes.

A **run** is one attempt of one workload in this pool, named by the server's
``run_id`` (``w<workload id>-a<attempt>``). The agent turns decisions into runs,
hands them to an executor, and reports what the executor observes.
Conversions from and to the JSON of docs/api.md ("Agent protocol") live here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apportion.domain.host import cpu_number, parse_cpu, parse_memory_mib
from apportion.domain.placement_json import placement_from_json as placement_from_json
from apportion.domain.placement_json import placement_to_json as placement_to_json
from apportion.domain.workload import PodPlacement, gpu_types_value


class RunStatus(enum.StrEnum):
    """What an executor observes of a run."""

    STARTING = "starting"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    #: ended because the agent stopped it (preempted, cancelled); never reported
    STOPPED = "stopped"
    #: the executor has no trace of a run the agent started (reported as failed)
    LOST = "lost"

    @property
    def is_final(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.STOPPED,
                        RunStatus.LOST)


#: statuses the report endpoint accepts
REPORTABLE = frozenset({RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.FAILED})


@dataclass(frozen=True, slots=True)
class ExecSpec:
    """What to run: the ``exec`` object of a start decision."""

    name: str = ""
    team: str = ""
    image: str | None = None
    command: tuple[str, ...] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    #: seconds of Running (simulation), or None
    duration: float | None = None
    #: what each pod asks of its node: milli-CPU and MiB (0 = nothing asked)
    cpu_milli: int = 0
    memory_mib: int = 0
    #: the acceptable GPU types, sorted (() = any)
    gpu_types: tuple[str, ...] = ()
    #: seconds the run may take (issue 16; the pool's default and maximum
    #: applied); the agent stops it itself if the control plane has not by then
    time_limit: float | None = None


@dataclass(frozen=True, slots=True)
class Run:
    """One attempt to execute, as the agent hands it to an executor.

    ``started_at`` is the wall-clock time the agent first started it; it is kept
    in the state file, so an executor that re-adopts the run after a restart
    (the simulator) measures its duration from the original start.

    ``stopped`` names the pods that shrinks took (SPEC 6.5, always the highest
    indices); ``placement`` keeps every pod, so their logs stay addressable.
    """

    run_id: str
    workload_id: int
    attempt: int
    placement: tuple[PodPlacement, ...]
    exec: ExecSpec
    started_at: float = 0.0
    stopped: tuple[int, ...] = ()

    @property
    def pods(self) -> int:
        """Pods the run was started with (shrunk pods included)."""
        return len(self.placement)

    @property
    def pods_running(self) -> int:
        """Pods not taken by a shrink."""
        return len(self.placement) - len(self.stopped)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({p.node for p in self.placement}))


@dataclass(frozen=True, slots=True)
class Instruction:
    """What the agent is told to do: one entry of ``GET /v1/agent/decisions``
    (start, stop or shrink a run). Not the engine's ``Decision``
    (``engine/plan.py``), which the control plane turns into these."""

    id: int
    kind: str  # "start" | "stop" | "shrink"
    workload_id: int
    attempt: int
    run_id: str
    placement: tuple[PodPlacement, ...] = ()
    exec: ExecSpec = field(default_factory=ExecSpec)
    grace_seconds: float | None = None
    reason: str | None = None
    #: a shrink's pod indices (the run's highest): only those stop
    pods: tuple[int, ...] = ()

    def to_run(self, started_at: float) -> Run:
        return Run(self.run_id, self.workload_id, self.attempt, self.placement, self.exec,
                   started_at)


@dataclass(frozen=True, slots=True)
class Observed:
    """An executor's view of one run at one poll."""

    run_id: str
    status: RunStatus
    message: str = ""
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node of the pool's inventory, as sent in a heartbeat."""

    name: str
    gpus: int
    gpu_type: str | None = None
    gpu_memory_mib: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    health: str = "ready"  # ready | down
    #: device shares used by work apportion does not manage: (index, milli)
    unavailable: tuple[tuple[int, int], ...] = ()
    #: allocatable host CPU (milli-CPU) and memory (MiB); None = not limited / unknown
    cpu_milli: int | None = None
    memory_mib: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "gpus": self.gpus, "labels": dict(self.labels),
                               "health": self.health,
                               "unavailable": [{"index": i, "milli": m}
                                               for i, m in self.unavailable]}
        if self.gpu_type is not None:
            out["gpu_type"] = self.gpu_type
        if self.gpu_memory_mib is not None:
            out["gpu_memory_mib"] = self.gpu_memory_mib
        if self.cpu_milli is not None:
            out["cpu"] = cpu_number(self.cpu_milli)
        if self.memory_mib is not None:
            out["memory_mib"] = self.memory_mib
        return out


# -- JSON conversions -------------------------------------------------------------------


def exec_from_json(raw: Mapping[str, Any] | None) -> ExecSpec:
    """A start decision's ``exec`` (or a state file's); the host resources and
    GPU types are absent in decisions of servers before them (then none)."""
    raw = raw or {}
    command = raw.get("command")
    duration = raw.get("duration")
    types = raw.get("gpu_type")
    limit = raw.get("time_limit")
    return ExecSpec(
        name=str(raw.get("name") or ""),
        team=str(raw.get("team") or ""),
        image=raw.get("image"),
        command=tuple(str(c) for c in command) if command else None,
        env={str(k): str(v) for k, v in (raw.get("env") or {}).items()},
        labels={str(k): str(v) for k, v in (raw.get("labels") or {}).items()},
        duration=None if duration is None else float(duration),
        cpu_milli=parse_cpu(raw.get("cpu"), "exec.cpu"),
        memory_mib=parse_memory_mib(raw.get("memory_mib"), "exec.memory_mib"),
        gpu_types=tuple(sorted({str(types)} if isinstance(types, str)
                               else {str(t) for t in types or ()})),
        time_limit=None if limit is None else float(limit),
    )


def exec_to_json(spec: ExecSpec) -> dict[str, Any]:
    return {"name": spec.name, "team": spec.team, "image": spec.image,
            "command": list(spec.command) if spec.command is not None else None,
            "env": dict(spec.env), "labels": dict(spec.labels), "duration": spec.duration,
            "cpu": cpu_number(spec.cpu_milli), "memory_mib": spec.memory_mib,
            "gpu_type": gpu_types_value(spec.gpu_types), "time_limit": spec.time_limit}


def instruction_from_json(raw: Mapping[str, Any]) -> Instruction:
    grace = raw.get("grace_seconds")
    return Instruction(
        id=int(raw["id"]),
        kind=str(raw["kind"]),
        workload_id=int(raw["workload_id"]),
        attempt=int(raw["attempt"]),
        run_id=str(raw["run_id"]),
        placement=placement_from_json(raw.get("placement")),
        exec=exec_from_json(raw.get("exec")),
        grace_seconds=None if grace is None else float(grace),
        reason=raw.get("reason"),
        pods=tuple(int(i) for i in raw.get("pods") or ()),
    )


def run_to_json(run: Run) -> dict[str, Any]:
    return {"run_id": run.run_id, "workload_id": run.workload_id, "attempt": run.attempt,
            "placement": placement_to_json(run.placement), "exec": exec_to_json(run.exec),
            "started_at": run.started_at, "stopped": list(run.stopped)}


def run_from_json(raw: Mapping[str, Any]) -> Run:
    return Run(str(raw["run_id"]), int(raw["workload_id"]), int(raw["attempt"]),
               placement_from_json(raw.get("placement")), exec_from_json(raw.get("exec")),
               float(raw.get("started_at") or 0.0),
               tuple(int(i) for i in raw.get("stopped") or ()))
