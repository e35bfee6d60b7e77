"""``apportion top``: live GPU usage vs reservation vs entitlement per team and pool."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.text import Text

from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command
from apportion.cli.output import Column, Format, fmt_gpus, print_data, stdout, table_lines

COLUMNS = (
    Column("TEAM", lambda r: r["team"]),
    Column("POOL", lambda r: r["pool"]),
    Column("IN-USE", lambda r: fmt_gpus(r["in_use"])),
    Column("RESERVED", lambda r: fmt_gpus(r.get("reserved_in_use"))),
    Column("ELASTIC", lambda r: fmt_gpus(r.get("elastic_in_use"))),
    Column("RESERVATION", lambda r: fmt_gpus(r.get("reservation"))),
    Column("ENTITLEMENT", lambda r: fmt_gpus(r.get("entitlement"))),
    Column("BURST-CAP", lambda r: "unlimited" if r.get("burst_cap") is None
           else fmt_gpus(r.get("burst_cap"))),
    Column("USE/ENT", lambda r: r["bar"]),
)
BAR_WIDTH = 20


def usage_bar(in_use: float, entitlement: float | None) -> str:
    """``██████░░░░ 60%`` of the entitlement; over it shows ``!``."""
    if not entitlement:
        return "-" if not in_use else "!" * 3 + " over (no entitlement)"
    ratio = in_use / entitlement
    filled = min(BAR_WIDTH, round(ratio * BAR_WIDTH))
    bar = "█" * filled + "░" * (BAR_WIDTH - filled)
    return f"{bar} {round(ratio * 100)}%" + (" !" if ratio > 1.0001 else "")


def top_rows(capacity: list[dict[str, Any]], show_idle: bool) -> list[dict[str, Any]]:
    rows = []
    for row in sorted(capacity, key=lambda r: (r["pool"], r["team"])):
        in_use = float(row.get("reserved_in_use") or 0) + float(row.get("elastic_in_use") or 0)
        if not show_idle and not in_use and not row.get("reservation") and \
                not row.get("entitlement"):
            continue
        rows.append({**row, "in_use": in_use,
                     "bar": usage_bar(in_use, row.get("entitlement"))})
    return rows


def _frame(pools: list[dict[str, Any]], capacity: list[dict[str, Any]], show_idle: bool,
           has_headers: bool) -> Group:
    lines: list[Text] = []
    for p in sorted(pools, key=lambda p: p["pool"]):
        lines.append(Text(f"pool {p['pool']}: capacity {fmt_gpus(p.get('capacity'))}, used "
                          f"{fmt_gpus(p.get('used'))}, free {fmt_gpus(p.get('free'))}, "
                          f"reserved {fmt_gpus(p.get('reserved'))}", style="bold"))
    lines.append(Text(""))
    lines.extend(table_lines(COLUMNS, top_rows(capacity, show_idle), has_headers=has_headers))
    return Group(*lines)


def register(root: typer.Typer) -> None:
    root.command("top")(top)


@command
def top(
    pool: Annotated[str | None, typer.Option("--pool")] = None,
    interval: Annotated[float, typer.Option("--interval", "-n", min=0.2, help="Seconds "
                                            "between refreshes.")] = 2.0,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
    show_idle: Annotated[bool, typer.Option("--all", "-a", help="Also teams with nothing "
                                            "reserved, entitled or running.")] = False,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Live usage vs reservation vs entitlement per team (Ctrl-C to quit)."""
    fmt = common.output_format(output)
    with common.open_client() as client:

        def fetch() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            pools = [p for p in client.pool_capacity() if pool in (None, p["pool"])]
            return pools, client.team_capacity(pool=pool)

        pools, capacity = fetch()
        if fmt in (Format.JSON, Format.YAML):
            print_data({"pools": pools, "teams": capacity}, fmt)
            return
        out = stdout()
        if once or not out.is_terminal:
            out.print(_frame(pools, capacity, show_idle, not no_headers))
            return
        with Live(_frame(pools, capacity, show_idle, not no_headers), console=out,
                  auto_refresh=False, screen=False) as live:
            while True:
                time.sleep(interval)
                live.update(_frame(*fetch(), show_idle, not no_headers), refresh=True)
