"""The report: ``results.json``, the PNG charts and a self-contained
``report.html`` (charts embedded as base64, no network), and the summary
table ``-o table`` prints."""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

CHARTS = ("utilization", "usage", "delays", "preemptions")
DAY = 86400.0

#: (column title, getter, format) of the summary table, one row per policy.
SUMMARY: tuple[tuple[str, str, str], ...] = (
    ("GPU util %", "utilization.average", "pct"),
    ("reserved p50 s", "queueing_delay_s.reserved.p50", "num"),
    ("reserved p99 s", "queueing_delay_s.reserved.p99", "num"),
    ("elastic p50 s", "queueing_delay_s.elastic.p50", "num"),
    ("elastic p95 s", "queueing_delay_s.elastic.p95", "num"),
    ("elastic p99 s", "queueing_delay_s.elastic.p99", "num"),
    ("never started", "never_started.total", "int"),
    ("JCT p50 s", "completion_time_s.p50", "num"),
    ("JCT p99 s", "completion_time_s.p99", "num"),
    ("preemptions", "preemptions.count", "int"),
    ("GPU-h lost", "preemptions.gpu_hours_lost", "num"),
    ("over-preemption", "preemptions.over_preemption_ratio", "ratio"),
    ("reserved preempted", "preemptions.reserved_preempted", "int"),
    ("reserved at once %", "reserved_start.fraction", "pct"),
    ("Jain (SPEC 4, whole workloads)", "fairness.jain_spec_workloads", "ratio"),
    ("Jain (SPEC 4, fluid)", "fairness.jain_spec", "ratio"),
    ("Jain (weights)", "fairness.jain_weighted", "ratio"),
    ("Jain (demand-aware)", "fairness.jain_demand_aware", "ratio"),
    ("saturated %", "fairness.saturated_fraction", "pct"),
    ("stranded GPUs avg", "fragmentation.average_gpus", "num"),
    ("idle GPUs avg", "idle.average_gpus", "num"),
    ("idle, work waits GPUs", "idle.waiting_gpus", "num"),
    ("useful util %", "work_balance.useful_utilization", "pct"),
    ("cycle p50 ms", "cycles.p50_ms", "num"),
    ("cycle p99 ms", "cycles.p99_ms", "num"),
    ("sim s", "wall_seconds.simulate", "num"),
)


#: (row title, key in ``idle.by_reason_gpus``) of the idle-GPU table
IDLE_ROWS: tuple[tuple[str, str], ...] = (
    ("waiting work fits, no rule forbids", "fits"),
    ("reserved work outside its buckets (SPEC 2)", "reserved_outside_buckets"),
    ("burst cap (SPEC 2)", "burst_cap"),
    ("gang: fewer than min_pods fit", "gang"),
    ("host CPU/memory", "host_resources"),
    ("fragmented: enough free GPUs, not on one node/device", "fragmented"),
    ("too few free GPUs for any waiting pod", "too_few_free"),
    ("nothing waits", "nothing_waits"),
)

#: (row title, key in ``work_balance``) of the work-balance table, GPU-hours
BALANCE_ROWS: tuple[tuple[str, str], ...] = (
    ("offered (each job started at submission, cut at the end)", "offered_gpu_h"),
    ("- pushed past the end by waiting", "deferred_by_wait_gpu_h"),
    ("- pushed past the end by restarts after preemption", "deferred_by_restart_gpu_h"),
    ("= done (kept work)", "done_gpu_h"),
    ("+ preempted runs (thrown away)", "preempted_runs_gpu_h"),
    ("= allocated (the utilization's numerator)", "allocated_gpu_h"),
)


def lookup(data: Mapping[str, Any], dotted: str) -> Any:
    """``a.b.c`` in nested dicts; ``never_started.total`` sums the classes;
    ``idle.waiting_gpus`` the idle GPUs while some work waits."""
    if dotted == "never_started.total":
        return sum(data["never_started"].values())
    if dotted == "idle.waiting_gpus":
        idle = data["idle"]
        return idle["average_gpus"] - idle["by_reason_gpus"]["nothing_waits"]
    value: Any = data
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.2f}"
    if kind == "ratio":
        return f"{value:.3f}"
    if kind == "int":
        return str(int(value))
    if kind == "num2":
        return f"{value:,.2f}"
    return f"{value:,.1f}" if abs(value) < 1e6 else f"{value:,.0f}"


