"""Pydantic models of the agent protocol (docs/api.md, "Agent protocol")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from apportion.api.schemas import DeviceShareModel, PodPlacementModel, Strict


class HeartbeatNode(Strict):
    name: str
    gpus: int
    gpu_type: str | None = None
    gpu_memory_mib: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    health: Literal["ready", "down"] = "ready"
    unavailable: list[DeviceShareModel] = Field(default_factory=list)
    cpu: int | float | None = Field(default=None, description="allocatable cores; "
                                    "absent = not limited")
    memory_mib: int | None = Field(default=None, description="allocatable MiB; "
                                   "absent = not limited")


class Report(Strict):
    workload_id: int
    attempt: int
    run_id: str | None = None
    status: Literal["running", "completed", "failed"]
    message: str | None = None
    exit_code: int | None = None
    pods_running: int | None = Field(
        default=None, description="after a shrink: the pods still running")


class LogChunk(Strict):
    workload_id: int
    attempt: int
    run_id: str | None = None
    pod: int = 0
    offset: int
    data: str = Field(description="base64 of the log bytes from `offset` (at most 256 KiB)")


class Heartbeat(Strict):
    pool: str | None = None
    agent_version: str | None = None
    nodes: list[HeartbeatNode] = Field(default_factory=list)
    runs: list[Report] = Field(default_factory=list)


class HeartbeatRead(BaseModel):
    pool: str
    nodes: int
    decisions_cursor: int
    heartbeat_timeout: float


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
