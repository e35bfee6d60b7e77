"""``apportion workloads list | get | cancel | events | why | logs`` (alias ``wl``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command, resolve_workload
from apportion.cli.output import (
    Column,
    Format,
    cell,
    emit,
    fmt_gpu_types,
    fmt_gpus,
    fmt_memory_mib,
    print_data,
    print_table,
    status_style,
    stdout,
)
from apportion.cli.watch import workload_events
from apportion.cli.workloads_describe import describe
from apportion.cli.workloads_eta import eta, eta_cell
from apportion.cli.workloads_jobs import JOB_COLUMNS, hold, job_lines, release
from apportion.cli.workloads_why import logs, why
from apportion.client import TERMINAL_STATUSES, ApportionClient, paginate

UNFINISHED = ["Pending", "Queued", "Starting", "Running"]

app = typer.Typer(help="List, inspect and cancel workloads.", no_args_is_help=True)

WatchOpt = Annotated[bool, typer.Option("-w", "--watch", help="Then print a row per change, "
                                        "from the event stream.")]
TimeoutOpt = Annotated[float | None, typer.Option("--timeout", help="Stop watching/following "
                                                  "after SECONDS.", show_default=False)]


app.command("why")(why)
app.command("logs")(logs)
app.command("describe")(describe)
app.command("eta")(eta)
app.command("hold")(hold)
app.command("release")(release)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="workloads")
    root.add_typer(app, name="wl", hidden=True)


def _nodes(w: dict[str, Any]) -> list[str]:
    return sorted({p["node"] for p in w.get("placement") or []})


def _spec(w: dict[str, Any]) -> dict[str, Any]:
    spec = w.get("spec")
    return spec if isinstance(spec, dict) else {}


def fmt_pods(w: dict[str, Any]) -> str:
    """``running/requested``: ``6/8`` after a shrink took two of eight pods."""
    requested = w.get("pods", (w.get("spec") or {}).get("pods", 1))
    running = w.get("pods_running")
    if running is None:  # a server from before shrinks
        running = len(w.get("placement") or []) if w.get("status") in (
            "Starting", "Running") else 0
    return f"{running}/{requested}"


COLUMNS = (
    Column("ID", lambda w: w.get("id")),
    Column("NAME", lambda w: w.get("name")),
    Column("TEAM", lambda w: w.get("team")),
    Column("CLASS", lambda w: w.get("class")),
    Column("PRIORITY", lambda w: w.get("priority")),
    Column("GPUS", lambda w: fmt_gpus(w.get("gpus"))),
    Column("STATUS", lambda w: w.get("status"), style=status_style),
    Column("POOL", lambda w: w.get("pool")),
    Column("PODS", fmt_pods),
    Column("ATTEMPT", lambda w: w.get("attempt"), is_wide_only=True),
    Column("NODES", _nodes, is_wide_only=True),
    Column("GPU-TYPE", lambda w: fmt_gpu_types(_spec(w).get("gpu_type")), is_wide_only=True),
    Column("CPU", lambda w: _spec(w).get("cpu") or None, is_wide_only=True),
    Column("MEMORY", lambda w: fmt_memory_mib(_spec(w).get("memory_mib")), is_wide_only=True),
    Column("SUBMITTED-BY", lambda w: w.get("submitted_by"), is_wide_only=True),
    Column("SUBMITTED", lambda w: w.get("submitted_at"), is_wide_only=True),
    *JOB_COLUMNS,
    Column("ETA", lambda w: eta_cell(w.get("eta")), is_wide_only=True),
    Column("REASON", lambda w: (w.get("reason") or {}).get("code")),
)

EVENT_COLUMNS = (
    Column("ID", lambda e: e.get("id")),
    Column("AT", lambda e: e.get("at")),
    Column("TYPE", lambda e: e.get("type")),
    Column("ATTEMPT", lambda e: e.get("attempt")),
    Column("STATUS", lambda e: e.get("status"), style=status_style),
    Column("CAUSE", lambda e: e.get("cause"), is_wide_only=True),
    Column("MESSAGE", lambda e: e.get("message")),
)


def _my_teams(client: ApportionClient) -> list[str] | None:
    """The token's teams; ``None`` (everything visible) for roles without teams."""
    teams = client.token_self().get("teams") or []
    return list(teams) or None


