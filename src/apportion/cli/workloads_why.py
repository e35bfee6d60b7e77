"""``apportion workloads why`` (reason + fair-share context) and ``workloads logs [-f]``."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command, resolve_workload
from apportion.cli.output import (
    Column,
    Format,
    emit,
    fmt_gpus,
    gpus_phrase,
    print_data,
    print_table,
    stdout,
)
from apportion.cli.watch import workload_events
from apportion.client import TERMINAL_STATUSES, ApiError, ApportionClient, paginate
from apportion.domain.lifecycle import pods_phrase

SHARE_COLUMNS = (
    Column("TEAM", lambda r: r.get("team")),
    Column("POOL", lambda r: r.get("pool")),
    Column("RESERVATION", lambda r: fmt_gpus(r.get("reservation"))),
    Column("RESERVED-IN-USE", lambda r: fmt_gpus(r.get("reserved_in_use"))),
    Column("ELASTIC-IN-USE", lambda r: fmt_gpus(r.get("elastic_in_use"))),
    Column("ENTITLEMENT", lambda r: fmt_gpus(r.get("entitlement"))),
    Column("BURST-CAP", lambda r: "unlimited" if r.get("burst_cap") is None
           else fmt_gpus(r.get("burst_cap"))),
)


def preemption_lines(w: dict[str, Any]) -> list[str]:
    """The workload's preemptions, oldest first: shrinks (SPEC 6.5) and whole ones."""
    entries = w.get("preemptions") or []
    if not entries:
        return []
    out = [f"pods: {w.get('pods_running', 0)}/{w.get('pods', 1)} running; preemptions:"]
    for p in entries:
        by = f"workload {p['by']}" if p.get("by") is not None else "the scheduler"
        pods = p.get("pods") or []
        what = (f"shrunk: {pods_phrase(tuple(pods))} preempted by {by}" if pods
                else f"preempted by {by}")
        out.append(f"  {p.get('at') or '-'}  attempt {p.get('attempt')}: {what} "
                   f"({gpus_phrase(p.get('gpus'))})")
    return out


def _path(client: ApportionClient, team: str) -> list[str]:
    """``team`` and its ancestors, leaf first."""
    path, seen = [], set()
    current: str | None = team
    while current and current not in seen:
        seen.add(current)
        path.append(current)
        try:
            current = client.get_team(current).get("parent")
        except ApiError:
            break
    return path


def fair_share_rows(client: ApportionClient, w: dict[str, Any]) -> list[dict[str, Any]]:
    """Capacity rows of the workload's team and its ancestors, in its pool (or all pools)."""
    rows = []
    for team in _path(client, str(w["team"])):
        rows.extend(r for r in client.team_capacity(team=team, pool=w.get("pool"))
                    if r.get("team") == team)
    return rows


@command
def why(
    ref: Annotated[str, typer.Argument(metavar="NAME|ID")],
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Why a workload waits (or what it is doing), with its team's fair share."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        w = resolve_workload(client, ref)
        answer = client.why_workload(int(w["id"]))
        shares = answer.get("fair_share")
        if shares is None:  # a server from before /why carried it
            shares = fair_share_rows(client, w)
    if fmt in (Format.JSON, Format.YAML):
        print_data({"why": answer, "fair_share": shares}, fmt)
        return
    out = stdout()
    out.print(f"workload {w['id']} {w['name']!r} (team {w['team']}, {w['class']}, "
              f"priority {w['priority']}, {gpus_phrase(w.get('gpus'))}): {answer['status']}")
    reason = answer.get("reason")
    if reason:
        out.print(f"reason: {reason['code']}: {reason['message']}")
    out.print(f"explanation: {answer.get('explanation') or '-'}")
    for line in preemption_lines(w):
        out.print(line)
    if shares:
        out.print("fair share (GPUs; entitlement from the last scheduling cycle):")
        print_table(SHARE_COLUMNS, shares, is_wide=fmt is Format.WIDE,
                    has_headers=not no_headers, console=out)


LOG_COLUMNS = (
    Column("AT", lambda e: e.get("at")),
    Column("ATTEMPT", lambda e: e.get("attempt")),
    Column("STATUS", lambda e: e.get("status")),
    Column("MESSAGE", lambda e: _log_message(e)),
)


def _log_message(e: dict[str, Any]) -> str:
    cause = f" [{e['cause']}]" if e.get("cause") else ""
    return f"{e.get('message') or e.get('type')}{cause}"


@command
def logs(
    ref: Annotated[str, typer.Argument(metavar="NAME|ID")],
    follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing until the "
                                         "attempt ends.")] = False,
    attempt: Annotated[int | None, typer.Option("--attempt", help="Which attempt (default: "
                                                "the latest).", show_default=False)] = None,
    pod: Annotated[int | None, typer.Option("--pod", help="One pod's output (default: every "
                                            r"pod, lines prefixed \[pod i]).",
                                            show_default=False)] = None,
    events: Annotated[bool, typer.Option("--events", help="Instead: the control plane's "
                                         "transition log (every status and reason).")] = False,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Stop following after "
                                                  "SECONDS.", show_default=False)] = None,
    output: OutputOpt = None,
) -> None:
    """What the workload's program printed (stdout and stderr, as its agent shipped it);
    with --events, its transitions as the control plane recorded them."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        w = resolve_workload(client, ref)
        wid = int(w["id"])
        if events:
            _event_log(client, wid, fmt, follow, timeout)
        elif follow:
            sink = sys.stdout.buffer
            for chunk in client.follow_workload_logs(wid, attempt=attempt, pod=pod,
                                                     timeout=timeout):
                sink.write(chunk)
                sink.flush()
        else:
            data = client.workload_logs(wid, attempt=attempt, pod=pod)
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            if not data:
                common.note(no_logs_note(w))


def no_logs_note(w: dict[str, Any]) -> str:
    """Why ``logs`` printed nothing, said on stderr so the output stays the log."""
    name = f"workload {w.get('id')} {w.get('name')!r}"
    status = w.get("status")
    if status in ("Pending", "Queued"):
        return f"{name} has no output: it is {status} and has not started yet"
    return (f"{name} has no output yet: nothing was shipped for this attempt. Only the "
            "local executor ships a program's output; the sim executor runs no program, "
            "and under Kubernetes read it with `kubectl logs`")


def _event_log(client: ApportionClient, wid: int, fmt: Format, follow: bool,
               timeout: float | None) -> None:
    entries = list(paginate(client.workload_events, wid))
    _print_log(entries, fmt)
    if not follow:
        return
    after = max((int(e["id"]) for e in entries), default=0)
    if client.get_workload(wid).get("status") in TERMINAL_STATUSES:
        return
    for event in workload_events(client, after=after, timeout=timeout, workload_id=wid):
        _print_log([event], fmt)
        if event.get("type") == "workload.status" and event.get("status") in \
                TERMINAL_STATUSES:
            return


def _print_log(entries: list[dict[str, Any]], fmt: Format) -> None:
    if fmt in (Format.JSON, Format.YAML):
        for entry in entries:
            print_data(entry, fmt)
        return
    if entries:
        emit(entries, Format.TABLE, LOG_COLUMNS, has_headers=False)
