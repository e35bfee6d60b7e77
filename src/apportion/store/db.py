"""The database: engines, transactions and migrations.

- ``Database.write()`` opens ONE write transaction; the service layer uses one
  per command or committed plan. Repositories never commit.
- SQLite (the default) runs in WAL mode; write transactions start with
  ``BEGIN IMMEDIATE`` so two writers never deadlock on a lock upgrade, and a
  process-wide lock keeps this process's writers from busy-waiting on each other.
- PostgreSQL (psycopg 3) uses READ COMMITTED; conflicts are resolved by
  conditional updates (versions) and row locks (the scheduler lease). Every
  session has ``idle_in_transaction_session_timeout`` (``pg_idle_timeout``):
  a process frozen inside a transaction (a SIGSTOP, a VM pause, a debugger)
  held its row locks — the lease's, the organization's — until it woke, and
  every other process's scheduler and writes waited for it; PostgreSQL now
  ends such a session and its locks go with it (docs/reliability.md).
  The idle timeout does not reach a session frozen while it *receives* a
  result: its backend sits in ``ClientWrite`` (state ``active``), which no
  idle or statement timeout interrupts. ``tcp_user_timeout`` (the same value)
  ends that one: data the frozen process's socket leaves unacknowledged for
  that long closes the connection (TCP connections; not a Unix socket).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

#: what the service layer may know of SQLAlchemy: the transaction it is handed
#: and the error of a unique key taken by a concurrent writer (import-linter
#: forbids service modules any other import of sqlalchemy)
__all__ = ["Database", "IntegrityError", "Session", "alembic_config", "make_disposable_engine",
           "normalize_url", "ping"]


def normalize_url(url: str) -> str:
    """Map ``postgresql://`` and ``postgres://`` to the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def _sqlite_engine(url: str, begin: str, synchronous: str = "NORMAL") -> Engine:
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        pool_size=16,
        max_overflow=16,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql(begin)

    return engine


class Database:
    """Engines and transaction scopes for one database URL."""

    def __init__(self, url: str, *, pool_size: int = 10, sqlite_synchronous: str = "NORMAL",
                 pg_idle_timeout: float = 60.0) -> None:
        if sqlite_synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"sqlite synchronous must be NORMAL, FULL or EXTRA, not "
                             f"{sqlite_synchronous!r}")
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite:
            db_path = parsed.database
            if db_path and db_path != ":memory:":
                Path(db_path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            sync = sqlite_synchronous.upper()
            self.engine = _sqlite_engine(self.url, "BEGIN IMMEDIATE", sync)
            self.read_engine = _sqlite_engine(self.url, "BEGIN", sync)
        else:
            idle_ms = max(0, round(pg_idle_timeout * 1000))
            self.engine = create_engine(
                self.url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True,
                connect_args={"options": f"-c idle_in_transaction_session_timeout={idle_ms} "
                                         f"-c tcp_user_timeout={idle_ms}"},
            )
            self.read_engine = self.engine
        self._writes = sessionmaker(self.engine, expire_on_commit=False)
        self._reads = sessionmaker(self.read_engine, expire_on_commit=False)
        self._write_lock = threading.Lock() if self.is_sqlite else None

    @property
    def backend(self) -> str:
        return "sqlite" if self.is_sqlite else "postgresql"

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One write transaction: commits on success, rolls back on any exception."""
        if self._write_lock is not None:
            with self._write_lock, self._writes.begin() as session:
                yield session
        else:
            with self._writes.begin() as session:
                yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A transaction for reading (nothing in it is meant to be written).

        It ends with COMMIT, not ROLLBACK, so loaded rows stay readable after it.
        """
        session = self._reads()
        try:
            with session.begin():
                yield session
        finally:
            session.close()

    def migrate(self) -> None:
        """Bring the schema to the newest revision (Alembic ``upgrade head``)."""
        cfg = alembic_config()
        with self.engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()

    def dispose(self) -> None:
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()


def ping(session: Session) -> None:
    """Raise if the database does not answer (``SELECT 1``)."""
    session.execute(text("SELECT 1"))


def alembic_config() -> Config:
    """Alembic configuration pointing at the migrations shipped in this package."""
    cfg = Config()
    location = resources.files("apportion.store") / "migrations"
    cfg.set_main_option("script_location", str(location))
    return cfg


def make_disposable_engine(url: str) -> Engine:
    """An engine without a pool, for one-off admin work (tests, backups)."""
    return create_engine(normalize_url(url), poolclass=NullPool)
