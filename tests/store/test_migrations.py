"""The schema is created by the shipped Alembic migrations, on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from apportion.domain.workload import make_spec
from apportion.store import codec
from apportion.store.db import Database, normalize_url
from apportion.store.models import Base
from tests.pgfixture import PgServer
from tests.timing import wait_until


def test_migrate_creates_every_table_and_is_idempotent(backend_url: str) -> None:
    db = Database(backend_url)
    try:
        db.migrate()
        db.migrate()  # a second start changes nothing
        tables = set(inspect(db.engine).get_table_names())
        assert set(Base.metadata.tables) <= tables
        assert "alembic_version" in tables
    finally:
        db.dispose()


def test_write_rolls_back_on_error(backend_url: str) -> None:
    from apportion.store.models import OrgRow

    db = Database(backend_url)
    db.migrate()
    try:
        with pytest.raises(RuntimeError, match="boom"), db.write() as s:
            s.add(OrgRow(slug="x", name="x", created_at=0.0))
            s.flush()
            assert s.query(OrgRow).count() == 1  # the premise: written in the transaction
            raise RuntimeError("boom")
        with db.read() as s:
            assert s.query(OrgRow).count() == 0
    finally:
        db.dispose()


def test_spec_round_trips_through_json() -> None:
    spec = make_spec(name="w", team="t", wclass="reserved", priority=200, gpus=0.5, pods=4,
                     min_pods=2, topology={"level": "rack", "mode": "preferred"},
                     env={"A": "1"}, command=["python", "x.py"])
    assert codec.spec_from_dict(codec.spec_to_dict(spec)) == spec
    mem = make_spec(name="m", team="t", gpu_memory_mib=20000)
    assert codec.spec_from_dict(codec.spec_to_dict(mem)) == mem


def test_postgres_urls_use_psycopg3() -> None:
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"


def test_migrations_match_the_models(backend_url: str) -> None:
    """Every revision together builds exactly the tables, columns and indexes of
    ``models.py`` (a model change without its migration fails here)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    db = Database(backend_url)
    try:
        db.migrate()
        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    finally:
        db.dispose()


def test_upgrading_a_database_with_data_keeps_it(backend_url: str) -> None:
    """A 0001 database with an organization upgrades to head: the new columns get
    their defaults, the rows stay."""
    from alembic import command
    from sqlalchemy import text

    from apportion.store.db import alembic_config

    db = Database(backend_url)
    try:
        cfg = alembic_config()
        with db.engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0001")
            conn.execute(text("INSERT INTO organizations (slug, name, is_system, version, "
                              "sched_version, last_cycle, created_at) "
                              "VALUES ('o', 'O', false, 1, 7, 0, 0)"))
            conn.commit()
        db.migrate()
        with db.engine.connect() as conn:
            row = conn.execute(text("SELECT sched_version, teams_version FROM organizations "
                                    "WHERE slug = 'o'")).one()
        assert tuple(row) == (7, 0)
    finally:
        db.dispose()


def test_host_resources_round_trip_through_the_stored_spec() -> None:
    spec = make_spec(name="w", team="t", gpus=1, cpu=0.25, memory_mib=2048)
    data = codec.spec_to_dict(spec)
    assert (data["cpu"], data["memory_mib"]) == (0.25, 2048)
    assert codec.spec_from_dict(data) == spec
    old = {k: v for k, v in data.items() if k not in ("cpu", "memory_mib")}
    assert codec.spec_from_dict(old).cpu_milli == 0  # a spec stored before revision 3


def test_0004_to_0006_give_existing_rows_their_defaults(backend_url: str) -> None:
    """Rows written before shrinks and host resources upgrade to: exiting part 0
    (the whole attempt), decisions without pods, workloads without preemptions,
    pools packing fragmentation with the default prior, nodes not limited."""
    from alembic import command
    from sqlalchemy import text

    from apportion.store.db import alembic_config

    db = Database(backend_url)
    try:
        cfg = alembic_config()
        with db.engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0003")
            conn.execute(text("INSERT INTO organizations (slug, name, is_system, version, "
                              "sched_version, teams_version, last_cycle, created_at) "
                              "VALUES ('o', 'O', false, 1, 0, 0, 0, 0)"))
            org = conn.execute(text("SELECT id FROM organizations")).scalar_one()
            conn.execute(text(
                "INSERT INTO exiting (org_id, workload_id, attempt, team, pool, placement, "
                "exits_at) VALUES (:o, 5, 1, 't', 'main', '[]', 10)"), {"o": org})
            conn.execute(text(
                "INSERT INTO agent_decisions (org_id, pool, kind, workload_id, attempt, run_id, "
                "placement, exec, created_at) VALUES (:o, 'main', 'stop', 5, 1, 'w5-a1', '[]', "
                "'{}', 0)"), {"o": org})
            conn.execute(text(
                "INSERT INTO pools (org_id, name, gpu_memory_mib, topology, start_delay, "
                "preemption_grace, agent_status, version, created_at) "
                "VALUES (:o, 'main', 81920, '[]', 0, 0, 'never', 1, 0)"), {"o": org})
            conn.execute(text(
                "INSERT INTO nodes (org_id, pool, name, gpus, gpu_memory_mib, labels, health, "
                "cordoned, unavailable, version) "
                "VALUES (:o, 'main', 'n1', 8, 81920, '{}', 'ready', false, '[]', 1)"),
                {"o": org})
            conn.commit()
        db.migrate()
        with db.engine.connect() as conn:
            assert conn.execute(text("SELECT part FROM exiting")).scalar_one() == 0
            pods = conn.execute(text("SELECT pods FROM agent_decisions")).scalar_one()
            assert pods in ([], "[]")
            assert conn.execute(text("SELECT packing FROM pools")).scalar_one() == \
                "fragmentation"
            node = conn.execute(text("SELECT cpu_milli, memory_mib FROM nodes")).one()
            assert tuple(node) == (None, None)
            # 0006: no typical pods stored, so the default prior (a whole node)
            assert conn.execute(text("SELECT typical_pods FROM pools")).scalar_one() is None
    finally:
        db.dispose()


