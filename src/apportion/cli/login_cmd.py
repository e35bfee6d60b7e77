"""``apportion login | logout | whoami | config get/set``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from apportion import __version__
from apportion.cli import common
from apportion.cli.common import CliError, NoHeadersOpt, OutputOpt, command, usage_error
from apportion.cli.config import (
    SETTABLE_KEYS,
    ConfigError,
    check_value,
    config_path,
    effective_server,
    effective_token,
    load_config,
    normalize_key,
    save_config,
)
from apportion.cli.output import Column, Format, emit, stdout
from apportion.client import ApiError, ApportionClient

config_app = typer.Typer(help="Read and change CLI settings (default team, output format).",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("login")(login)
    app.command("logout")(logout)
    app.command("whoami")(whoami)
    app.add_typer(config_app, name="config")


def _load() -> dict[str, Any]:
    try:
        return load_config()
    except ConfigError as err:
        raise usage_error(str(err)) from err


@command
def login(
    server: Annotated[str, typer.Option("--server", "-s", help="Server URL, e.g. "
                                        "http://apportion.example:8080", show_default=False)],
    token: Annotated[str | None, typer.Option(
        "--token", "-t", help="API token (apt_...); asked for when omitted.",
        show_default=False)] = None,
) -> None:
    """Check the token against the server and store both in the config file (mode 0600)."""
    if not server.startswith(("http://", "https://")):
        raise usage_error(f"--server must be an http:// or https:// URL, not {server!r}")
    if not token:
        token = typer.prompt("Token", hide_input=True).strip()
    client = ApportionClient(server, token, transport=common.TRANSPORT,
                             user_agent=f"apportion-cli/{__version__}")
    with client:
        try:
            me = client.token_self()
        except ApiError as err:
            if err.code == "UNAUTHENTICATED":
                raise CliError(f"the server at {server} refused this token ({err.message}): "
                               "ask your admin for a valid one") from err
            raise
    config = _load()
    config.update(server=server.rstrip("/"), token=token)
    path = save_config(config)
    teams = ", ".join(me.get("teams") or []) or "-"
    stdout().print(f"logged in to {server} as {me.get('name')} "
                   f"(role {me.get('role')}, teams {teams}); saved in {path}")


@command
def logout() -> None:
    """Forget the stored token (the server URL stays)."""
    config = _load()
    if "token" not in config:
        stdout().print("not logged in")
        return
    config.pop("token")
    save_config(config)
    stdout().print(f"logged out of {config.get('server') or 'the server'}")


WHOAMI_COLUMNS = (
    Column("NAME", lambda t: t.get("name")),
    Column("ROLE", lambda t: t.get("role")),
    Column("TEAMS", lambda t: t.get("teams")),
    Column("POOL", lambda t: t.get("pool")),
    Column("SERVER", lambda t: t.get("_server"), is_wide_only=False),
    Column("ID", lambda t: t.get("id"), is_wide_only=True),
    Column("EXPIRES", lambda t: t.get("expires_at"), is_wide_only=True),
)


@command
def whoami(output: OutputOpt = None, no_headers: NoHeadersOpt = False) -> None:
    """Show who the stored token belongs to: name, role, teams."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        me = client.token_self()
        server = client.server
    if fmt in (Format.JSON, Format.YAML):
        emit(me, fmt, WHOAMI_COLUMNS)
    else:
        emit({**me, "_server": server}, fmt, WHOAMI_COLUMNS, has_headers=not no_headers)


@config_app.command("get")
@command
def config_get(
    key: Annotated[str | None, typer.Argument(
        help=f"One of {', '.join(SETTABLE_KEYS)}, or token / path; all when omitted.",
        show_default=False)] = None,
) -> None:
    """Print one setting, or all of them (the token masked)."""
    config = _load()
    effective = {
        "server": effective_server(config),
        "default_team": config.get("default_team"),
        "output": config.get("output"),
    }
    if key in ("path", "token"):
        value = str(config_path()) if key == "path" else _mask(effective_token(config))
        typer.echo(value or "")
        return
    if key is not None:
        try:
            name = normalize_key(key)
        except ConfigError as err:
            raise usage_error(str(err)) from err
        typer.echo(effective[name] or "")
        return
    effective["token"] = _mask(effective_token(config))
    effective["path"] = str(config_path())
    for name, value in effective.items():
        typer.echo(f"{name}: {value if value is not None else '-'}")


@config_app.command("set")
@command
def config_set(
    key: Annotated[str, typer.Argument(help=f"One of {', '.join(SETTABLE_KEYS)}.")],
    value: Annotated[str, typer.Argument(help="The new value; '' clears it.")],
) -> None:
    """Change one setting in the config file."""
    try:
        name = normalize_key(key)
        if value:
            check_value(name, value)
    except ConfigError as err:
        raise usage_error(str(err)) from err
    config = _load()
    config[name] = value or None
    save_config(config)
    typer.echo(f"{name}: {value or '-'}")


def _mask(token: str | None) -> str | None:
    if not token:
        return None
    head, _, _ = token.rpartition("_")
    return f"{head}_****" if head else "****"
