"""``apportion server``: run the control plane (API + scheduler loop)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from apportion.service.settings import Settings


def server(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8080,
    database_url: Annotated[
        str | None,
        typer.Option(help="SQLAlchemy URL; default $APPORTION_DATABASE_URL or an SQLite "
                          "file in the user data directory."),
    ] = None,
    no_scheduler: Annotated[
        bool, typer.Option("--no-scheduler", help="Serve the API only; run no scheduler loop.")
    ] = False,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
    workers: Annotated[
        int, typer.Option(min=1, help="Server processes on the port (PostgreSQL only when "
                                      "more than 1); one of them schedules, by lease.")
    ] = 1,
) -> None:
    """Start the apportion control plane: web dashboard on /, REST API on /v1, /docs, /metrics."""
    import uvicorn

    from apportion.api.app import create_app
    from apportion.service.control import ControlPlane
    from apportion.service.settings import Settings

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: "
                        "%(message)s")
    overrides: dict[str, object] = {"database_url": database_url}
    if no_scheduler:
        overrides["run_scheduler"] = False
    settings = Settings.from_env(**overrides)
    if workers > 1:
        _serve_workers(settings, workers, host, port, log_level)
        return
    from apportion.domain.errors import ApportionError

    control = ControlPlane(settings)
    try:
        control.start()
    except ApportionError as exc:
        print(f"apportion server: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    _announce(settings.bootstrap_org, control.bootstrap_token, bool(settings.bootstrap_token))
    app = create_app(control=control)
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level.lower(),
                    access_log=log_level.lower() == "debug")
    finally:
        control.stop()


def _announce(org: str, token: str | None, from_env: bool) -> None:
    if token and from_env:
        print(f"apportion: created organization {org!r} with the org_admin "
              "token from APPORTION_BOOTSTRAP_TOKEN", file=sys.stderr, flush=True)
    elif token:
        print(f"apportion: created organization {org!r}; its org_admin token (shown once):\n"
              f"  {token}", file=sys.stderr, flush=True)


def _serve_workers(settings: Settings, workers: int, host: str, port: int,
                   log_level: str) -> None:
    """``--workers N``: migrate and bootstrap here once, then N processes on one socket."""
    import uvicorn

    from apportion.cli.server_workers import Supervisor
    from apportion.domain.errors import ApportionError
    from apportion.service.tokens import bootstrap
    from apportion.store.db import Database

    db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous,
                  pg_idle_timeout=settings.pg_idle_timeout)
    if db.is_sqlite:
        db.dispose()
        print(f"apportion server: --workers {workers} needs PostgreSQL: SQLite takes one "
              "writer process (the others would wait on its lock, and streams and token "
              "revocations would not reach them at once); use --workers 1, or set "
              "APPORTION_DATABASE_URL / --database-url to a postgresql:// URL",
              file=sys.stderr)
        raise typer.Exit(2)
    try:
        db.migrate()
        token = bootstrap(db, settings.bootstrap_org, settings.bootstrap_token)
    except ApportionError as exc:
        print(f"apportion server: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    finally:
        db.dispose()
    _announce(settings.bootstrap_org, token, bool(settings.bootstrap_token))
    sock = uvicorn.Config("apportion", host=host, port=port).bind_socket()
    try:
        code = Supervisor(settings, workers, sock, log_level).run()
    finally:
        sock.close()
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``server`` to the ``apportion`` command."""
    app.command("server")(server)