def summary_rows(results: Mapping[str, Any]) -> list[list[str]]:
    """One row per measure: its title, then its value for each policy."""
    policies = list(results["policies"].values())
    return [[title, *(fmt(lookup(r, key), kind) for r in policies)]
            for title, key, kind in SUMMARY]


def idle_rows(results: Mapping[str, Any]) -> list[list[str]]:
    """Average idle GPUs by why waiting work did not use them, per policy."""
    policies = list(results["policies"].values())
    rows = [[title, *(fmt(r["idle"]["by_reason_gpus"][key], "num2") for r in policies)]
            for title, key in IDLE_ROWS]
    rows.append(["all idle GPUs", *(fmt(r["idle"]["average_gpus"], "num2") for r in policies)])
    return rows


def balance_rows(results: Mapping[str, Any]) -> list[list[str]]:
    """The work balance in GPU-hours, per policy."""
    policies = list(results["policies"].values())
    return [[title, *(fmt(r["work_balance"][key], "num") for r in policies)]
            for title, key in BALANCE_ROWS]


#: (row title, key in ``preemptions.by_kind``) of the thrown-away-work table
PREEMPTION_ROWS: tuple[tuple[str, str], ...] = (
    ("reserved work taking back its reservation", "reserved"),
    ("elastic work of a higher priority", "higher_priority"),
    ("fair share: same priority, another team", "fair_share_same_priority"),
    ("fair share: lower priority, another team", "fair_share_lower_priority"),
    ("the victim's own team, higher priority", "same_team"),
)


def preemption_rows(results: Mapping[str, Any]) -> list[list[str]]:
    """Preemptions and the GPU-hours they threw away, by what took the GPUs."""
    policies = list(results["policies"].values())
    return [[title, *(f"{r['preemptions']['by_kind'][key]['count']} / "
                      f"{fmt(r['preemptions']['by_kind'][key]['gpu_hours_lost'], 'num')}"
                      for r in policies)]
            for title, key in PREEMPTION_ROWS]


def write(results: Mapping[str, Any], out: str) -> dict[str, str]:
    """results.json, the charts and report.html into folder ``out``; returns
    the paths written, by name."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"results": str(folder / "results.json")}
    (folder / "results.json").write_text(json.dumps(results, indent=1, sort_keys=False) + "\n",
                                         encoding="utf-8")
    pngs: dict[str, bytes] = {}
    for chart in CHARTS:
        pngs[chart] = render(chart, results)
        path = folder / f"replay-{chart}.png"
        path.write_bytes(pngs[chart])
        paths[chart] = str(path)
    (folder / "report.html").write_text(to_html(results, pngs), encoding="utf-8")
    paths["report"] = str(folder / "report.html")
    return paths


# -- charts ---------------------------------------------------------------------


def render(chart: str, results: Mapping[str, Any]) -> bytes:
    """One chart as PNG bytes."""
    draw = {"utilization": _utilization, "usage": _usage, "delays": _delays,
            "preemptions": _preemptions}[chart]
    fig = draw(results)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _unit(results: Mapping[str, Any]) -> tuple[float, str]:
    """The time unit of the x axes, by the window's length."""
    length = results["window"]["end"] - results["window"]["start"]
    for scale, name in ((DAY, "days"), (3600.0, "hours"), (60.0, "minutes")):
        if length > 3 * scale:
            return scale, name
    return 1.0, "seconds"


def _time_label(results: Mapping[str, Any]) -> str:
    return f"{_unit(results)[1]} since the trace's first submission"


def _days(results: Mapping[str, Any]) -> list[float]:
    """Bin midpoints in the x axis' unit."""
    first = next(iter(results["policies"].values()))
    edges = first["series_edges"]
    start = results["window"]["start"]
    scale = _unit(results)[0]
    return [((a + b) / 2 - start) / scale for a, b in itertools.pairwise(edges)]


#: Lines of policies that coincide stay visible: each its own dash and width.
STYLES = (("-", 2.4), ("--", 1.8), (":", 2.2), ("-.", 1.4), ((0, (1, 1)), 1.0))


def _style(i: int) -> dict[str, Any]:
    dash, width = STYLES[i % len(STYLES)]
    return {"linestyle": dash, "linewidth": width}


def _title(results: Mapping[str, Any], what: str) -> str:
    org = results["org"]["description"] or results["org"]["source"]
    return f"{what}\n{org}"


