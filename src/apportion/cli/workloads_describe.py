"""``apportion workloads describe``: everything about one workload on one screen,
kubectl's describe habit — the spec and where it runs (``show``), every attempt,
why it waits, the preemptions it suffered and the ones it caused, its last
events and the last lines its program printed."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from apportion.cli import common
from apportion.cli.common import OutputOpt, command, resolve_workload
from apportion.cli.output import Format, print_data, stdout
from apportion.cli.workloads_eta import eta_line
from apportion.cli.workloads_why import preemption_lines
from apportion.client import ApiError, ApportionClient

#: events and log lines shown (the newest); ``events`` and ``logs`` print all
TAIL = 10


def attempt_lines(w: dict[str, Any]) -> list[str]:
    attempts = w.get("attempts") or []
    if not attempts:
        return []
    out = ["attempts:"]
    for a in attempts:
        by = f", preempted by workload {a['preempted_by']}" if a.get("preempted_by") else ""
        out.append(f"  {a.get('attempt')}: {a.get('status')} in pool {a.get('pool') or '-'}, "
                   f"started {a.get('started_at') or '-'}, ended {a.get('ended_at') or '-'}{by}")
    return out


def victim_lines(victims: list[dict[str, Any]]) -> list[str]:
    if not victims:
        return []
    out = ["it preempted:"]
    for v in victims:
        name = f"{v['name']}, " if v.get("name") else ""
        out.append(f"  workload {v['workload_id']} ({name}{v['team']}), attempt {v['attempt']}")
    return out


def event_lines(events: list[dict[str, Any]], total: int) -> list[str]:
    if not events:
        return []
    shown = f"last {len(events)} of {total}" if total > len(events) else "all"
    out = [f"events ({shown}; `workloads events` prints all):"]
    for e in events:
        what = e.get("status") or e.get("type")
        msg = f": {e['message']}" if e.get("message") else ""
        out.append(f"  {e.get('at')}  attempt {e.get('attempt')}  {what}{msg}")
    return out


def log_lines(client: ApportionClient, wid: int) -> list[str]:
    try:
        text = client.workload_logs(wid).decode("utf-8", errors="replace")
    except ApiError as err:
        return [f"logs: {err}"]
    lines = text.splitlines()
    if not lines:
        return ["logs: no output shipped yet (not started, or its executor keeps its own "
                "logs: `workloads logs` says which)"]
    shown = f"last {TAIL} of {len(lines)}" if len(lines) > TAIL else "all"
    return [f"logs ({shown} lines; `workloads logs` prints all):",
            *(f"  {line}" for line in lines[-TAIL:])]


def _last_events(client: ApportionClient, wid: int) -> tuple[list[dict[str, Any]], int]:
    first = client.workload_events(wid, limit=100)
    total = int(first.total_count or len(first.items))
    items = list(first.items)
    token = first.next_token
    while token:  # the newest are on the last page
        page = client.workload_events(wid, limit=100, next_token=token)
        items = (items + list(page.items))[-TAIL:]
        token = page.next_token
    return items[-TAIL:], total


@command
def describe(
    ref: Annotated[str, typer.Argument(metavar="NAME|ID")],
    output: OutputOpt = None,
) -> None:
    """Everything about one workload: spec, placement, attempts, why it waits, the
    preemptions it suffered and caused, its last events and log lines."""
    from apportion.cli.workloads_cmd import show_lines

    fmt = common.output_format(output)
    with common.open_client() as client:
        w = resolve_workload(client, ref)
        wid = int(w["id"])
        why = client.why_workload(wid)
        victims = client.workload_victims(wid)
        events, total = _last_events(client, wid)
        eta = client.workload_eta(wid) if w.get("status") in ("Pending", "Queued") else None
        logs = log_lines(client, wid) if fmt not in (Format.JSON, Format.YAML) else []
    if fmt in (Format.JSON, Format.YAML):
        print_data({"workload": w, "why": why, "eta": eta, "victims": victims,
                    "events": events}, fmt)
        return
    lines = [*show_lines(w), f"explanation: {why.get('explanation') or '-'}",
             *([eta_line(eta)] if eta is not None else []),
             *attempt_lines(w), *preemption_lines(w), *victim_lines(victims),
             *event_lines(events, total), *logs]
    out = stdout()
    for line in lines:
        out.print(line, markup=False, highlight=False)