@app.command("list")
@command
def list_workloads(
    all_: Annotated[bool, typer.Option("-A", "--all", help="Every workload you may see, "
                                       "finished ones too.")] = False,
    status: Annotated[list[str] | None, typer.Option("--status", "-s", help="Repeatable or "
                                                     "comma-separated.")] = None,
    team: Annotated[str | None, typer.Option("--team", "-t", help="A team and its "
                                             "subtree.")] = None,
    wclass: Annotated[str | None, typer.Option("--class")] = None,
    pool: Annotated[str | None, typer.Option("--pool")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many "
                                              "(newest last).")] = None,
    array: Annotated[int | None, typer.Option("--array", min=1, help="The members of this "
                                              "array (finished ones too).")] = None,
    watch: WatchOpt = False,
    timeout: TimeoutOpt = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Workloads of my teams that have not finished (-A: all, finished too)."""
    fmt = common.output_format(output)
    statuses = [s for v in status or [] for s in v.split(",") if s] or (
        None if all_ or array is not None else UNFINISHED)
    with common.open_client() as client:
        teams: list[str | None] = [team]
        if team is None and not all_ and array is None:
            teams = list(_my_teams(client) or [None])
        filters = {"status": statuses, "class_": wclass, "pool": pool, "array": array}
        # The cursor comes first, so no change between listing and following is lost.
        after = client.latest_event_id() if watch else None
        found: dict[int, dict[str, Any]] = {}
        for t in teams:
            for w in paginate(client.list_workloads, team=t, **filters):
                found[int(w["id"])] = w
        rows = [found[i] for i in sorted(found)]
        if limit is not None:
            rows = rows[-limit:]
        if fmt is Format.WIDE and any(w.get("status") in ("Pending", "Queued") for w in rows):
            _add_etas(client, rows, pool)
        widths = _min_widths(fmt) if watch else None  # room for the rows to come
        emit(rows, fmt, COLUMNS, has_headers=not no_headers, widths=widths)
        if watch:
            _watch(client, fmt, lambda w: _matches(w, teams, statuses, wclass, pool, client),
                   timeout, None, after=after, rows=list(found.values()), widths=widths)


def _add_etas(client: ApportionClient, rows: list[dict[str, Any]], pool: str | None) -> None:
    """Put each waiting row's estimate under ``eta`` (one request: the server
    estimates all waiting work of a pool in one run)."""
    found = {int(e["workload_id"]): e for e in client.etas(pool=pool)["estimates"]}
    for w in rows:
        if w.get("status") in ("Pending", "Queued"):
            w["eta"] = found.get(int(w["id"]), {"start": None})


def _matches(w: dict[str, Any], teams: list[str | None], statuses: list[str] | None,
             wclass: str | None, pool: str | None, client: ApportionClient) -> bool:
    if statuses and w.get("status") not in statuses and w.get("status") not in \
            TERMINAL_STATUSES:
        return False
    if wclass and w.get("class") != wclass:
        return False
    if pool and w.get("pool") not in (pool, None):
        return False
    if teams == [None]:
        return True
    return w.get("team") in _subtrees(client, [t for t in teams if t])


_SUBTREE_CACHE: dict[tuple[str, ...], set[str]] = {}


def _subtrees(client: ApportionClient, roots: list[str]) -> set[str]:
    key = tuple(sorted(roots))
    if key not in _SUBTREE_CACHE:
        parents = {t["slug"]: t.get("parent") for t in paginate(client.list_teams)}
        found = set(roots)
        changed = True
        while changed:
            new = {s for s, p in parents.items() if p in found} - found
            found |= new
            changed = bool(new)
        _SUBTREE_CACHE[key] = found
    return _SUBTREE_CACHE[key]


WAITING = frozenset({"Pending", "Queued"})
HOLDING = frozenset({"Starting", "Running"})
#: Room for the values a watch will print later (a status, a reason code), so
#: rows that come after the header stay under it.
MIN_WIDTHS = {"STATUS": len("Completed"), "REASON": len("RESERVATION_EXHAUSTED"),
              "POOL": 8, "PODS": 5, "GPUS": 5, "NAME": 12, "TEAM": 10, "CLASS": 8}


def _min_widths(fmt: Format) -> list[int]:
    shown = [c for c in COLUMNS if fmt is Format.WIDE or not c.is_wide_only]
    return [max(len(c.header), MIN_WIDTHS.get(c.header, 0)) for c in shown]


def fold_event(row: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """The workload ``row`` as the event says it is now: its status, attempt,
    reason, pool and pods from the event's own payload (``data``), so a watch
    shows every state the stream went through, Pending and Queued included,
    not whatever the workload has become by the time a lookup would answer."""
    out = dict(row)
    data = event.get("data") or {}
    out["status"] = event.get("status") or out.get("status")
    if event.get("attempt") is not None:
        out["attempt"] = event["attempt"]
    if event.get("type") == "workload.reason":
        out["reason"] = {"code": data.get("code"), "message": event.get("message")}
        return out
    if out["status"] not in WAITING:
        out["reason"] = None
    if "pool" in data or out["status"] == "Pending":
        out["pool"] = data.get("pool")
    if out["status"] in HOLDING:
        out["pods_running"] = data.get("pods_running", out.get("pods_running"))
    else:
        out["pods_running"] = 0
    return out


def _watch(client: ApportionClient, fmt: Format, wanted: Any, timeout: float | None,
           workload_id: int | None, after: int | None = None,
           rows: list[dict[str, Any]] | None = None, widths: list[int] | None = None) -> None:
    """Print a workload again (a row, or a JSON/YAML document) each time the
    event stream changes what its row shows; rows are built from the events'
    payloads (``fold_event``), a workload is looked up only on first sight."""
    widths = widths if widths is not None else _min_widths(fmt)
    known = {int(w["id"]): w for w in rows or []}
    shown = {wid: _cells(w) for wid, w in known.items()}
    for event in workload_events(client, timeout=timeout, workload_id=workload_id,
                                 after=after):
        wid = int(event["workload_id"])
        row = known.get(wid)
        if row is None:
            row = client.get_workload(wid)
        row = known[wid] = fold_event(row, event)
        if not wanted(row):
            continue
        cells = _cells(row)
        if shown.get(wid) == cells:
            continue  # another event, nothing new on the row
        shown[wid] = cells
        if fmt in (Format.JSON, Format.YAML):
            print_data(row, fmt)
        else:
            print_table(COLUMNS, [row], is_wide=fmt is Format.WIDE, has_headers=False,
                        widths=widths)
        if workload_id is not None and row.get("status") in TERMINAL_STATUSES:
            return


def _cells(w: dict[str, Any]) -> tuple[str, ...]:
    return tuple(cell(c.get(w)) for c in COLUMNS)


@app.command("get")
@command
def get_workload(
    ref: Annotated[str, typer.Argument(metavar="NAME|ID")],
    watch: WatchOpt = False,
    timeout: TimeoutOpt = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """One workload (-w: and every change until it finishes)."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        w = resolve_workload(client, ref)
        after = None
        if watch:
            events = list(paginate(client.workload_events, int(w["id"])))
            after = max((int(e["id"]) for e in events), default=0)
            w = client.get_workload(int(w["id"]))
        widths = _min_widths(fmt) if watch else None
        emit(w, fmt, COLUMNS, has_headers=not no_headers, widths=widths)
        if watch and w.get("status") not in TERMINAL_STATUSES:
            _watch(client, fmt, lambda _w: True, timeout, int(w["id"]), after=after, rows=[w],
                   widths=widths)