def _utilization(results: Mapping[str, Any]) -> Figure:
    fig = _figure(11, 4.6)
    ax = fig.subplots()
    days = _days(results)
    for i, (name, r) in enumerate(results["policies"].items()):
        avg = 100 * r["utilization"]["average"]
        ax.plot(days, [100 * v for v in r["utilization"]["series"]], **_style(i),
                label=f"{name} (average {avg:.2f} %)")
    ax.set_xlabel(_time_label(results))
    ax.set_ylabel("GPUs allocated, % of capacity")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    fig.suptitle(_title(results, "GPU utilization over time (averaged per bin)"), fontsize=12)
    return fig


def _usage(results: Mapping[str, Any]) -> Figure:
    policies = list(results["policies"])
    fig = _figure(11, 2.6 * len(policies) + 1.2)
    axes = fig.subplots(len(policies), 1, squeeze=False, sharex=True)[:, 0]
    days = _days(results)
    capacity = results["org"]["capacity_gpus"]
    teams = sorted(next(iter(results["policies"].values()))["usage_by_team_gpus"])
    colors = [colormaps["tab10"](i) for i in range(10)]
    for ax, name in zip(axes, policies, strict=True):
        series = results["policies"][name]["usage_by_team_gpus"]
        ax.stackplot(days, [series[t] for t in teams], labels=teams,
                     colors=[colors[i % len(colors)] for i in range(len(teams))])
        ax.axhline(capacity, color="black", linewidth=0.8, label="capacity")
        ax.set_title(name, fontsize=10, loc="left")
        ax.set_ylabel("GPUs in use")
        ax.set_ylim(0, capacity * 1.08)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(_time_label(results))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=9, title="team")
    fig.suptitle(_title(results, "GPUs in use per team (stacked, averaged per bin)"),
                 fontsize=12)
    return fig


def _delays(results: Mapping[str, Any]) -> Figure:
    fig = _figure(11, 4.6)
    axes = fig.subplots(1, 2)
    for ax, klass in zip(axes, ("reserved", "elastic"), strict=True):
        top = 10.0
        drawn = False
        for k, (name, r) in enumerate(results["policies"].items()):
            values = r["delays_s"][klass]
            if not values:
                continue
            drawn = True
            n = len(values)
            xs = [1.0] + [max(v, 1.0) for v in values]
            top = max(top, xs[-1] * 1.5)
            ax.step(xs, [0.0] + [(i + 1) / n * 100 for i in range(n)], where="post",
                    label=name, **_style(k))
        ax.set_xscale("log")
        ax.set_xlim(0.7, top)  # the delays of 0, drawn at 1 s, off the frame
        ax.set_xlabel("queueing delay, seconds (log; 0 drawn at 1 s)")
        ax.set_ylabel("% of workloads started within")
        ax.set_ylim(0, 101)
        ax.set_title(f"{klass} work", fontsize=10)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=9, loc="lower right")
        else:
            ax.text(0.5, 0.5, f"no {klass} work in this trace", transform=ax.transAxes,
                    ha="center", va="center", fontsize=11, color="0.4")
    fig.suptitle(_title(results, "Queueing delay CDF by class (work never started counts "
                                 "with its wait up to the end)"), fontsize=12)
    return fig


def _preemptions(results: Mapping[str, Any]) -> Figure:
    fig = _figure(11, 4.6)
    ax = fig.subplots()
    edges = next(iter(results["policies"].values()))["series_edges"]
    start = results["window"]["start"]
    scale = _unit(results)[0]
    days = [(e - start) / scale for e in edges]
    for i, (name, r) in enumerate(results["policies"].items()):
        running = 0
        cumulative = [0]
        for count in r["preemptions"]["series"]:
            running += count
            cumulative.append(running)
        ax.step(days, cumulative, where="post", **_style(i),
                label=f"{name} ({r['preemptions']['count']} in all)")
    ax.set_xlabel(_time_label(results))
    ax.set_ylabel("preemptions so far (cumulative count)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, loc="upper left")
    fig.suptitle(_title(results, "Preemptions over time"), fontsize=12)
    return fig


# -- html -----------------------------------------------------------------------


def to_html(results: Mapping[str, Any], pngs: Mapping[str, bytes]) -> str:
    e = html.escape
    rows = summary_rows(results)
    head = "".join(f"<th>{e(t)}</th>" for t in ("measure", *results["policies"]))
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
    goals = "".join(
        f"<tr><td>{e(g['goal'])}</td><td>{e(str(_short(g['value'])))}</td>"
        f"<td>{e(g['target'])}</td><td class='{_cls(g['met'])}'>{_word(g['met'])}</td></tr>"
        for g in results["goals"])
    teams = []
    for name, r in results["policies"].items():
        for team, t in r["teams"].items():
            d = t["queueing_delay_s"]
            teams.append(f"<tr><td>{e(name)}</td><td>{e(team)}</td><td>{t['workloads']}</td>"
                         f"<td>{t['reservation_gpus']:.2f}</td><td>{t['gpus_average']:.2f}</td>"
                         f"<td>{fmt(d['p50'], 'num')}</td><td>{fmt(d['p99'], 'num')}</td>"
                         f"<td>{t['completed']}</td><td>{t['preempted']}</td></tr>")
    charts = "".join(
        f"<figure><img alt='{e(c)}' src='data:image/png;base64,"
        f"{base64.b64encode(pngs[c]).decode('ascii')}'></figure>" for c in CHARTS if c in pngs)
    notes = "".join(f"<li>{e(n)}</li>" for n in results["trace"]["notes"])
    idle = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
                   for row in idle_rows(results))
    balance = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
                      for row in balance_rows(results))
    thrown = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>"
                     for row in preemption_rows(results))
    why = "".join(f"<p>{e(g['goal'])}: {e(g['why'])}</p>" for g in results["goals"]
                  if g.get("why"))
    window = results["window"]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>apportion replay</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse;margin:1em 0;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}
