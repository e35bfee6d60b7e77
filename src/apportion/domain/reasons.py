"""Why a workload waits (SPEC section 7): one machine code and a message."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ReasonCode(enum.StrEnum):
    """In SPEC order: a waiting workload carries the first code that holds."""

    RESERVATION_TOO_SMALL = "RESERVATION_TOO_SMALL"
    TOPOLOGY_UNSATISFIABLE = "TOPOLOGY_UNSATISFIABLE"
    NO_ELIGIBLE_POOL = "NO_ELIGIBLE_POOL"
    PREEMPTING = "PREEMPTING"
    RESERVATION_EXHAUSTED = "RESERVATION_EXHAUSTED"
    BURST_LIMIT_REACHED = "BURST_LIMIT_REACHED"
    TOPOLOGY_WAITING = "TOPOLOGY_WAITING"
    HOST_RESOURCES = "HOST_RESOURCES"
    FRAGMENTED = "FRAGMENTED"
    GANG_WAITING = "GANG_WAITING"
    FAIR_SHARE = "FAIR_SHARE"
    WAITING_FOR_CAPACITY = "WAITING_FOR_CAPACITY"
    # Job control (issue 16), applied before the engine sees the workload
    # (engine/gating.py): it waits for these whatever capacity there is.
    HELD = "HELD"
    DEPENDENCY = "DEPENDENCY"
    ARRAY_LIMIT = "ARRAY_LIMIT"
    # Why a workload ended (not a wait): it ran past its time limit; a
    # dependency of it can no longer be met (Slurm's DependencyNeverSatisfied).
    TIME_LIMIT = "TIME_LIMIT"
    DEPENDENCY_NEVER_SATISFIED = "DEPENDENCY_NEVER_SATISFIED"

    @property
    def is_unresolvable(self) -> bool:
        """No pool could ever hold the workload: it stays Pending."""
        return self in _UNRESOLVABLE


_UNRESOLVABLE = frozenset(
    {
        ReasonCode.RESERVATION_TOO_SMALL,
        ReasonCode.TOPOLOGY_UNSATISFIABLE,
        ReasonCode.NO_ELIGIBLE_POOL,
    }
)


@dataclass(frozen=True, slots=True)
class Reason:
    code: ReasonCode
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code.value, "message": self.message}