def test_a_session_frozen_inside_a_transaction_is_ended_by_postgresql(
        pg_server: PgServer) -> None:
    """A process frozen inside a transaction (SIGSTOP, a VM pause) held its row
    locks until it woke, and the other servers' scheduler and writes waited for
    it (tests/chaos/test_split_brain.py). PostgreSQL ends such a session after
    ``pg_idle_timeout`` and its locks go with it."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    url = pg_server.create_database()
    db = Database(url, pg_idle_timeout=0.5)
    watcher = Database(url, pg_idle_timeout=0)
    try:
        db.migrate()
        with pytest.raises(DBAPIError, match="idle-in-transaction"), db.write() as s:
            pid = s.execute(text("SELECT pg_backend_pid()")).scalar_one()
            s.execute(text("SELECT 1 FROM organizations FOR UPDATE"))

            def gone() -> bool:
                with watcher.read() as w:
                    return not w.execute(text(
                        "SELECT 1 FROM pg_stat_activity WHERE pid = :p"), {"p": pid}).first()

            wait_until(gone, timeout=30, what="PostgreSQL to end the idle transaction")
            s.execute(text("SELECT 1"))  # the session is gone: this fails
    finally:
        db.dispose()
        watcher.dispose()
        pg_server.drop_database(url)


def test_a_session_frozen_while_it_reads_a_large_result_is_ended(
        pg_server: PgServer) -> None:
    """A process frozen while it *receives* a result leaves its backend blocked
    writing to the socket (``ClientWrite``, state ``active``): no idle or
    statement timeout interrupts that, and its row locks stayed until it woke.
    A leader frozen inside a large read under the lease's lock stalled the
    other server for ever (tests/chaos/test_split_brain.py, 180 s waited in
    CI). ``tcp_user_timeout`` (``pg_idle_timeout``) now ends the session."""
    import signal
    import subprocess
    import sys

    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    url = pg_server.create_database()
    watcher = Database(url, pg_idle_timeout=0)
    with watcher.write() as w:
        w.execute(text("CREATE TABLE probe (id int PRIMARY KEY, v int)"))
        w.execute(text("INSERT INTO probe VALUES (1, 0)"))
    child = subprocess.Popen([sys.executable, "-c", f"""
from sqlalchemy import text
from apportion.store.db import Database
db = Database({url!r}, pg_idle_timeout=1.0)
with db.write() as s:
    print(s.execute(text("SELECT pg_backend_pid() FROM probe WHERE id = 1 FOR UPDATE"))
          .scalar_one(), flush=True)
    s.execute(text("SELECT repeat('x', 1000) FROM generate_series(1, 5000000)")).all()
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        pid = int(child.stdout.readline())

        def backend(p: int = pid) -> tuple[str, str | None] | None:
            with watcher.read() as w:
                row = w.execute(text("SELECT state, wait_event FROM pg_stat_activity "
                                     "WHERE pid = :p"), {"p": p}).first()
            return None if row is None else (row[0], row[1])

        # frozen once its large read is running (frozen before, it would sit idle
        # in the transaction: the other test's case)
        wait_until(lambda: (backend() or ("",))[0] == "active", timeout=30,
                   what="the child's large read to start")
        child.send_signal(signal.SIGSTOP)

        # the frozen reader's backend blocks writing the result (or is already gone)
        wait_until(lambda: backend() in (None, ("active", "ClientWrite")), timeout=30,
                   what="the backend to block in ClientWrite")

        def row_free() -> bool:
            try:
                with watcher.write() as w:
                    w.execute(text("SET LOCAL lock_timeout = 200"))
                    w.execute(text("UPDATE probe SET v = v + 1 WHERE id = 1"))
                return True
            except OperationalError:  # still locked by the frozen reader
                return False

        wait_until(row_free, timeout=30, what="the frozen reader's row lock to go")
        wait_until(lambda: backend() is None, timeout=30, what="its session to end")
    finally:
        child.send_signal(signal.SIGCONT)
        child.kill()
        child.wait(10)
        watcher.dispose()
        pg_server.drop_database(url)
