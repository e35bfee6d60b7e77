"""``apportion workloads eta``: when a waiting workload is estimated to start
(``squeue --start``, with the reason): the pool, the workloads whose end frees
its space, and the assumption the estimate rests on."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from apportion.cli import common
from apportion.cli.common import OutputOpt, command, resolve_workload
from apportion.cli.output import Format, print_data, stdout


def eta_cell(est: dict[str, Any] | None) -> str | None:
    """The ETA column: the estimated start, ``unknown``, or nothing (not waiting)."""
    if est is None:
        return None
    return str(est["start"]) if est.get("start") else "unknown"


def eta_line(est: dict[str, Any]) -> str:
    """One line: ``eta: 2026-12-03T10:00:00Z in pool main, after #12 (a) ends at ...
    (team_median: running work ends at its team's median runtime ...)``."""
    if est.get("basis") in ("started", "ended"):
        return f"eta: {est['assumption']}, started {est.get('start') or '-'}"
    if not est.get("start"):
        return f"eta: {est.get('assumption') or 'unknown'}"
    waits = est.get("waits_for") or []
    after = ", after " + ", ".join(
        f"#{w['workload_id']}{' (' + w['name'] + ')' if w.get('name') else ''} ends at "
        f"{w['ends_at']} [{w['basis']}]" for w in waits) if waits else ""
    basis = f" ({est['basis']}: {est['assumption']})" if est.get("basis") else \
        f" ({est['assumption']})" if est.get("assumption") else ""
    return f"eta: {est['start']} in pool {est.get('pool') or '-'}{after}{basis}"


@command
def eta(
    ref: Annotated[str, typer.Argument(metavar="NAME|ID")],
    output: OutputOpt = None,
) -> None:
    """When a waiting workload is estimated to start, what it waits for, and the
    assumption (time limit, team or pool median runtime, default)."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        w = resolve_workload(client, ref)
        est = client.workload_eta(int(w["id"]))
    if fmt in (Format.JSON, Format.YAML):
        print_data(est, fmt)
        return
    stdout().print(eta_line(est), markup=False, highlight=False)
