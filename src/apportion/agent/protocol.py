"""What the agent loop needs from the control plane (the client's agent calls),
how it is tuned, and how it learns to back off."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from apportion.client import Page


class AgentApi(Protocol):
    """The three agent endpoints (``apportion.client.ApportionClient`` has them)."""

    def agent_heartbeat(self, pool: str, nodes: list[dict[str, Any]], *,
                        agent_version: str = "",
                        runs: list[dict[str, Any]] | None = None) -> dict[str, Any]: ...

    def agent_decisions(self, cursor: int = 0, *, limit: int | None = None,
                        wait: float | None = None, live: bool = False) -> Page: ...

    def agent_report(self, workload_id: int, attempt: int, run_id: str, status: str, *,
                     message: str | None = None, exit_code: int | None = None,
                     pods_running: int | None = None) -> dict[str, Any]: ...

    def agent_log(self, workload_id: int, attempt: int, run_id: str, pod: int, offset: int,
                  data: bytes) -> dict[str, Any]: ...


class Retry(Exception):
    """The control plane cannot be used right now; back off and try again."""


@dataclass(frozen=True, slots=True)
class AgentOptions:
    #: seconds: long-poll wait for decisions, and the executor poll period
    poll_interval: float = 1.0
    heartbeat_interval: float = 10.0
    #: seconds past a run's time limit after which the agent stops the run
    #: itself (the control plane normally ends it first; this bounds how long a
    #: run outlives its limit while the control plane is unreachable)
    time_limit_fallback: float = 60.0
    max_backoff: float = 10.0
