"""``apportion simulate FILE [--until T] [-o json|table] [--plot FILE.png]``.

Exit codes: 0 ok; 2 bad scenario file (one clear line on stderr, no
traceback); 3 the cycle limit of one instant was reached.
"""

from __future__ import annotations

import enum
import json
import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from apportion.domain.errors import ValidationError
from apportion.sim.output import to_json
from apportion.sim.runner import CycleLimitError, SimResult, simulate
from apportion.sim.scenario import Scenario, load_scenario, parse_scenario

EXIT_BAD_FILE = 2
EXIT_CYCLE_LIMIT = 3


class OutputFormat(enum.StrEnum):
    TABLE = "table"
    JSON = "json"


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to ``app``."""
    app.command(name="simulate")(simulate_command)


def simulate_command(
    file: Annotated[str, typer.Argument(help="Scenario YAML file, or - to read it from stdin.")],
    until: Annotated[int | None, typer.Option(
        "--until", min=0, help="Process every instant up to T seconds; print the state at T."
    )] = None,
    output: Annotated[OutputFormat, typer.Option(
        "-o", "--output", help="table (readable) or json (one object)."
    )] = OutputFormat.TABLE,
    plot: Annotated[str | None, typer.Option(
        "--plot", help="Also draw GPUs in use per team over time into this PNG file."
    )] = None,
) -> None:
    """Run a scenario through the real scheduler in virtual time and print the outcome.

    The format is described in docs/simulate.md; examples/ has scenarios to copy.
    """
    scenario = _load(file)
    try:
        result = simulate(scenario, until=until)
    except ValidationError as err:
        _fail(file, str(err), EXIT_BAD_FILE)
    except CycleLimitError as err:
        _fail(file, str(err), EXIT_CYCLE_LIMIT)
    if plot:
        _plot(result, plot)
    if output is OutputFormat.JSON:
        sys.stdout.write(json.dumps(to_json(result), indent=2) + "\n")
    else:
        from apportion.sim.table import render

        render(result, Console())


def _load(file: str) -> Scenario:
    try:
        if file == "-":
            return parse_scenario(sys.stdin.read())
        return load_scenario(file)
    except ValidationError as err:
        _fail(file, str(err), EXIT_BAD_FILE)


def _plot(result: SimResult, path: str) -> None:
    from apportion.sim.plot import write_plot

    try:
        write_plot(result, path)
    except OSError as err:
        _fail(path, f"cannot write the plot: {err.strerror or err}", EXIT_BAD_FILE)


def _fail(file: str, message: str, code: int) -> NoReturn:
    where = "<stdin>" if file == "-" else file
    typer.echo(f"apportion simulate: {where}: {message}", err=True)
    raise typer.Exit(code)
