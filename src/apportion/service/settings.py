"""Server settings, read from the environment (``APPORTION_*``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from platformdirs import user_data_dir


def default_database_url() -> str:
    path = Path(user_data_dir("apportion")) / "apportion.db"
    return f"sqlite:///{path}"


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return default if raw in (None, "") else float(raw)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything configurable. See docs/operations.md."""

    database_url: str = field(default_factory=default_database_url)
    bootstrap_token: str | None = None
    bootstrap_org: str = "default"
    #: seconds between timer-driven cycles
    cycle_interval: float = 5.0
    #: minimum seconds between two cycles (coalesces bursts of triggers)
    cycle_min_gap: float = 0.05
    #: seconds without a heartbeat before an agent's nodes become ``unknown``
    agent_timeout: float = 60.0
    lease_ttl: float = 15.0
    #: PostgreSQL only: seconds a session may sit idle inside a transaction before
    #: the server ends it (a frozen process then releases its locks); 0 = never.
    #: Above the longest pause between two statements of one transaction (the
    #: scheduler's locked retry computes a cycle inside one: seconds at 25,000
    #: workloads)
    pg_idle_timeout: float = 60.0
    #: per-token requests per second (0 = unlimited) and burst size
    rate_limit: float = 200.0
    rate_burst: float = 400.0
    idempotency_ttl: float = 24 * 3600.0
    run_scheduler: bool = True
    #: SQLite only: NORMAL survives a killed process; FULL also a power loss
    sqlite_synchronous: str = "NORMAL"
    holder: str = ""
    #: bytes a request body may have (413 above), and seconds a body may stall (408)
    max_body_bytes: int = 16 * 1024 * 1024
    body_timeout: float = 30.0
    #: bytes of log kept per pod and attempt; what an agent ships beyond is dropped
    log_max_bytes: int = 64 * 1024 * 1024
    #: key that signs dashboard session cookies; None: a random one per process
    #: (sessions then end when the server restarts; set it when several servers
    #: share one database behind a load balancer)
    web_secret: str | None = None

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        env = os.environ
        values: dict[str, object] = {
            "database_url": env.get("APPORTION_DATABASE_URL") or default_database_url(),
            "bootstrap_token": env.get("APPORTION_BOOTSTRAP_TOKEN") or None,
            "bootstrap_org": env.get("APPORTION_BOOTSTRAP_ORG") or "default",
            "cycle_interval": _float("APPORTION_CYCLE_INTERVAL", 5.0),
            "cycle_min_gap": _float("APPORTION_CYCLE_MIN_GAP", 0.05),
            "agent_timeout": _float("APPORTION_AGENT_TIMEOUT", 60.0),
            "lease_ttl": _float("APPORTION_LEASE_TTL", 15.0),
            "pg_idle_timeout": _float("APPORTION_PG_IDLE_TIMEOUT", 60.0),
            "rate_limit": _float("APPORTION_RATE_LIMIT", 200.0),
            "rate_burst": _float("APPORTION_RATE_BURST", 400.0),
            "run_scheduler": env.get("APPORTION_SCHEDULER", "1") not in ("0", "false", "no"),
            "sqlite_synchronous": env.get("APPORTION_SQLITE_SYNCHRONOUS") or "NORMAL",
            "log_max_bytes": int(_float("APPORTION_LOG_MAX_BYTES", 64 * 1024 * 1024)),
            "max_body_bytes": int(_float("APPORTION_MAX_BODY_BYTES", 16 * 1024 * 1024)),
            "body_timeout": _float("APPORTION_BODY_TIMEOUT", 30.0),
            "web_secret": env.get("APPORTION_WEB_SECRET") or None,
            "holder": env.get("APPORTION_HOLDER") or "",
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
