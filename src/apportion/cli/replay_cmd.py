"""``apportion replay TRACE --org ORG.yaml [--policy P ...] [--window 7d]
[--report DIR] [-o table|json|none]``: a trace through the simulator under
each policy, side by side (docs/replay.md).

Exit codes: 0 ok; 2 a bad trace, org file or option (one line on stderr
naming the field); 3 the cycle limit of one instant was reached.
"""

from __future__ import annotations

import enum
import json
import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from apportion.domain.errors import ValidationError
from apportion.replay import report as report_mod
from apportion.replay.org import Org, load_org
from apportion.replay.policies import POLICIES
from apportion.replay.runner import Replay, policy_names, run
from apportion.replay.trace import Trace, parse_duration
from apportion.sim.runner import CycleLimitError

EXIT_BAD_INPUT = 2
EXIT_CYCLE_LIMIT = 3


class ReplayOutput(enum.StrEnum):
    TABLE = "table"
    JSON = "json"
    NONE = "none"


def register(app: typer.Typer) -> None:
    """Add the ``replay`` command to ``app``."""
    app.command(name="replay")(replay_command)


def replay_command(
    trace: Annotated[str, typer.Argument(help=(
        "The trace: an Alibaba GPU 2023 folder (or one of its openb_pod_list_*.csv), "
        "a replay CSV, or a scenario YAML."))],
    org: Annotated[str | None, typer.Option(
        "--org", help="ORG.yaml: teams, reservations and how trace rows map to them "
                      "(optional for a scenario, which has its own).")] = None,
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", help=f"A policy to run (repeat for several; default all): "
                         f"{', '.join(POLICIES)}.")] = None,
    window: Annotated[str | None, typer.Option(
        "--window", help="Replay only this long from the first submission, e.g. 7d, 12h.")
    ] = None,
    report_dir: Annotated[str | None, typer.Option(
        "--report", help="Write report.html, results.json and the charts into this folder.")
    ] = None,
    output: Annotated[ReplayOutput, typer.Option(
        "-o", "--output", help="table (the summary), json (results.json on stdout) or none."
    )] = ReplayOutput.TABLE,
) -> None:
    """Replay a trace under apportion and the alternatives, and compare them."""
    for name in policy or []:
        if name not in POLICIES:
            _fail("--policy", f"{name!r} is not a policy; allowed: {', '.join(POLICIES)}")
    try:
        seconds = parse_duration(window, "--window") if window else None
        the_trace, the_org = _load(trace, org)
    except ValidationError as err:
        _fail(trace, str(err))
    replay = Replay(the_trace, the_org, policy_names(policy), seconds)
    err_console = Console(stderr=True)
    try:
        results = _with_progress(replay, err_console) if err_console.is_terminal else run(replay)
    except ValidationError as err:
        _fail(org or trace, str(err))
    except CycleLimitError as err:
        _fail(trace, str(err), EXIT_CYCLE_LIMIT)
    if report_dir:
        paths = report_mod.write(results, report_dir)
        err_console.print(f"report: {paths['report']}  results: {paths['results']}")
    if output is ReplayOutput.JSON:
        sys.stdout.write(json.dumps(results, indent=1) + "\n")
    elif output is ReplayOutput.TABLE:
        console = Console()
        if not console.is_terminal:
            console = Console(width=160)  # a file or a pipe: no column cut short
        print_summary(results, console)


def _load(trace: str, org: str | None) -> tuple[Trace, Org]:
    from apportion.replay.alibaba import is_alibaba, load_alibaba

    if is_alibaba(trace):
        loaded = load_alibaba(trace)
    elif trace.endswith((".yaml", ".yml")):
        from apportion.replay.scenario_trace import load_scenario_trace, org_from_scenario

        loaded, scenario = load_scenario_trace(trace)
        if org is None:
            return loaded, org_from_scenario(scenario, trace)
    elif trace.endswith(".csv"):
        from apportion.replay.csvtrace import load_csv

        loaded = load_csv(trace)
    else:
        raise ValidationError(trace, "not a trace this command reads",
                              "an Alibaba GPU 2023 folder, a .csv or a scenario .yaml")
    if org is None:
        raise ValidationError("--org", "an org file is required for this trace",
                              "--org ORG.yaml (examples/replay/)")
    return loaded, load_org(org)


def _with_progress(replay: Replay, console: Console) -> dict[str, object]:
    columns = (TextColumn("{task.description:<17}"), BarColumn(),
               TextColumn("{task.percentage:>5.1f} % of virtual time"), TimeElapsedColumn())
    with Progress(*columns, console=console) as bars:
        tasks = {name: bars.add_task(name, total=1.0) for name in replay.policies}

        def progress(name: str, done: int, total: int) -> None:
            bars.update(tasks[name], completed=done / total if total else 1.0)

        return run(replay, progress)


def print_summary(results: dict[str, object], console: Console) -> None:
    table = Table(title="apportion replay: summary (definitions in docs/replay.md)")
    table.add_column("measure")
    policies = results["policies"]
    assert isinstance(policies, dict)
    for name in policies:
        table.add_column(name, justify="right")
    for row in report_mod.summary_rows(results):
        table.add_row(*row)
    console.print(table)
    goals = results.get("goals") or []
    assert isinstance(goals, list)
    for g in goals:
        word = "n/a" if g["met"] is None else ("met" if g["met"] else "MISSED")
        console.print(f"goal: {g['goal']}: {g['value']} (target {g['target']}): {word}")


def _fail(where: str, message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    typer.echo(f"apportion replay: {where}: {message}", err=True)
    raise typer.Exit(code)
