"""Job control in the CLI (issue 16): ``workloads hold|release``, and how a
workload's time limit, hold, dependencies and array show in ``get -o wide``,
``list -o wide``, ``show`` and ``describe``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command, resolve_workload
from apportion.cli.output import Column, Format, emit, stdout
from apportion.domain.jobcontrol import format_seconds


def _spec(w: dict[str, Any]) -> dict[str, Any]:
    spec = w.get("spec")
    return spec if isinstance(spec, dict) else {}


def fmt_time_limit(w: dict[str, Any]) -> str | None:
    limit = _spec(w).get("time_limit")
    return None if limit is None else format_seconds(int(limit))


def fmt_after(w: dict[str, Any]) -> str | None:
    deps = _spec(w).get("after") or []
    return ",".join(f"{d['id']}:{d.get('condition', 'ok')}" for d in deps) or None


def fmt_array(w: dict[str, Any]) -> str | None:
    if w.get("array_id") is None:
        return None
    return f"{w['array_id']}_{w.get('array_index')}"


#: wide columns of ``workloads list`` and ``get``
JOB_COLUMNS = (
    Column("TIME-LIMIT", fmt_time_limit, is_wide_only=True),
    Column("HELD", lambda w: "yes" if w.get("held") else None, is_wide_only=True),
    Column("AFTER", fmt_after, is_wide_only=True),
    Column("ARRAY", fmt_array, is_wide_only=True),
)


def job_lines(w: dict[str, Any]) -> list[str]:
    """The job-control facts of ``show`` and ``describe``, where set."""
    spec = _spec(w)
    lines = []
    if spec.get("time_limit") is not None:
        then = ", requeued when reached" if spec.get("requeue_on_timeout") else ""
        lines.append(f"time limit: {fmt_time_limit(w)} ({spec['time_limit']} s){then}")
    if w.get("held"):
        lines.append("held:       yes (apportion workloads release ID to let it run)")
    if spec.get("after"):
        lines.append(f"after:      {fmt_after(w)}")
    if w.get("array_id") is not None:
        limit = f", at most {w['array_limit']} running" if w.get("array_limit") else ""
        lines.append(f"array:      {w['array_id']} index {w.get('array_index')}{limit}")
    return lines


def _set_held(refs: list[str], hold: bool, output: str | None, no_headers: bool) -> None:
    from apportion.cli.workloads_cmd import COLUMNS

    fmt = common.output_format(output)
    done = []
    with common.open_client() as client:
        for ref in refs:
            w = resolve_workload(client, ref)
            wid = int(w["id"])
            done.append(client.hold_workload(wid) if hold else client.release_workload(wid))
            if fmt is Format.TABLE:
                stdout().print(f"workload {wid} {w['name']!r} {'held' if hold else 'released'}")
    if fmt is not Format.TABLE:
        emit(done if len(done) > 1 else done[0], fmt, COLUMNS, has_headers=not no_headers)


@command
def hold(
    refs: Annotated[list[str], typer.Argument(metavar="NAME|ID...")],
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Hold waiting workloads: they wait (reason HELD) until released (yours; team
    leads: anyone's in their teams)."""
    _set_held(refs, True, output, no_headers)


@command
def release(
    refs: Annotated[list[str], typer.Argument(metavar="NAME|ID...")],
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Release held workloads: the next cycle schedules them."""
    _set_held(refs, False, output, no_headers)
