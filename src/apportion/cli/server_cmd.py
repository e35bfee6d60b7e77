"""``apportion server``: run the control plane (API + scheduler loop)."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer


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
    from apportion.domain.errors import ApportionError

    control = ControlPlane(settings)
    try:
        control.start()
    except ApportionError as exc:
        print(f"apportion server: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if control.bootstrap_token and settings.bootstrap_token:
        print(f"apportion: created organization {settings.bootstrap_org!r} with the org_admin "
              "token from APPORTION_BOOTSTRAP_TOKEN", file=sys.stderr, flush=True)
    elif control.bootstrap_token:
        print(
            "apportion: created organization "
            f"{settings.bootstrap_org!r}; its org_admin token (shown once):\n"
            f"  {control.bootstrap_token}",
            file=sys.stderr,
            flush=True,
        )
    app = create_app(control=control)
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level.lower(),
                    access_log=log_level.lower() == "debug")
    finally:
        control.stop()


def register(app: typer.Typer) -> None:
    """Add ``server`` to the ``apportion`` command."""
    app.command("server")(server)
