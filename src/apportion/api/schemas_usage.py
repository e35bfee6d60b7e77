"""Response models of accounting (``GET /v1/usage``) and start-time estimates
(``GET /v1/eta``, ``GET /v1/workloads/{id}/eta``)."""

from __future__ import annotations

from pydantic import BaseModel


class UsageNumbers(BaseModel):
    reserved_gpu_hours: float
    elastic_gpu_hours: float
    gpu_hours: float
    preemptions: int
    lost_gpu_hours: float
    started: int
    wait_p50_s: float | None
    wait_p95_s: float | None
    wait_p99_s: float | None


class UsageRow(UsageNumbers):
    team: str | None = None
    user: str | None = None
    pool: str | None = None


class UsageReport(BaseModel):
    since: str
    until: str
    group_by: list[str]
    rows: list[UsageRow]
    total: UsageNumbers


class EndingRead(BaseModel):
    workload_id: int
    name: str | None
    ends_at: str
    basis: str


class EtaRead(BaseModel):
    workload_id: int
    name: str | None
    pool: str | None
    status: str
    #: estimated start (RFC 3339); None: unknown (``assumption`` says why)
    start: str | None
    waits_for: list[EndingRead]
    basis: str
    assumption: str
    computed_at: str
    cycles: int


class EtaList(BaseModel):
    pool: str | None
    computed_at: str
    cycles: int
    is_horizon_reached: bool
    estimates: list[EtaRead]
