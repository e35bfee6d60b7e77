"""Pydantic models of the agent protocol (docs/api.md, "Agent protocol")."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictStr

from apportion.api.schemas import (
    JSON_INT,
    Cores,
    DeviceMib,
    Label,
    PodPlacementModel,
    Slug,
    Strict,
    StrMap,
)
from apportion.domain import limits
from apportion.service import inputs

Id = Annotated[int, Field(ge=1, le=limits.MAX_INT64), JSON_INT]
Count = Annotated[int, Field(ge=0, le=limits.MAX_INT64), JSON_INT]
Text = Annotated[StrictStr, Field(max_length=4096)]


class DeviceShareIn(Strict):
    index: Annotated[int, Field(ge=0, le=limits.MAX_NODE_GPUS - 1), JSON_INT]
    milli: Annotated[int, Field(ge=1, le=1000), JSON_INT]


class HeartbeatNode(Strict):
    name: Label
    gpus: Annotated[int, Field(ge=0, le=limits.MAX_NODE_GPUS), JSON_INT]
    gpu_type: Label | None = None
    gpu_memory_mib: DeviceMib | None = None
    labels: StrMap = Field(default_factory=dict)
    health: Literal["ready", "down"] = "ready"
    unavailable: list[DeviceShareIn] = Field(default_factory=list)
    cpu: Cores | None = Field(default=None, description="allocatable cores; "
                              "absent = not limited")
    memory_mib: Annotated[int, Field(ge=0, le=limits.MAX_MEMORY_MIB), JSON_INT] | None = Field(
        default=None, description="allocatable MiB; absent = not limited")

    def to_input(self) -> inputs.NodeReport:
        return inputs.NodeReport(
            name=self.name, gpus=self.gpus, gpu_type=self.gpu_type,
            gpu_memory_mib=self.gpu_memory_mib, labels=dict(self.labels), health=self.health,
            unavailable=tuple((u.index, u.milli) for u in self.unavailable),
            cpu=self.cpu, memory_mib=self.memory_mib)


class Report(Strict):
    workload_id: Id
    attempt: Id
    run_id: Text | None = None
    status: Literal["running", "completed", "failed"]
    message: Text | None = None
    exit_code: Annotated[int, Field(ge=-(2**31), le=2**31 - 1), JSON_INT] | None = None
    pods_running: Annotated[int, Field(ge=0, le=limits.MAX_PODS), JSON_INT] | None = Field(
        default=None, description="after a shrink: the pods still running")

    def to_input(self) -> inputs.RunReport:
        return inputs.RunReport(
            workload_id=self.workload_id, attempt=self.attempt, status=self.status,
            run_id=self.run_id, message=self.message, exit_code=self.exit_code,
            pods_running=self.pods_running)


class LogChunk(Strict):
    workload_id: Id
    attempt: Id
    run_id: Text | None = None
    pod: Annotated[int, Field(ge=0, le=limits.MAX_PODS - 1), JSON_INT] = 0
    offset: Count
    data: StrictStr = Field(description="base64 of the log bytes from `offset` "
                            "(at most 256 KiB)")

    def to_input(self) -> inputs.LogChunkIn:
        return inputs.LogChunkIn(workload_id=self.workload_id, attempt=self.attempt,
                                 offset=self.offset, data=self.data, pod=self.pod,
                                 run_id=self.run_id)


class Heartbeat(Strict):
    pool: Slug | None = None
    agent_version: Text | None = None
    nodes: list[HeartbeatNode] = Field(default_factory=list, max_length=limits.MAX_NODES)
    runs: list[Report] = Field(default_factory=list)

    def to_input(self) -> inputs.HeartbeatIn:
        """``nodes`` not sent: a keep-alive (None); sent, even empty: the inventory."""
        nodes = (tuple(n.to_input() for n in self.nodes)
                 if "nodes" in self.model_fields_set else None)
        return inputs.HeartbeatIn(pool=self.pool, agent_version=self.agent_version,
                                  nodes=nodes, runs=tuple(r.to_input() for r in self.runs))


class HeartbeatRead(BaseModel):
    pool: str
    nodes: int
    decisions_cursor: int
    heartbeat_timeout: float
    stop_runs: list[str] = Field(default_factory=list, description="run ids of `runs` "
                                 "the control plane refused (ended attempts): stop them")


class DecisionRead(BaseModel):
    id: int
    kind: Literal["start", "stop", "shrink"]
    workload_id: int
    attempt: int
    run_id: str
    pool: str
    placement: list[PodPlacementModel]
    exec: dict[str, Any]
    grace_seconds: int | None
    reason: str | None
    pods: list[int] = Field(default=[], description="shrink: the pod indices to stop")
    created_at: str | None


class LogChunkRead(BaseModel):
    accepted: bool
    workload_id: int
    attempt: int
    pod: int
    next_offset: int
    note: str


class ReportRead(BaseModel):
    accepted: bool
    workload_id: int
    attempt: int
    status: str
    note: str
