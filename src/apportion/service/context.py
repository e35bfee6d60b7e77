"""Who is calling, and the request being served."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from apportion.clock import SYSTEM_CLOCK, Clock


class Role(enum.StrEnum):
    ORG_ADMIN = "org_admin"
    TEAM_LEAD = "team_lead"
    MEMBER = "member"
    VIEWER = "viewer"
    AGENT = "agent"


@dataclass(frozen=True, slots=True)
class Actor:
    """An authenticated token. ``name`` is the actor recorded everywhere."""

    token_id: str
    name: str
    role: Role
    org_id: int
    org_slug: str
    teams: tuple[str, ...] = ()
    pool: str | None = None
    is_system_org: bool = False


@dataclass(frozen=True, slots=True)
class Ctx:
    """One request: the actor, the request id (recorded in audit and events) and the
    control plane's clock (heartbeat and report times are read from it)."""

    actor: Actor
    request_id: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    clock: Clock = SYSTEM_CLOCK

    @property
    def org_id(self) -> int:
        return self.actor.org_id

    @property
    def cause(self) -> str:
        return f"request {self.request_id}" if self.request_id else f"by {self.actor.name}"