@app.command("cancel")
@command
def cancel(
    refs: Annotated[list[str] | None, typer.Argument(metavar="NAME|ID...")] = None,
    message: Annotated[str | None, typer.Option("--message", "-m", help="Why (kept in the "
                                                "event log).")] = None,
    array: Annotated[int | None, typer.Option("--array", min=1, help="Cancel every "
                                              "unfinished member of this array.")] = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Cancel workloads (yours; team leads: anyone's in their teams)."""
    fmt = common.output_format(output)
    done = []
    refs = refs or []
    if not refs and array is None:
        raise common.usage_error("which workloads? give NAME|ID... or --array ID")
    with common.open_client() as client:
        if array is not None:
            res = client.cancel_array(array, message=message)
            if fmt is Format.TABLE:
                stdout().print(f"array {array}: {len(res['cancelled'])} of "
                               f"{res['members']} members cancelled")
            else:
                print_data(res, fmt)
            if not refs:
                return
        for ref in refs:
            w = resolve_workload(client, ref)
            done.append(client.cancel_workload(int(w["id"]), message=message))
            if fmt is Format.TABLE:
                stdout().print(f"workload {w['id']} {w['name']!r} cancelled")
    if fmt is not Format.TABLE:
        emit(done if len(done) > 1 else done[0], fmt, COLUMNS, has_headers=not no_headers)


@app.command("events")
@command
def events(
    ref: Annotated[str, typer.Argument(metavar="NAME|ID")],
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Every lifecycle transition and reason change of a workload, oldest first."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        w = resolve_workload(client, ref)
        rows = list(paginate(client.workload_events, int(w["id"])))
    emit(rows, fmt, EVENT_COLUMNS, has_headers=not no_headers)



def _per_pod_gpus(spec: dict[str, Any]) -> str:
    if spec.get("gpus") is not None:
        return f"{fmt_gpus(spec['gpus'])} GPU{'' if spec['gpus'] == 1 else 's'}"
    if spec.get("gpu_memory_mib") is not None:
        return f"{fmt_memory_mib(spec['gpu_memory_mib'])} of GPU memory"
    return "-"


def show_lines(w: dict[str, Any]) -> list[str]:
    """``workloads show``: the workload as a person reads it, one fact a line."""
    spec = _spec(w)
    types = spec.get("gpu_type")
    if not types:
        gpu_type = "any"
    elif isinstance(types, str):
        gpu_type = types
    else:
        gpu_type = " or ".join(str(t) for t in types)
    cpu = spec.get("cpu") or 0
    memory = spec.get("memory_mib") or 0
    host = [f"{cell(cpu)} CPU" if cpu else "no CPU asked for",
            f"{fmt_memory_mib(memory)} memory" if memory else "no memory asked for"]
    pods = f"{fmt_pods(w)} (running/requested)"
    if spec.get("min_pods") not in (None, spec.get("pods")):
        pods += f", at least {spec.get('min_pods')}"
    if spec.get("gang"):
        pods += ", gang"
    topology = spec.get("topology") or {}
    reason = w.get("reason") or {}
    lines = [
        f"workload {w.get('id')} {w.get('name')!r}: {w.get('status')} (attempt "
        f"{w.get('attempt')})",
        f"team:       {w.get('team')} ({w.get('class')}, priority {w.get('priority')})",
        f"pool:       {w.get('pool') or '-'}{' (pinned)' if spec.get('pool') else ''}",
        f"per pod:    {_per_pod_gpus(spec)}, {host[0]}, {host[1]}",
        f"gpu type:   {gpu_type}",
        f"pods:       {pods}",
        f"gpus:       {fmt_gpus(w.get('gpus'))} in total",
        f"nodes:      {', '.join(_nodes(w)) or '-'}",
    ]
    if topology:
        lines.append(f"topology:   {topology.get('level')} ({topology.get('mode')})")
    if reason:
        lines.append(f"reason:     {reason.get('code')}: {reason.get('message')}")
    lines += job_lines(w)
    lines.append(f"submitted:  {w.get('submitted_at') or '-'} by {w.get('submitted_by')}")
    return lines


@app.command("show")
@command
def show(
    ref: Annotated[str, typer.Argument(metavar="NAME|ID")],
    output: OutputOpt = None,
) -> None:
    """One workload in full: what each pod asks for (GPUs, GPU types, CPU, memory),
    where it runs, why it waits."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        w = resolve_workload(client, ref)
    if fmt in (Format.JSON, Format.YAML):
        print_data(w, fmt)
        return
    out = stdout()
    for line in show_lines(w):
        out.print(line, markup=False)
