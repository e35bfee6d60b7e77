"""``apportion tokens create | list | revoke`` (org admins)."""

from __future__ import annotations

from typing import Annotated

import typer

from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command
from apportion.cli.output import Column, Format, emit, stdout
from apportion.client import paginate
from apportion.service.context import Role

app = typer.Typer(help="API tokens: create, list, revoke.", no_args_is_help=True)


COLUMNS = (
    Column("ID", lambda t: t.get("id")),
    Column("NAME", lambda t: t.get("name")),
    Column("ROLE", lambda t: t.get("role")),
    Column("TEAMS", lambda t: t.get("teams")),
    Column("POOL", lambda t: t.get("pool")),
    Column("EXPIRES", lambda t: t.get("expires_at")),
    Column("REVOKED", lambda t: t.get("revoked_at")),
    Column("CREATED", lambda t: t.get("created_at"), is_wide_only=True),
    Column("LAST-USED", lambda t: t.get("last_used_at"), is_wide_only=True),
)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="tokens")


@app.command("create")
@command
def create(
    name: Annotated[str, typer.Argument(help="Who or what uses it (shown as submitted_by).")],
    role: Annotated[Role, typer.Option("--role", "-r")] = Role.MEMBER,
    team: Annotated[list[str] | None, typer.Option("--team", "-t", help="Repeatable; "
                                                   "needed for member and team_lead.")] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="For agent tokens.")] = None,
    expires_in_days: Annotated[int | None, typer.Option("--expires-in-days", min=1)] = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Create a token; the secret is printed once."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        created = client.create_token(name, role.value, teams=team, pool=pool,
                                      expires_in_days=expires_in_days)
    if fmt is Format.TABLE:
        out = stdout()
        out.print(f"token {created['id']} for {created['name']} ({created['role']}) created; "
                  "it is shown only now:")
        out.print(created["token"])
    else:
        emit(created, fmt, COLUMNS, has_headers=not no_headers)


@app.command("list")
@command
def list_tokens(output: OutputOpt = None, no_headers: NoHeadersOpt = False) -> None:
    """Every token of the organization (never the secrets)."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        rows = list(paginate(client.list_tokens))
    emit(rows, fmt, COLUMNS, has_headers=not no_headers)


@app.command("revoke")
@command
def revoke(token_id: Annotated[str, typer.Argument(metavar="ID")],
           output: OutputOpt = None, no_headers: NoHeadersOpt = False) -> None:
    """Revoke a token at once."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        revoked = client.revoke_token(token_id)
    if fmt is Format.TABLE:
        stdout().print(f"token {token_id} ({revoked.get('name')}) revoked")
    else:
        emit(revoked, fmt, COLUMNS, has_headers=not no_headers)
