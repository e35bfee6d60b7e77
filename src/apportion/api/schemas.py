"""Pydantic models at the HTTP edge: request bodies (Create/Update) and the
documented shapes of responses (Read). Domain validation stays in the domain:
these models only give OpenAPI its shapes and refuse unknown fields."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")
Gpus = int | float
Number = int | float | str


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Metadata(BaseModel):
    next_token: str | None = None
    total_count: int | None = None


class Envelope(BaseModel, Generic[T]):
    data: T
    metadata: Metadata
    request_id: str


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = {}


class ErrorBody(BaseModel):
    error: ErrorDetail
    request_id: str


# -- organizations and tokens ------------------------------------------------------
class OrgRead(BaseModel):
    slug: str
    name: str
    version: int
    created_at: str | None


class OrgCreate(Strict):
    slug: str
    name: str | None = None


class OrgUpdate(Strict):
    name: str | None = None
    version: int | None = None


class TokenCreate(Strict):
    name: str
    role: Literal["org_admin", "team_lead", "member", "viewer", "agent"]
    teams: list[str] = []
    pool: str | None = None
    expires_at: float | None = None
    expires_in_days: float | None = Field(default=None, gt=0)


class TokenRead(BaseModel):
    id: str
    name: str
    role: str
    teams: list[str]
    pool: str | None
    created_at: str | None
    expires_at: str | None
    revoked_at: str | None
    last_used_at: str | None
    token: str | None = Field(default=None, description="only in the response that creates it")


class OrgCreated(BaseModel):
    organization: OrgRead
    admin_token: TokenRead


# -- teams and reservations ---------------------------------------------------------
class TeamCreate(Strict):
    slug: str
    name: str | None = None
    parent: str | None = None
    bursting_priority: int = 1
    burst_limit_percent: int | None = None


class TeamUpdate(Strict):
    name: str | None = None
    parent: str | None = None
    bursting_priority: int | None = None
    burst_limit_percent: int | None = None
    version: int | None = None


class TeamRead(BaseModel):
    slug: str
    name: str
    parent: str | None
    bursting_priority: int
    burst_limit_percent: int | None
    children: list[str]
    is_leaf: bool
    reservations: dict[str, Gpus]
    version: int
    created_at: str | None


class ReservationSet(Strict):
    gpus: Number
    version: int | None = None


class ReservationRead(BaseModel):
    team: str
    pool: str
    gpus: Gpus
    version: int
    updated_at: str | None


# -- pools, nodes, capacity -----------------------------------------------------------
class PoolCreate(Strict):
    name: str
    gpu_type: str | None = None
    gpu_memory_mib: int = 81920
    topology: list[str] = []
    start_delay: int = 0
    preemption_grace: int = 0
    starvation_hold_after: int | None = None
    packing: str = Field(default="fragmentation", description="fragmentation | best_fit; "
                         "stored and shown, both pack as best_fit for now (docs/placement.md)")


class PoolUpdate(Strict):
    gpu_type: str | None = None
    gpu_memory_mib: int | None = None
    topology: list[str] | None = None
    start_delay: int | None = None
    preemption_grace: int | None = None
    starvation_hold_after: int | None = None
    packing: str | None = None
    version: int | None = None


class AgentInfo(BaseModel):
    status: Literal["never", "connected", "silent"]
    last_heartbeat_at: str | None


class PoolRead(BaseModel):
    name: str
    gpu_type: str | None
    gpu_memory_mib: int
    topology: list[str]
    start_delay: int
    preemption_grace: int
    starvation_hold_after: int | None
    packing: str
    capacity: Gpus
    node_count: int
    agent: AgentInfo
    version: int
    created_at: str | None


class DeviceShareModel(BaseModel):
    index: int
    milli: int


class PodPlacementModel(BaseModel):
    node: str
    devices: list[DeviceShareModel]


class NodeRead(BaseModel):
    name: str
    pool: str
    gpus: int
    gpu_type: str | None
    gpu_memory_mib: int
    labels: dict[str, str]
    cpu: Gpus | None = Field(description="allocatable cores; null = not limited")
    memory_mib: int | None = Field(description="allocatable MiB; null = not limited")
    health: Literal["ready", "down", "unknown"]
    cordoned: bool
    state: Literal["ready", "cordoned", "down", "unknown"]
    unavailable: list[DeviceShareModel]
    unavailable_gpus: Gpus
    last_seen_at: str | None
    version: int


class VersionBody(Strict):
    version: int | None = None


class PoolCapacity(BaseModel):
    pool: str
    capacity: Gpus
    unavailable: Gpus
    reserved: Gpus
    used: Gpus
    free: Gpus


class TeamCapacity(BaseModel):
    team: str
    pool: str
    reservation: Gpus
    reserved_in_use: Gpus
    elastic_in_use: Gpus
    entitlement: Gpus
    burst_cap: Gpus | None


# -- workloads ------------------------------------------------------------------------
class TopologyModel(Strict):
    level: str
    mode: Literal["required", "preferred"] = "required"


class WorkloadCreate(Strict):
    """SPEC section 3. Values are checked by the domain (errors name the field)."""

    name: str
    team: str
    class_: str = Field(default="elastic", alias="class")
    priority: int | None = None
    gpus: Number | None = None
    gpu_memory_mib: int | None = None
    pods: int = 1
    min_pods: int | None = None
    gang: bool | None = None
    topology: TopologyModel | None = None
    gpu_type: str | None = None
    pool: str | None = None
    node_selector: dict[str, str] = {}
    requeue_on_preemption: bool = False
    command: list[str] | str | None = None
    image: str | None = None
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    duration: int | None = None
    cpu: int | float | None = Field(default=None, description="cores per pod, steps of 0.001")
    memory_mib: int | None = Field(default=None, description="MiB per pod")


class CancelBody(Strict):
    version: int | None = None
    message: str | None = None


class ReasonModel(BaseModel):
    code: str
    message: str


class AttemptRead(BaseModel):
    attempt: int
    status: str
    pool: str | None
    started_at: str | None
    ended_at: str | None
    preempted_by: int | None


class PreemptionRead(BaseModel):
    """One preemption of a workload: ``whole`` ended the attempt; ``shrink``
    (SPEC 6.5) took ``pods`` and the workload kept running on the others."""

    at: str | None
    attempt: int
    kind: Literal["whole", "shrink"]
    by: int | None
    pods: list[int]
    gpus: Gpus


class WorkloadRead(BaseModel):
    id: int
    name: str
    team: str
    class_: str = Field(alias="class")
    priority: int
    status: str
    attempt: int
    pool: str | None
    reason: ReasonModel | None
    nominated: bool
    placement: list[PodPlacementModel]
    pods: int = Field(description="pods requested")
    pods_running: int = Field(description="pods the attempt holds while Starting or Running "
                              "(fewer than pods after a shrink); 0 otherwise")
    gpus: Gpus | None
    submitted_by: str
    submitted_at: str | None
    started_at: str | None
    running_at: str | None
    ended_at: str | None
    preempted_by: int | None
    attempts: list[AttemptRead]
    preemptions: list[PreemptionRead] = []
    spec: dict[str, Any]
    version: int


class WhyRead(BaseModel):
    workload_id: int
    status: str
    reason: ReasonModel | None
    explanation: str
    fair_share: list[TeamCapacity] = []


class Victim(BaseModel):
    workload_id: int
    gpus: Gpus


class DryRunRead(BaseModel):
    pool: str | None
    starts_now: bool
    reason: ReasonModel | None
    victims: list[Victim]
    placement: list[PodPlacementModel]


class EventRead(BaseModel):
    id: int
    type: str
    at: str | None
    workload_id: int | None
    attempt: int | None
    status: str | None
    cause: str
    message: str
    data: dict[str, Any]


class AuditRead(BaseModel):
    id: int
    at: str | None
    actor: str
    token_id: str | None
    request_id: str | None
    action: str
    object: str
    outcome: str
    message: str
    before: Any = None
    after: Any = None
