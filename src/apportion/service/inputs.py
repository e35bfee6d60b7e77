"""Typed inputs of the service's write use cases: what a router hands the service
(issue 20: no dict of fields, no ``SimpleNamespace``). The request models of
``api/schemas.py`` have already checked types and ranges; each builds one of
these (``to_input()``), and the service applies its rules to typed fields.

A PATCH body changes only the fields the caller sent. Its input carries them in
``given`` (a field sent as ``null`` is given, with the value None; a field not
sent is not given and keeps its stored value): ``change.has("parent")``.
``version`` is the version the caller read (409 when stale), from the body or
else the ``If-Match`` header; None: no check.

This module imports only the domain, ``service.context`` and the standard
library, so the service, tests and tools build inputs without the HTTP layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from apportion.domain.cluster import DEFAULT_GPU_MEMORY_MIB, Packing, TypicalPod
from apportion.service.context import Role

#: a node's health as its agent reports it
Health = Literal["ready", "down"]
#: what an agent reports of a run
ReportStatus = Literal["running", "completed", "failed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """The base of a PATCH: which fields were sent, and the version read."""

    given: frozenset[str] = frozenset()
    version: int | None = None

    def has(self, name: str) -> bool:
        return name in self.given


# -- organizations and tokens ------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class OrgNew:
    slug: str
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OrgChange(Change):
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenNew:
    name: str
    role: Role
    teams: tuple[str, ...] = ()
    pool: str | None = None
    #: epoch seconds; ``expires_in_days`` wins when both are given
    expires_at: float | None = None
    expires_in_days: float | None = None


# -- teams and reservations ----------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class TeamNew:
    slug: str
    name: str | None = None
    parent: str | None = None
    bursting_priority: int = 1
    burst_limit_percent: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TeamChange(Change):
    """``parent`` given as None moves the team to the top level;
    ``burst_limit_percent`` given as None makes its bursting unlimited."""

    name: str | None = None
    parent: str | None = None
    bursting_priority: int | None = None
    burst_limit_percent: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReservationWanted:
    gpus: float
    version: int | None = None


# -- pools ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSettings:
    """A pool's settings as created, every field with its value (defaults filled in)."""

    name: str
    gpu_type: str | None = None
    gpu_memory_mib: int = DEFAULT_GPU_MEMORY_MIB
    topology: tuple[str, ...] = ()
    start_delay: int = 0
    preemption_grace: int = 0
    starvation_hold_after: int | None = None
    packing: Packing = Packing.FRAGMENTATION
    typical_pods: tuple[TypicalPod, ...] | None = None
    default_time_limit: int | None = None
    max_time_limit: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolChange(Change):
    """The fields of a pool's PATCH; only those in ``given`` change."""

    gpu_type: str | None = None
    gpu_memory_mib: int | None = None
    topology: tuple[str, ...] | None = None
    start_delay: int | None = None
    preemption_grace: int | None = None
    starvation_hold_after: int | None = None
    packing: Packing | None = None
    typical_pods: tuple[TypicalPod, ...] | None = None
    default_time_limit: int | None = None
    max_time_limit: int | None = None


# -- the agent protocol -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class NodeReport:
    """One node of a heartbeat's inventory. ``cpu`` is in cores (the domain
    parses it to milli-CPU); None: not limited."""

    name: str
    gpus: int
    gpu_type: str | None = None
    gpu_memory_mib: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    health: Health = "ready"
    #: device shares used by work apportion does not manage: (index, milli)
    unavailable: tuple[tuple[int, int], ...] = ()
    cpu: float | int | None = None
    memory_mib: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """One report of a run's status (``POST /agent/reports``, or a heartbeat's run)."""

    workload_id: int
    attempt: int
    status: ReportStatus
    run_id: str | None = None
    message: str | None = None
    exit_code: int | None = None
    #: after a shrink: the pods still running
    pods_running: int | None = None

    def to_json(self) -> dict[str, object]:
        """The fields sent (None left out), as the audit log records them."""
        out: dict[str, object] = {"workload_id": self.workload_id, "attempt": self.attempt,
                                  "status": self.status}
        for name in ("run_id", "message", "exit_code", "pods_running"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatIn:
    """``nodes`` None: a keep-alive (the inventory is unchanged); a tuple, even
    empty: the pool's whole inventory (a node not in it is down)."""

    pool: str | None = None
    agent_version: str | None = None
    nodes: tuple[NodeReport, ...] | None = None
    runs: tuple[RunReport, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LogChunkIn:
    """Bytes of one pod's log from ``offset`` (``data`` is their base64)."""

    workload_id: int
    attempt: int
    offset: int
    data: str
    pod: int = 0
    run_id: str | None = None
