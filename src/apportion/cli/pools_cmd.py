"""``apportion pools list | show P`` and ``apportion nodes list | cordon | uncordon``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command
from apportion.cli.output import (
    Column,
    Format,
    emit,
    fmt_gpus,
    gpus_phrase,
    print_data,
    print_table,
    stdout,
    team_style,
)
from apportion.client import ApportionClient, paginate
from apportion.domain.host import format_memory_mib
from apportion.domain.jobcontrol import format_seconds
from apportion.domain.quantities import count_of

pools_app = typer.Typer(help="GPU pools (clusters): capacity and a device map.",
                        no_args_is_help=True)
nodes_app = typer.Typer(help="Nodes: list, cordon, uncordon.", no_args_is_help=True)

PLACED = ["Starting", "Running"]
EXTERNAL = "(ext)"
FREE = "·"

POOL_COLUMNS = (
    Column("NAME", lambda p: p.get("name")),
    Column("GPU-TYPE", lambda p: p.get("gpu_type") or p.get("node_gpu_types")),
    Column("CAPACITY", lambda p: fmt_gpus(p.get("capacity"))),
    Column("NODES", lambda p: p.get("node_count")),
    Column("AGENT", lambda p: (p.get("agent") or {}).get("status")),
    Column("PACKING", lambda p: p.get("packing")),
    Column("GPU-MEMORY-MIB", lambda p: p.get("gpu_memory_mib"), is_wide_only=True),
    Column("TOPOLOGY", lambda p: p.get("topology"), is_wide_only=True),
    Column("START-DELAY", lambda p: p.get("start_delay"), is_wide_only=True),
    Column("GRACE", lambda p: p.get("preemption_grace"), is_wide_only=True),
    Column("LAST-HEARTBEAT", lambda p: (p.get("agent") or {}).get("last_heartbeat_at"),
           is_wide_only=True),
)

NODE_COLUMNS = (
    Column("NAME", lambda n: n.get("name")),
    Column("POOL", lambda n: n.get("pool")),
    Column("GPUS", lambda n: n.get("gpus")),
    Column("GPU-TYPE", lambda n: n.get("gpu_type")),
    Column("STATE", lambda n: n.get("state")),
    Column("HEALTH", lambda n: n.get("health")),
    Column("CORDONED", lambda n: n.get("cordoned")),
    Column("UNAVAILABLE", lambda n: fmt_gpus(n.get("unavailable_gpus")), is_wide_only=True),
    Column("CPU", lambda n: n.get("cpu"), is_wide_only=True),
    Column("MEMORY-MIB", lambda n: n.get("memory_mib"), is_wide_only=True),
    Column("CPU-USED", lambda n: n.get("cpu_in_use") or 0, is_wide_only=True),
    Column("MEMORY-MIB-USED", lambda n: n.get("memory_mib_in_use") or 0, is_wide_only=True),
    Column("LABELS", lambda n: n.get("labels"), is_wide_only=True),
    Column("LAST-SEEN", lambda n: n.get("last_seen_at"), is_wide_only=True),
)


def register(root: typer.Typer) -> None:
    root.add_typer(pools_app, name="pools")
    root.add_typer(nodes_app, name="nodes")


@pools_app.command("list")
@command
def list_pools(output: OutputOpt = None, no_headers: NoHeadersOpt = False) -> None:
    """Pools with capacity, node count and agent status."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        rows = list(paginate(client.list_pools))
        if fmt in (Format.TABLE, Format.WIDE) and any(not p.get("gpu_type") for p in rows):
            types: dict[str, set[str]] = {}
            for n in paginate(client.list_nodes):
                if n.get("gpu_type"):
                    types.setdefault(n["pool"], set()).add(n["gpu_type"])
            # a pool that names no GPU type shows what its nodes report
            rows = [{**p, "node_gpu_types": sorted(types.get(p["name"], ()))} for p in rows]
    emit(rows, fmt, POOL_COLUMNS, has_headers=not no_headers)


