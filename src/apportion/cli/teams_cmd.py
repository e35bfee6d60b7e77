"""``apportion teams tree | list | get | create | set | move | delete``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command, usage_error
from apportion.cli.output import Column, Format, emit, fmt_gpus, print_data, stdout
from apportion.client import ApportionClient, paginate

app = typer.Typer(help="The team tree: reservations, weights, burst limits; create and "
                  "change teams.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="teams")


def _limit(value: Any) -> str:
    return "unlimited" if value is None else f"{value}%"


def _cap(value: Any) -> str:
    return "unlimited" if value is None else fmt_gpus(value)


TEAM_COLUMNS = (
    Column("SLUG", lambda t: t.get("slug")),
    Column("NAME", lambda t: t.get("name")),
    Column("PARENT", lambda t: t.get("parent")),
    Column("WEIGHT", lambda t: t.get("bursting_priority")),
    Column("BURST-LIMIT", lambda t: _limit(t.get("burst_limit_percent"))),
    Column("RESERVATIONS", lambda t: {p: fmt_gpus(g) for p, g in
                                      (t.get("reservations") or {}).items()}),
    Column("CHILDREN", lambda t: t.get("children"), is_wide_only=True),
    Column("VERSION", lambda t: t.get("version"), is_wide_only=True),
)

TREE_COLUMNS = (
    Column("TEAM", lambda r: r["_label"]),
    Column("POOL", lambda r: r["pool"]),
    Column("RESERVATION", lambda r: fmt_gpus(r["reservation"])),
    Column("WEIGHT", lambda r: r["team"].get("bursting_priority")),
    Column("BURST-LIMIT", lambda r: _limit(r["team"].get("burst_limit_percent"))),
    Column("IN-USE", lambda r: fmt_gpus(r["in_use"]) if r["cap"] is not None else "-"),
    Column("ENTITLEMENT", lambda r: fmt_gpus((r["cap"] or {}).get("entitlement"))),
    Column("RESERVED-IN-USE", lambda r: fmt_gpus((r["cap"] or {}).get("reserved_in_use")),
           is_wide_only=True),
    Column("ELASTIC-IN-USE", lambda r: fmt_gpus((r["cap"] or {}).get("elastic_in_use")),
           is_wide_only=True),
    Column("BURST-CAP", lambda r: _cap((r["cap"] or {}).get("burst_cap"))
           if r["cap"] else "-", is_wide_only=True),
)


def tree_rows(teams: list[dict[str, Any]], capacity: list[dict[str, Any]]) -> list[dict]:
    """One row per team and pool, depth first, children by slug, pools by name."""
    by_parent: dict[str | None, list[dict[str, Any]]] = {}
    for team in teams:
        by_parent.setdefault(team.get("parent"), []).append(team)
    caps = {(c["team"], c["pool"]): c for c in capacity}
    rows: list[dict[str, Any]] = []

    def walk(parent: str | None, prefix: str) -> None:
        children = sorted(by_parent.get(parent, []), key=lambda t: t["slug"])
        for n, team in enumerate(children):
            is_last = n == len(children) - 1
            branch = "" if parent is None else ("└─ " if is_last else "├─ ")
            label = f"{prefix}{branch}{team['slug']}"
            reservations = team.get("reservations") or {}
            pools = sorted({p for (t, p) in caps if t == team["slug"]} | set(reservations))
            for pool in pools or [None]:
                cap = caps.get((team["slug"], pool))
                in_use = None if cap is None else (cap.get("reserved_in_use") or 0) + (
                    cap.get("elastic_in_use") or 0)
                rows.append({"_label": label, "team": team, "pool": pool, "cap": cap,
                             "reservation": reservations.get(pool) if pool else None,
                             "in_use": in_use})
            deeper = "" if parent is None else prefix + ("   " if is_last else "│  ")
            walk(team["slug"], deeper)

    walk(None, "")
    known = {t["slug"] for t in teams}
    for team in teams:  # orphans (parent not visible) still show, at the top level
        if team.get("parent") and team["parent"] not in known:
            walk(team["parent"], "")
    return rows


@app.command("tree")
@command
def tree(
    pool: Annotated[str | None, typer.Option("--pool", help="Only this pool.")] = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """The team tree with reservations, weights, burst limits, usage and entitlements."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        teams = list(paginate(client.list_teams))
        capacity = client.team_capacity(pool=pool)
    if fmt in (Format.JSON, Format.YAML):
        print_data({"teams": teams, "capacity": capacity}, fmt)
        return
    rows = tree_rows(teams, capacity)
    if pool:
        rows = [r for r in rows if r["pool"] in (pool, None)]
    emit(rows, fmt, TREE_COLUMNS, has_headers=not no_headers)


