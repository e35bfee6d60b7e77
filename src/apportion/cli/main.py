"""Entry point of the ``apportion`` command. Sub-commands register here.

Exit codes: 0 ok; 1 a failure reported by the server (or no server reachable);
2 a usage error (bad arguments, not logged in). See docs/cli.md.
"""

from __future__ import annotations

import typer

from apportion import __version__
from apportion.cli import (
    agent_cmd,
    completion_cmd,
    login_cmd,
    pools_cmd,
    replay_cmd,
    reservations_cmd,
    server_cmd,
    simulate_cmd,
    submit_cmd,
    teams_cmd,
    tokens_cmd,
    top_cmd,
    up_cmd,
    usage_cmd,
    workloads_cmd,
)

app = typer.Typer(
    name="apportion",
    help="apportion: GPU workload scheduler for organizations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
simulate_cmd.register(app)
replay_cmd.register(app)
server_cmd.register(app)
agent_cmd.register(app)
up_cmd.register(app)
for group in (login_cmd, submit_cmd, workloads_cmd, teams_cmd, reservations_cmd, pools_cmd,
              tokens_cmd, top_cmd, completion_cmd, usage_cmd):
    group.register(app)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def main() -> None:
    app()