def device_map(nodes: list[dict[str, Any]], workloads: list[dict[str, Any]]
               ) -> dict[str, list[list[tuple[str, int]]]]:
    """node -> device index -> [(team, milli), ...]; shares the agent does not manage
    show as ``(ext)``."""
    grid = {n["name"]: [[] for _ in range(int(n.get("gpus") or 0))] for n in nodes}
    for node in nodes:
        for share in node.get("unavailable") or []:
            _add(grid, node["name"], int(share["index"]), EXTERNAL, int(share["milli"]))
    for w in sorted(workloads, key=lambda w: int(w["id"])):
        for pod in w.get("placement") or []:
            for dev in pod.get("devices") or []:
                _add(grid, pod["node"], int(dev["index"]), str(w["team"]), int(dev["milli"]))
    return grid


def _add(grid: dict[str, list[list[tuple[str, int]]]], node: str, index: int, owner: str,
         milli: int) -> None:
    devices = grid.get(node)
    if devices is None or not 0 <= index < len(devices):
        return
    for n, (team, used) in enumerate(devices[index]):
        if team == owner:
            devices[index][n] = (team, used + milli)
            return
    devices[index].append((owner, milli))


def device_cell(shares: list[tuple[str, int]]) -> str:
    """``nlp`` (a whole device), ``nlp.5`` (half), ``nlp.5+cv.25``, ``·`` (free)."""
    if not shares:
        return FREE
    parts = []
    for team, milli in shares:
        parts.append(team if milli >= 1000 else team + fmt_gpus(milli / 1000).lstrip("0"))
    return "+".join(parts)


def _cell_style(text: str) -> str | None:
    if text == FREE:
        return "dim"
    first = text.split("+")[0].rstrip(".0123456789")
    return "dim italic" if first == EXTERNAL else team_style(first)


def map_columns(width: int, has_host: bool = False) -> list[Column]:
    """NODE, STATE, (CPU, CPU-USED, MEMORY-MIB, MEMORY-MIB-USED when some node
    reports them or some placed pod asks for them), GPU0..."""
    columns = [Column("NODE", lambda r: r["name"]), Column("STATE", lambda r: r["state"])]
    if has_host:
        columns += [Column("CPU", lambda r: r.get("cpu")),
                    Column("CPU-USED", lambda r: r.get("cpu_in_use") or 0),
                    Column("MEMORY-MIB", lambda r: r.get("memory_mib")),
                    Column("MEMORY-MIB-USED", lambda r: r.get("memory_mib_in_use") or 0)]
    for i in range(width):
        columns.append(Column(f"GPU{i}", lambda r, i=i: r["cells"][i] if i < len(r["cells"])
                              else "", style=_cell_style))
    return columns