@app.command("list")
@command
def list_teams(
    parent: Annotated[str | None, typer.Option("--parent")] = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Teams as a flat list."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        teams = list(paginate(client.list_teams, parent=parent))
    emit(teams, fmt, TEAM_COLUMNS, has_headers=not no_headers)


@app.command("get")
@command
def get_team(slug: str, output: OutputOpt = None, no_headers: NoHeadersOpt = False) -> None:
    """One team."""
    fmt = common.output_format(output)
    with common.open_client() as client:
        team = client.get_team(slug)
    emit(team, fmt, TEAM_COLUMNS, has_headers=not no_headers)


WeightOpt = Annotated[int | None, typer.Option("--weight", "--bursting-priority", min=1, max=10,
                                               help="Bursting priority 1-10.")]
LimitOpt = Annotated[str | None, typer.Option("--burst-limit", help="Percent of the "
                                              "reservation (50 = up to 150%), or 'none' "
                                              "for unlimited.")]


def _parse_limit(value: str) -> int | None:
    if value.strip().lower() in ("none", "unlimited", "null"):
        return None
    text = value.strip().rstrip("%")
    if not text.isdigit():
        raise usage_error(f"--burst-limit {value!r}: a whole percentage >= 0, or 'none'")
    return int(text)


def _done(client: ApportionClient, team: dict[str, Any], verb: str, fmt: Format,
          no_headers: bool) -> None:
    if fmt is Format.TABLE:
        stdout().print(f"team {team['slug']} {verb}")
    else:
        emit(team, fmt, TEAM_COLUMNS, has_headers=not no_headers)


@app.command("create")
@command
def create(
    slug: Annotated[str, typer.Argument(help="DNS label, unique, immutable.")],
    parent: Annotated[str | None, typer.Option("--parent")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Display name.")] = None,
    weight: WeightOpt = None,
    burst_limit: LimitOpt = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Create a team (at the top level, or under --parent)."""
    fmt = common.output_format(output)
    limit = _parse_limit(burst_limit) if burst_limit is not None else None
    with common.open_client() as client:
        team = client.create_team(slug, name=name, parent=parent, bursting_priority=weight,
                                  burst_limit_percent=limit)
        _done(client, team, "created", fmt, no_headers)


@app.command("set")
@command
def set_team(
    slug: str,
    name: Annotated[str | None, typer.Option("--name")] = None,
    weight: WeightOpt = None,
    burst_limit: LimitOpt = None,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Change a team's name, bursting priority (weight) or burst limit."""
    changes: dict[str, Any] = {}
    if name is not None:
        changes["name"] = name
    if weight is not None:
        changes["bursting_priority"] = weight
    if burst_limit is not None:
        changes["burst_limit_percent"] = _parse_limit(burst_limit)
    if not changes:
        raise usage_error("nothing to change: give --name, --weight or --burst-limit")
    fmt = common.output_format(output)
    with common.open_client() as client:
        _done(client, client.update_team(slug, changes), "updated", fmt, no_headers)


@app.command("move")
@command
def move(
    slug: str,
    parent: Annotated[str | None, typer.Option("--parent", help="New parent team.")] = None,
    top: Annotated[bool, typer.Option("--top", help="Move to the top level.")] = False,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Move a team under another parent (reservation rules are checked again)."""
    if (parent is None) == (not top):
        raise usage_error("give --parent P or --top")
    fmt = common.output_format(output)
    with common.open_client() as client:
        team = client.update_team(slug, {"parent": None if top else parent})
        _done(client, team, f"moved under {team.get('parent') or 'the top level'}", fmt,
              no_headers)


@app.command("delete")
@command
def delete(slug: str) -> None:
    """Delete a team without children, reservations or unfinished workloads."""
    with common.open_client() as client:
        client.delete_team(slug)
    stdout().print(f"team {slug} deleted")
