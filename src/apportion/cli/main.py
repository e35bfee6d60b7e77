"""Entry point of the ``apportion`` command. Sub-commands register here."""

from __future__ import annotations

import typer

from apportion import __version__
from apportion.cli import server_cmd, simulate_cmd

app = typer.Typer(
    name="apportion",
    help="apportion: GPU workload scheduler for organizations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)
simulate_cmd.register(app)
server_cmd.register(app)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app()