def _team_totals(workloads: list[dict[str, Any]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for w in workloads:
        milli = sum(int(d["milli"]) for p in w.get("placement") or [] for d in p["devices"])
        totals[str(w["team"])] = totals.get(str(w["team"]), 0) + milli
    return dict(sorted(totals.items()))


def _load_pool(client: ApportionClient, name: str) -> tuple[dict, list[dict], list[dict]]:
    pool = client.get_pool(name)
    nodes = list(paginate(client.list_nodes, pool=name))
    workloads = list(paginate(client.list_workloads, pool=name, status=PLACED))
    return pool, nodes, workloads


def typical_phrase(typical: list[dict[str, Any]]) -> str:
    """A pool's configured prior: ``8 GPUs x 1, 0.5 GPU x 4 (2 CPUs, 64Gi)``; none set: ``none``."""
    parts = []
    for t in typical:
        host = [f"{fmt_gpus(t['cpu'])} CPU{'s' if t['cpu'] != 1 else ''}"] if t.get("cpu") else []
        host += [format_memory_mib(t["memory_mib"])] if t.get("memory_mib") else []
        parts.append(f"{gpus_phrase(t['gpus'])} x {t['count']}"
                     + (f" ({', '.join(host)})" if host else ""))
    return ", ".join(parts) or "none"


@pools_app.command("show")
@command
def show(
    name: Annotated[str, typer.Argument(metavar="POOL")],
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """A map of the pool: nodes x GPU devices, each share labelled (and coloured) by team."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        pool, nodes, workloads = _load_pool(client, name)
    if fmt in (Format.JSON, Format.YAML):
        print_data({"pool": pool, "nodes": nodes, "workloads": workloads}, fmt)
        return
    grid = device_map(nodes, workloads)
    rows = [{"name": n["name"], "state": n.get("state"), "cpu": n.get("cpu"),
             "memory_mib": n.get("memory_mib"), "cpu_in_use": n.get("cpu_in_use") or 0,
             "memory_mib_in_use": n.get("memory_mib_in_use") or 0,
             "cells": [device_cell(d) for d in grid[n["name"]]]}
            for n in sorted(nodes, key=lambda n: n["name"])]
    has_host = any(r["cpu"] is not None or r["memory_mib"] is not None or r["cpu_in_use"]
                   or r["memory_mib_in_use"] for r in rows)
    width = max((len(r["cells"]) for r in rows), default=0)
    out = stdout()
    used = sum(_team_totals(workloads).values())
    on_nodes = count_of(pool.get("node_count", len(nodes)), "node")
    out.print(f"pool {pool['name']}: {gpus_phrase(pool.get('capacity'))} on "
              f"{on_nodes}, {fmt_gpus(used / 1000)} in use "
              f"by workloads; packing {pool.get('packing', '-')}; agent "
              f"{(pool.get('agent') or {}).get('status', '-')}")
    typical = pool.get("typical_pods")
    if typical is not None and pool.get("packing") == "fragmentation":
        out.print(f"typical pods: {typical_phrase(typical)}", markup=False)
    limits = [f"{k.replace('_', ' ')} {format_seconds(int(pool[k]))}"
              for k in ("default_time_limit", "max_time_limit") if pool.get(k) is not None]
    if limits:  # job control (issue 16)
        out.print("time limits: " + ", ".join(limits), markup=False)
    if rows:
        print_table(map_columns(width, has_host), rows, has_headers=not no_headers, console=out)
    totals = _team_totals(workloads)
    if totals:
        legend = ", ".join(f"[{team_style(t)}]{t}[/] {fmt_gpus(m / 1000)}"
                           for t, m in totals.items())
        out.print(f"teams: {legend}", markup=True)


@nodes_app.command("list")
@command
def list_nodes(
    pool: Annotated[str | None, typer.Option("--pool")] = None,
    state: Annotated[str | None, typer.Option("--state", help="ready, cordoned, down or unknown.")
                     ] = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Nodes with their state (ready / cordoned / down / unknown)."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        rows = list(paginate(client.list_nodes, pool=pool, state=state))
    emit(rows, fmt, NODE_COLUMNS, has_headers=not no_headers)


def _cordon(names: list[str], is_cordon: bool, output: Format | None, no_headers: bool) -> None:
    fmt = common.output_format(output)
    done = []
    with common.open_client() as client:
        for name in names:
            node = client.cordon_node(name) if is_cordon else client.uncordon_node(name)
            done.append(node)
            if fmt is Format.TABLE:
                stdout().print(f"node {name} {'cordoned' if is_cordon else 'uncordoned'}")
    if fmt is not Format.TABLE:
        emit(done if len(done) > 1 else done[0], fmt, NODE_COLUMNS, has_headers=not no_headers)


@nodes_app.command("cordon")
@command
def cordon(names: Annotated[list[str], typer.Argument(metavar="NODE...")],
           output: OutputOpt = None, no_headers: NoHeadersOpt = False) -> None:
    """Take no new pods on these nodes (running work stays)."""
    _cordon(names, True, output, no_headers)


@nodes_app.command("uncordon")
@command
def uncordon(names: Annotated[list[str], typer.Argument(metavar="NODE...")],
             output: OutputOpt = None, no_headers: NoHeadersOpt = False) -> None:
    """Let these nodes take new pods again."""
    _cordon(names, False, output, no_headers)
