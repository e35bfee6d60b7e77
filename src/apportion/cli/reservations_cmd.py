"""``apportion reservations list | set TEAM POOL GPUS | remove TEAM POOL``."""

from __future__ import annotations

from typing import Annotated

import typer

from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command
from apportion.cli.output import Column, Format, emit, fmt_gpus, gpus_phrase, stdout
from apportion.client import paginate

app = typer.Typer(help="GPU reservations of teams in pools.", no_args_is_help=True)

COLUMNS = (
    Column("TEAM", lambda r: r.get("team")),
    Column("POOL", lambda r: r.get("pool")),
    Column("GPUS", lambda r: fmt_gpus(r.get("gpus"))),
    Column("VERSION", lambda r: r.get("version"), is_wide_only=True),
    Column("UPDATED", lambda r: r.get("updated_at"), is_wide_only=True),
)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="reservations")


@app.command("list")
@command
def list_reservations(
    team: Annotated[str | None, typer.Option("--team", "-t")] = None,
    pool: Annotated[str | None, typer.Option("--pool")] = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Reservations, by team and pool."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        rows = list(paginate(client.list_reservations, team=team, pool=pool))
    emit(rows, fmt, COLUMNS, has_headers=not no_headers)


@app.command("set")
@command
def set_reservation(
    team: str,
    pool: str,
    gpus: Annotated[float, typer.Argument(min=0, help="GPUs (0 removes).")],
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Reserve GPUS in POOL for TEAM's subtree (children <= parent <= pool capacity)."""
    fmt = common.output_format(output)
    amount = int(gpus) if gpus.is_integer() else gpus
    with common.open_client() as client:
        result = client.set_reservation(team, pool, amount)
    if fmt is Format.TABLE or not isinstance(result, dict):
        stdout().print(f"reservation of {team} in {pool}: "
                       f"{gpus_phrase(amount)}")
    else:
        emit(result, fmt, COLUMNS, has_headers=not no_headers)


@app.command("remove")
@command
def remove(team: str, pool: str) -> None:
    """Remove TEAM's reservation in POOL."""
    with common.open_client() as client:
        client.delete_reservation(team, pool)
    stdout().print(f"reservation of {team} in {pool} removed")
