"""A throwaway PostgreSQL cluster for the store, service and API tests.

Finds ``initdb``/``pg_ctl`` under /usr/lib/postgresql/*/bin (or on PATH),
creates a cluster in a temporary directory, starts it on a free port of
127.0.0.1 with its unix socket in that directory, and removes it at the end.
PostgreSQL refuses to run as root: then the cluster runs as the ``postgres``
system user (created by Debian's package). Without PostgreSQL the tests that
need it are skipped with a visible reason.

Use: ``from tests.pgfixture import backend_url, pg_server  # noqa: F401`` in a
conftest, then ask for ``backend_url`` (parametrized: sqlite, postgresql).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_counter = itertools.count(1)


def find_pg_bin() -> Path | None:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return Path(candidate)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    port: int
    host: str = "127.0.0.1"
    user: str = "postgres"

    def url(self, db: str) -> str:
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{db}"

    def create_database(self) -> str:
        import psycopg

        name = f"t{os.getpid()}_{next(_counter)}"
        with psycopg.connect(host=self.host, port=self.port, user=self.user, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(host=self.host, port=self.port, user=self.user, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _as_pg_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


def _start_cluster(bindir: Path, tmp: str, data: str) -> int:
    """Start the cluster in ``data`` on a free port; returns the port. The port is
    free when chosen, but another process (an xdist worker starting its own
    cluster, another developer's run) can take it before the postmaster binds it:
    then the start fails and is tried again on another port (bounded)."""
    log = os.path.join(tmp, "log")
    for attempt in range(1, 6):
        port = _free_port()
        opts = (f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={tmp} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                "-c max_connections=200")
        started = subprocess.run(_as_pg_user([str(bindir / "pg_ctl"), "-D", data, "-l", log,
                                              "-o", opts, "-w", "-t", "120", "start"]),
                                 capture_output=True)
        if started.returncode == 0:
            return port
        subprocess.run(_as_pg_user([str(bindir / "pg_ctl"), "-D", data, "-m", "immediate",
                                    "-w", "stop"]), capture_output=True)
        if attempt == 5:
            tail = Path(log).read_text()[-2000:] if os.path.exists(log) else ""
            raise RuntimeError(f"PostgreSQL did not start ({attempt} ports tried): "
                               f"{started.stderr.decode()[-1000:]}\n{tail}")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One cluster per test session: with pytest-xdist, one per worker (each in its
    own temporary directory, on its own port); tests get fresh databases in it."""
    bindir = find_pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin "
                    "or on PATH): install Debian's 'postgresql' package to run these tests")
    tmp = tempfile.mkdtemp(prefix="apportion-pg-")
    data = os.path.join(tmp, "data")
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL")
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
    subprocess.run(_as_pg_user([str(bindir / "initdb"), "-D", data, "-U", "postgres",
                                "-A", "trust", "--no-sync", "-E", "UTF8"]),
                   check=True, capture_output=True)
    port = _start_cluster(bindir, tmp, data)
    try:
        yield PgServer(port)
    finally:
        subprocess.run(_as_pg_user([str(bindir / "pg_ctl"), "-D", data, "-m", "immediate",
                                    "-w", "stop"]), capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/apportion.db"
        return
    server: PgServer = request.getfixturevalue("pg_server")
    url = server.create_database()
    try:
        yield url
    finally:
        server.drop_database(url)
