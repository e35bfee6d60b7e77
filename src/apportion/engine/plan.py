"""The output of a cycle: decisions in the order they were taken, and why."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from apportion.domain.placement_json import placement_to_json
from apportion.domain.quantities import gpus_number
from apportion.domain.reasons import Reason
from apportion.domain.workload import Placement


class DecisionKind(enum.StrEnum):
    ROUTE = "route"  # Pending -> Queued in ``pool``
    UNROUTE = "unroute"  # Queued -> Pending: its pool can never hold it now
    MOVE = "move"  # Queued, changes pool (it can start there now, not in its own)
    START = "start"  # Queued -> Starting on ``placement``
    PREEMPT = "preempt"  # victim -> Preempted (or shrunk by ``pods``), exits at ``exits_at``
    NOMINATE = "nominate"  # ``placement`` is reserved for the workload (6.6)
    DENOMINATE = "denominate"  # its nomination was taken; back to waiting
    HOLD = "hold"  # starvation hold on ``placement`` (6.7)
    WAIT = "wait"  # stays waiting with ``reason``


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision. ``by`` names the preemptor (PREEMPT) or the taker (DENOMINATE).

    A PREEMPT with ``pods`` is a shrink (SPEC 6.5): only those pod indices
    (the workload's highest) stop, it stays Running on the others; ``milli``
    is what they free. Without ``pods`` the whole attempt ends.
    """

    kind: DecisionKind
    workload_id: int
    pool: str | None = None
    placement: Placement = ()
    reason: Reason | None = None
    by: int | None = None
    milli: int = 0
    exits_at: int | None = None
    head_since: int | None = None
    message: str = ""
    pods: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "workload_id": self.workload_id}
        if self.pool is not None:
            out["pool"] = self.pool
        if self.placement:
            out["placement"] = placement_to_json(self.placement)  # the one codec
        if self.reason is not None:
            out["reason"] = self.reason.to_dict()
        if self.by is not None:
            out["by"] = self.by
        if self.milli:
            out["gpus"] = gpus_number(self.milli)
        if self.exits_at is not None:
            out["exits_at"] = self.exits_at
        if self.message:
            out["message"] = self.message
        if self.pods:
            out["pods"] = list(self.pods)
        return out


@dataclass(frozen=True, slots=True)
class Plan:
    """Decisions of cycle ``cycle_id`` made from snapshot ``snapshot_version``.

    ``entitlements[pool][team]`` are the fair shares (milli-GPU, exact) used
    from step 2 on; ``counters`` count work done (for benchmarks).
    """

    cycle_id: int
    snapshot_version: int
    now: int
    decisions: tuple[Decision, ...]
    entitlements: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)
    counters: Mapping[str, int] = field(default_factory=dict)

    @property
    def changes_anything(self) -> bool:
        """False when the plan only restates reasons that were already known."""
        return any(d.kind is not DecisionKind.WAIT for d in self.decisions)

    def for_workload(self, workload_id: int) -> tuple[Decision, ...]:
        return tuple(d for d in self.decisions if d.workload_id == workload_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cycle_id": self.cycle_id,
            "snapshot_version": self.snapshot_version,
            "now": self.now,
            "decisions": [{**d.to_dict(), "cycle_id": self.cycle_id} for d in self.decisions],
            "entitlements": {
                pool: {team: gpus_number(v) for team, v in sorted(teams.items())}
                for pool, teams in sorted(self.entitlements.items())
            },
            "counters": dict(sorted(self.counters.items())),
        }
