"""A readable account of a simulation with Rich: the timeline, then the final
state (workloads, preemptions, teams, pools)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from apportion.domain.host import cpu_number
from apportion.domain.lifecycle import Status, WorkloadState
from apportion.domain.quantities import count_of, format_gpus
from apportion.sim.output import pools_json, usage_by_team
from apportion.sim.runner import SimResult

MAX_ROWS = 300
_STYLE = {
    Status.PENDING: "yellow", Status.QUEUED: "yellow", Status.STARTING: "cyan",
    Status.RUNNING: "green", Status.COMPLETED: "blue", Status.FAILED: "red",
    Status.PREEMPTED: "magenta", Status.CANCELLED: "dim",
}


def render(result: SimResult, console: Console) -> None:
    """Print the timeline and the final state of ``result``."""
    description = result.scenario.description
    if description:
        console.print(Text(description, style="italic"))
    console.print(_timeline(result))
    console.print(_workloads(result))
    if result.preemptions:
        console.print(_preemptions(result))
    console.print(_teams(result))
    console.print(_pools(result))
    summary = (f"time {result.time} s: {count_of(len(result.states), 'workload')}, "
               f"{count_of(len(result.preemptions), 'preemption')}, "
               f"{count_of(result.cycles, 'cycle')}")
    if result.horizon_reached:
        summary += " (stopped at the 10-day horizon; more was still to happen)"
    console.print(summary)


def _timeline(result: SimResult) -> Table:
    """One row per instant and workload: the chain of statuses it went
    through then; node events and ignored events in between."""
    rows: list[tuple[int, int, str, Text]] = []
    for n in result.notes:
        rows.append((n.at, 0, f"[{n.kind}]", Text(n.message, style="bold" if not
                                                  n.is_ignored else "dim")))
    for w in result.states.values():
        chain: dict[int, Text] = {}
        for e in w.events:
            text = chain.setdefault(e.at, Text())
            if text:
                text.append(" → ")
            text.append(e.status.value, style=_STYLE[e.status])
            if e.status in (Status.PREEMPTED, Status.FAILED, Status.CANCELLED):
                text.append(f": {e.message}", style="dim")
        rows.extend((at, w.id, w.name, text) for at, text in chain.items())
    rows.sort(key=lambda r: (r[0], r[1]))
    table = Table(title="Timeline", title_justify="left")
    table.add_column("time (s)", justify="right")
    table.add_column("workload")
    table.add_column("what happened")
    for at, _order, who, what in rows[:MAX_ROWS]:
        table.add_row(str(at), who, what)
    if len(rows) > MAX_ROWS:
        table.caption = f"{len(rows) - MAX_ROWS} more rows not shown; use -o json for all"
    return table


def _workloads(result: SimResult) -> Table:
    """One row per workload; columns ``GPU type`` and ``CPU/pod``, ``memory/pod``
    appear when some workload names types or asks for host resources."""
    table = Table(title=f"Workloads at time {result.time}", title_justify="left")
    states = sorted(result.states.values(), key=lambda s: s.id)
    has_types = any(w.spec.gpu_types for w in states)
    has_host = any(w.spec.cpu_milli or w.spec.memory_mib for w in states)
    names = ["workload", "team", "class", "GPUs"]
    names += ["GPU type"] if has_types else []
    names += ["CPU/pod", "memory/pod"] if has_host else []
    names += ["status", "pool", "nodes", "started", "ended"]
    for name in names:
        is_number = name in ("GPUs", "CPU/pod", "memory/pod", "started", "ended")
        table.add_column(name, justify="right" if is_number else "left", no_wrap=True)
    table.add_column("why")
    for w in states[:MAX_ROWS]:
        cells: list[str | Text] = [w.name, w.team, f"{w.spec.wclass.value} {w.spec.priority}",
                                   format_gpus(w.spec.size(_memory(result, w)))]
        if has_types:
            cells.append(" or ".join(w.spec.gpu_types) or "any")
        if has_host:
            cells += [_cores(w.spec.cpu_milli), _mib(w.spec.memory_mib)]
        nodes = sorted({p.node for p in w.placement}) if w.status.is_placed else []
        cells += [Text(w.status.value + (f" (attempt {w.attempt})" if w.attempt > 1 else ""),
                       style=_STYLE[w.status]),
                  w.pool or "-", ", ".join(nodes) or "-", _time(w.started_at),
                  _time(w.ended_at), _why(result, w)]
        table.add_row(*cells)
    if len(states) > MAX_ROWS:
        table.caption = f"{len(states) - MAX_ROWS} more workloads not shown; use -o json"
    return table


def _why(result: SimResult, w: WorkloadState) -> str:
    if w.reason is not None:
        return f"{w.reason.code.value}: {w.reason.message}"
    if w.preempted_by is not None:
        return f"preempted by {result.name(w.preempted_by)}"
    if w.attempts and w.attempts[-1].preempted_by is not None:
        return f"requeued; preempted by {result.name(w.attempts[-1].preempted_by)}"
    return ""


def _memory(result: SimResult, w: WorkloadState) -> int:
    pools = result.scenario.pools
    pool = pools.get(w.pool or "") or next(iter(pools.values()))
    return pool.gpu_memory_mib


def _cores(milli: int) -> str:
    return "-" if not milli else str(cpu_number(milli))


def _mib(mib: int) -> str:
    """64Gi, 1536Mi (as Kubernetes writes memory); ``-`` for none asked."""
    if not mib:
        return "-"
    for unit, size in (("Ti", 1024 * 1024), ("Gi", 1024)):
        if mib % size == 0:
            return f"{mib // size}{unit}"
    return f"{mib}Mi"


def _time(at: int | None) -> str:
    return "-" if at is None else str(at)


def _preemptions(result: SimResult) -> Table:
    table = Table(title="Preemptions", title_justify="left")
    for name in ("time (s)", "victim", "by", "GPUs", "exits at"):
        table.add_column(name)
    for p in result.preemptions[:MAX_ROWS]:
        table.add_row(str(p.at), result.name(p.victim), result.name(p.by),
                      format_gpus(p.milli), str(p.exits_at))
    return table


def _teams(result: SimResult) -> Table:
    """Teams indented by depth, per pool: reservation, use and fair share."""
    tree = result.scenario.tree
    usage = usage_by_team(result)
    table = Table(title="Teams (GPUs)", title_justify="left")
    for name in ("team", "pool", "reservation", "reserved in use", "elastic in use",
                 "entitlement"):
        table.add_column(name, justify="left" if name in ("team", "pool") else "right")
    for team in result.scenario.team_order:
        for pool in result.scenario.pools:
            reserved, elastic = usage.get((team, pool), [0, 0])
            share = result.entitlements.get(pool, {}).get(team, 0)
            if not (tree.reservation(team, pool) or reserved or elastic or share):
                continue
            table.add_row("  " * tree.depth(team) + team, pool,
                          format_gpus(tree.reservation(team, pool)), format_gpus(reserved),
                          format_gpus(elastic), format_gpus(share))
    return table


def _pools(result: SimResult) -> Table:
    table = Table(title="Pools (GPUs)", title_justify="left")
    for name in ("pool", "capacity", "used", "nodes down", "nodes cordoned"):
        table.add_column(name)
    for pool, figures in pools_json(result).items():
        nodes = [n for n in result.nodes if n.pool == pool]
        down = [n.name for n in nodes if n.state.value == "down"]
        cordoned = [n.name for n in nodes if n.state.value == "cordoned"]
        table.add_row(pool, str(figures["capacity"]), str(figures["used"]),
                      ", ".join(down) or "-", ", ".join(cordoned) or "-")
    return table