.met{{background:#dfd}} .missed{{background:#fdd}} .na{{background:#eee}}
img{{max-width:100%}}
</style></head><body>
<h1>apportion replay</h1>
<p>Trace <code>{e(results['trace']['source'])}</code>: {results['trace']['jobs']} jobs,
window {window['start']}&ndash;{window['end']} s ({(window['end'] - window['start']) / DAY:.1f}
days). Org <code>{e(results['org']['source'])}</code>: {e(results['org']['description'])},
{results['org']['capacity_gpus']} GPUs.</p>
<ul>{notes}</ul>
<h2>Goals (apportion)</h2>
<table><tr><th>goal</th><th>value</th><th>target</th><th>met?</th></tr>{goals}</table>
{why}
<h2>Summary</h2>
<table><tr>{head}</tr>{body}</table>
<h2>Idle GPUs, average over the sampled instants, by why waiting work did not use them</h2>
<table><tr>{head}</tr>{idle}</table>
<h2>Work balance, GPU-hours</h2>
<table><tr>{head}</tr>{balance}</table>
<h2>Preemptions / GPU-hours thrown away, by what preempted</h2>
<table><tr>{head}</tr>{thrown}</table>
<p>Definitions of every measure: docs/replay.md, "Measures".</p>
<h2>Charts</h2>
{charts}
<h2>Per team</h2>
<table><tr><th>policy</th><th>team</th><th>workloads</th><th>reserved GPUs</th>
<th>GPUs in use, average</th><th>delay p50 s</th><th>delay p99 s</th><th>completed</th>
<th>preempted</th></tr>{''.join(teams)}</table>
</body></html>
"""


def _short(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _word(met: bool | None) -> str:
    return "n/a" if met is None else ("met" if met else "missed")


def _cls(met: bool | None) -> str:
    return "na" if met is None else ("met" if met else "missed")


def markdown(results: Mapping[str, Any]) -> str:
    """The summary and the goals as Markdown tables (docs/replay.md)."""
    names = list(results["policies"])
    lines = ["| measure | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|" + "---:|" * len(names)]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(results)]
    lines += ["", "| idle GPUs, average | " + " | ".join(f"`{n}`" for n in names) + " |",
              "|---|" + "---:|" * len(names)]
    lines += ["| " + " | ".join(row) + " |" for row in idle_rows(results)]
    lines += ["", "| work balance, GPU-h | " + " | ".join(f"`{n}`" for n in names) + " |",
              "|---|" + "---:|" * len(names)]
    lines += ["| " + " | ".join(row) + " |" for row in balance_rows(results)]
    lines += ["", "| preemptions / GPU-h thrown away, by | "
              + " | ".join(f"`{n}`" for n in names) + " |", "|---|" + "---:|" * len(names)]
    lines += ["| " + " | ".join(row) + " |" for row in preemption_rows(results)]
    lines += ["", "| goal (apportion) | value | target | met? |", "|---|---:|---|---|"]
    lines += [f"| {g['goal']} | {_short(g['value'])} | {g['target']} | {_word(g['met'])} |"
              for g in results["goals"]]
    return "\n".join(lines) + "\n"
