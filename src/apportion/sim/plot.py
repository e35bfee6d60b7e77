"""``--plot FILE.png``: GPUs in use per team over time, stacked (reserved work
solid, elastic hatched), with each team's reservation as a dashed line and the
pool's capacity as a solid one. One panel per pool."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from apportion.domain.cluster import NodeState
from apportion.domain.lifecycle import all_attempts
from apportion.sim.runner import SimResult

MAX_TEAMS = 12
Series = dict[tuple[str, str], list[tuple[int, int]]]  # (team, class) -> [(time, delta milli)]


def write_plot(result: SimResult, path: str) -> None:
    """Draw the figure and save it as a PNG at ``path``."""
    pools = list(result.scenario.pools)
    fig = Figure(figsize=(11, 4.2 * len(pools) + 0.8), layout="constrained")
    FigureCanvasAgg(fig)
    end = result.time + max(1, result.time // 5)
    scale, unit = _time_unit(end)
    axes = fig.subplots(len(pools), 1, squeeze=False)[:, 0]
    for ax, pool in zip(axes, pools, strict=True):
        _draw_pool(ax, result, pool, end, scale, unit)
    title = "GPUs in use per team over time"
    if result.scenario.description:
        title += "\n" + result.scenario.description.splitlines()[0]
    fig.suptitle(title, fontsize=13)
    fig.savefig(path, dpi=110, format="png")


def _time_unit(end: int) -> tuple[float, str]:
    if end > 3 * 86400:
        return 86400.0, "days"
    if end > 3 * 3600:
        return 3600.0, "hours"
    if end > 600:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _series(result: SimResult, pool: str) -> Series:
    """Changes of use per (leaf team, class): +milli at start, -milli when the
    devices are let go (a preempted attempt holds them until it exits)."""
    out: Series = {}
    for w in result.states.values():
        klass = w.spec.wclass.value
        for a in all_attempts(w):
            if a.pool != pool or a.started_at is None or not a.placement:
                continue
            milli = sum(p.milli for p in a.placement)
            steps = out.setdefault((w.team, klass), [])
            steps.append((a.started_at, milli))
            if a.ended_at is not None:
                steps.append((a.ended_at, -milli))
    return out


def _steps(changes: Sequence[tuple[int, int]], times: Sequence[int]) -> list[float]:
    """GPUs in use at each of ``times`` (sorted), from (time, delta) changes."""
    ordered = sorted(changes)
    values: list[float] = []
    level, k = 0, 0
    for t in times:
        while k < len(ordered) and ordered[k][0] <= t:
            level += ordered[k][1]
            k += 1
        values.append(level / 1000)
    return values


def _capacity_changes(result: SimResult, pool: str) -> list[tuple[int, int]]:
    """Pool capacity over time, replayed from the node events."""
    gpus = {n.name: n.gpus * 1000 for n in result.scenario.nodes if n.pool == pool}
    start = sum(n.gpus * 1000 for n in result.scenario.nodes
                if n.pool == pool and n.state is not NodeState.DOWN)
    changes = [(0, start)]
    for note in result.notes:
        if note.is_ignored or note.target not in gpus:
            continue
        if note.kind == "node_down":
            changes.append((note.at, -gpus[note.target]))
        elif note.kind == "node_up":
            changes.append((note.at, gpus[note.target]))
    return changes


def _draw_pool(ax, result: SimResult, pool: str, end: int, scale: float, unit: str) -> None:  # type: ignore[no-untyped-def]
    series = _series(result, pool)
    teams = _teams_to_show(result, series, pool)
    times = sorted({0, end, *(t for ch in series.values() for t, _ in ch),
                    *(t for t, _ in _capacity_changes(result, pool))})
    xs = [t / scale for t in times]
    palette = colormaps["tab20"]
    colors = [palette(i) for i in (*range(0, 20, 2), *range(1, 20, 2))]
    base = [0.0] * len(times)
    for i, team in enumerate(teams):
        color = colors[i % len(colors)]
        for klass, alpha, hatch in (("reserved", 0.9, None), ("elastic", 0.45, "//")):
            changes = _merged(series, team, klass, teams)
            if not changes:
                continue
            top = [b + v for b, v in zip(base, _steps(changes, times), strict=True)]
            ax.fill_between(xs, base, top, step="post", color=color, alpha=alpha, hatch=hatch,
                            linewidth=0, label=f"{team} ({klass})")
            base = top
        reservation = result.scenario.tree.reservation(team, pool) / 1000
        if reservation:
            ax.axhline(reservation, color=color, linestyle="--", linewidth=1.3,
                       label=f"{team} reservation ({reservation:g})")
    capacity = _steps(_capacity_changes(result, pool), times)
    ax.step(xs, capacity, where="post", color="black", linewidth=1.6, label="pool capacity")
    ax.set_xlim(0, end / scale)
    ax.set_ylim(0, max(capacity + base + [1.0]) * 1.08)
    ax.set_title(f"pool {pool}", loc="left")
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("GPUs")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _teams_to_show(result: SimResult, series: Series, pool: str) -> list[str]:
    """Leaf teams with use in this pool or a reservation there, busiest first;
    beyond MAX_TEAMS the rest are drawn together as "other teams"."""
    tree = result.scenario.tree
    pool_teams = {team for team, _ in series} | {
        t for t in tree.leaves() if tree.reservation(t, pool)
    }
    peaks = {team: sum(max(0, d) for (t, _), ch in series.items() if t == team for _, d in ch)
             for team in pool_teams}
    ordered = [t for t in result.scenario.team_order if t in pool_teams]
    if len(ordered) <= MAX_TEAMS:
        return ordered
    ordered.sort(key=lambda t: -peaks[t])
    return [*sorted(ordered[: MAX_TEAMS - 1], key=result.scenario.team_order.index),
            "other teams"]


def _merged(series: Series, team: str, klass: str, shown: list[str]) -> list[tuple[int, int]]:
    if team != "other teams":
        return series.get((team, klass), [])
    return [c for (t, k), ch in series.items() if k == klass and t not in shown for c in ch]
