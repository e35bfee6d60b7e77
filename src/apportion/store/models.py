"""SQLAlchemy 2 models: the durable state of the control plane.

Times are float epoch seconds (UTC). GPU amounts are milli-GPU integers.
Structured values (specs, placements, labels) are JSON. Nothing outside
``store/`` sees these classes: ``codec.py`` converts them to domain types.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Json = JSON
#: Autoincrementing 64-bit ids that SQLite also accepts as ROWID aliases.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class OrgRow(Base):
    __tablename__ = "organizations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    slug: Mapped[str] = mapped_column(String(63), unique=True)
    name: Mapped[str] = mapped_column(String(255))
    is_system: Mapped[bool] = mapped_column(Boolean, default=False)
    #: optimistic-concurrency version of the organization object itself
    version: Mapped[int] = mapped_column(Integer, default=1)
    #: bumped by every change of scheduling input; a plan commits only if unchanged
    sched_version: Mapped[int] = mapped_column(BigInteger, default=0)
    #: bumped by every change of the team tree (create, update, move, delete); lets
    #: a server cache the tree and know, under the org row's lock, that it is current
    teams_version: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    last_cycle: Mapped[int] = mapped_column(BigInteger, default=0)
    last_cycle_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)


class TeamRow(Base):
    __tablename__ = "teams"
    __table_args__ = (UniqueConstraint("org_id", "slug"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"), index=True)
    slug: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(255), default="")
    parent: Mapped[str | None] = mapped_column(String(63), nullable=True)
    bursting_priority: Mapped[int] = mapped_column(Integer, default=1)
    burst_limit_percent: Mapped[int | None] = mapped_column(Integer, nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[float] = mapped_column(Float)


class ReservationRow(Base):
    __tablename__ = "reservations"
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"), primary_key=True)
    team: Mapped[str] = mapped_column(String(63), primary_key=True)
    pool: Mapped[str] = mapped_column(String(255), primary_key=True)
    milli: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_at: Mapped[float] = mapped_column(Float)


class PoolRow(Base):
    __tablename__ = "pools"
    __table_args__ = (UniqueConstraint("org_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    gpu_type: Mapped[str | None] = mapped_column(String(255), nullable=True)
    gpu_memory_mib: Mapped[int] = mapped_column(Integer)
    topology: Mapped[list[str]] = mapped_column(Json, default=list)
    start_delay: Mapped[int] = mapped_column(Integer, default=0)
    preemption_grace: Mapped[int] = mapped_column(Integer, default=0)
    starvation_hold_after: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: fragmentation | best_fit (SPEC 5)
    packing: Mapped[str] = mapped_column(String(16), default="fragmentation",
                                         server_default="fragmentation")
    #: fragmentation's prior as users write it ([{gpus, count, cpu, memory_mib}]);
    #: null: a whole node of each node size
    typical_pods: Mapped[list[dict[str, Any]] | None] = mapped_column(Json, nullable=True)
    #: job control (issue 16): time limit of work that gives none, and the largest
    default_time_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_time_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    agent_status: Mapped[str] = mapped_column(String(16), default="never")
    last_heartbeat_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[float] = mapped_column(Float)


class NodeRow(Base):
    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("org_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"), index=True)
    pool: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(255))
    gpus: Mapped[int] = mapped_column(Integer)
    gpu_type: Mapped[str | None] = mapped_column(String(255), nullable=True)
    gpu_memory_mib: Mapped[int] = mapped_column(Integer)
    labels: Mapped[dict[str, str]] = mapped_column(Json, default=dict)
    health: Mapped[str] = mapped_column(String(16), default="ready")
    cordoned: Mapped[bool] = mapped_column(Boolean, default=False)
    unavailable: Mapped[list[list[int]]] = mapped_column(Json, default=list)
    #: allocatable host resources from the agent (SPEC 5); null = not limited
    cpu_milli: Mapped[int | None] = mapped_column(Integer, nullable=True)
    memory_mib: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_seen_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)


class WorkloadRow(Base):
    __tablename__ = "workloads"
    __table_args__ = (
        Index("ix_workloads_org_status", "org_id", "status"),
        Index("ix_workloads_org_team", "org_id", "team"),
        {"sqlite_autoincrement": True},
    )
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"))
    name: Mapped[str] = mapped_column(String(255))
    team: Mapped[str] = mapped_column(String(63))
    wclass: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    is_active: Mapped[bool] = mapped_column(Boolean, default=True, index=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    pool: Mapped[str | None] = mapped_column(String(255), nullable=True)
    spec: Mapped[dict[str, Any]] = mapped_column(Json)
    placement: Mapped[list[Any]] = mapped_column(Json, default=list)
    nomination: Mapped[list[Any]] = mapped_column(Json, default=list)
    is_hold: Mapped[bool] = mapped_column(Boolean, default=False)
    reason_code: Mapped[str | None] = mapped_column(String(64), nullable=True)
    reason_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    submitted_at: Mapped[float] = mapped_column(Float)
    submitted_by: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    running_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    preempted_by: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    head_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    attempts: Mapped[list[Any]] = mapped_column(Json, default=list)
    #: every preemption of this workload, whole or shrink (SPEC 6.5), oldest first:
    #: ``{"at", "attempt", "by", "pods", "gpus_milli"}``; ``pods`` empty = the whole attempt
    preemptions: Mapped[list[Any]] = mapped_column(Json, default=list, server_default="[]")
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_at: Mapped[float] = mapped_column(Float)
    #: job control (issue 16): held by a user; member ``array_index`` of array
    #: ``array_id`` (the id of its first member), at most ``array_limit`` running
    held: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    array_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    array_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    array_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)


class EventRow(Base):
    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_org_id", "org_id", "id"),
        Index("ix_events_workload", "workload_id", "id"),
        {"sqlite_autoincrement": True},
    )
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"))
    at: Mapped[float] = mapped_column(Float)
    type: Mapped[str] = mapped_column(String(64))
    workload_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    team: Mapped[str | None] = mapped_column(String(63), nullable=True)
    attempt: Mapped[int | None] = mapped_column(Integer, nullable=True)
    status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    cause: Mapped[str] = mapped_column(String(255), default="")
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)


class ExitingRow(Base):
    """A preempted attempt (``part`` 0), or the pods a shrink took from one
    (``part`` = lowest taken pod index + 1), still holding devices until
    ``exits_at``. One attempt may have several rows, one per part."""

    __tablename__ = "exiting"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"), index=True)
    workload_id: Mapped[int] = mapped_column(BigInteger)
    attempt: Mapped[int] = mapped_column(Integer)
    team: Mapped[str] = mapped_column(String(63))
    pool: Mapped[str] = mapped_column(String(255))
    placement: Mapped[list[Any]] = mapped_column(Json)
    exits_at: Mapped[float] = mapped_column(Float)
    part: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class DecisionRow(Base):
    """An instruction for a pool's agent: start or stop a run, or shrink it
    (kind ``shrink``: stop only the pod indices in ``pods``, the run goes on)."""

    __tablename__ = "agent_decisions"
    __table_args__ = (
        Index("ix_agent_decisions_pool", "org_id", "pool", "id"),
        {"sqlite_autoincrement": True},
    )
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"))
    pool: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))
    workload_id: Mapped[int] = mapped_column(BigInteger)
    attempt: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str] = mapped_column(String(64))
    placement: Mapped[list[Any]] = mapped_column(Json, default=list)
    exec: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    grace_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: the pod indices a ``shrink`` stops (the run's highest); empty otherwise
    pods: Mapped[list[int]] = mapped_column(Json, default=list, server_default="[]")
    created_at: Mapped[float] = mapped_column(Float)


class LogChunkRow(Base):
    """Bytes of one pod's log of one attempt, shipped by the agent, from ``offset``
    (a byte offset into the pod's log file) to ``end_offset`` (exclusive).

    Chunks of one (workload, attempt, pod) never overlap and leave no gaps: the
    service only appends at the current end (see ``service/logs.py``).
    """

    __tablename__ = "log_chunks"
    __table_args__ = (
        UniqueConstraint("workload_id", "attempt", "pod", "offset"),
        {"sqlite_autoincrement": True},
    )
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"))
    workload_id: Mapped[int] = mapped_column(BigInteger)
    attempt: Mapped[int] = mapped_column(Integer)
    pod: Mapped[int] = mapped_column(Integer)
    offset: Mapped[int] = mapped_column(BigInteger)
    end_offset: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[float] = mapped_column(Float)


class TokenRow(Base):
    __tablename__ = "tokens"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("organizations.id"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    teams: Mapped[list[str]] = mapped_column(Json, default=list)
    pool: Mapped[str | None] = mapped_column(String(255), nullable=True)
    secret_hash: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_used_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class AuditRow(Base):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_org_id", "org_id", "id"), {"sqlite_autoincrement": True})
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    org_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    at: Mapped[float] = mapped_column(Float)
    actor: Mapped[str] = mapped_column(String(255))
    token_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    action: Mapped[str] = mapped_column(String(64))
    object: Mapped[str] = mapped_column(String(255), default="")
    outcome: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    before: Mapped[Any] = mapped_column(Json, nullable=True)
    after: Mapped[Any] = mapped_column(Json, nullable=True)


class IdempotencyRow(Base):
    __tablename__ = "idempotency_keys"
    org_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int] = mapped_column(Integer)
    response: Mapped[Any] = mapped_column(Json)
    created_at: Mapped[float] = mapped_column(Float, index=True)


class LeaseRow(Base):
    """Leader lease. ``token`` is the fencing token: +1 at every change of holder."""

    __tablename__ = "leases"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255))
    token: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[float] = mapped_column(Float)


class CycleRow(Base):
    """A committed scheduling cycle (who committed it, under which fencing token)."""

    __tablename__ = "cycles"
    org_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    holder: Mapped[str] = mapped_column(String(255))
    fencing_token: Mapped[int] = mapped_column(BigInteger)
    snapshot_version: Mapped[int] = mapped_column(BigInteger)
    at: Mapped[float] = mapped_column(Float)
    duration_ms: Mapped[float] = mapped_column(Float)
    decisions: Mapped[int] = mapped_column(Integer)


class EntitlementRow(Base):
    """Fair shares from the last committed cycle, exact as ``numerator/denominator``."""

    __tablename__ = "entitlements"
    org_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pool: Mapped[str] = mapped_column(String(255), primary_key=True)
    team: Mapped[str] = mapped_column(String(63), primary_key=True)
    value: Mapped[str] = mapped_column(String(64))
