"""``apportion usage``: sacct-style accounting over a window — GPU-hours
(reserved and elastic), preemptions and the GPU-hours they lost, wait-time
percentiles — per team, user or pool (``GET /v1/usage``)."""

from __future__ import annotations

import csv
import enum
import re
import sys
import time
from typing import Annotated, Any

import typer

from apportion.cli import common
from apportion.cli.common import command, usage_error
from apportion.cli.output import Column, Format, print_data, print_table

_AGO = re.compile(r"^(\d+)([smhd])$")
_FACTOR = {"s": 1, "m": 60, "h": 3600, "d": 86400}
NUMBERS = ("reserved_gpu_hours", "elastic_gpu_hours", "gpu_hours", "preemptions",
           "lost_gpu_hours", "started", "wait_p50_s", "wait_p95_s", "wait_p99_s")
HEADERS = ("RESERVED-GPU-H", "ELASTIC-GPU-H", "GPU-H", "PREEMPTIONS", "LOST-GPU-H",
           "STARTED", "WAIT-P50", "WAIT-P95", "WAIT-P99")


class UsageFormat(enum.StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    YAML = "yaml"


def when(text: str | None, option: str) -> str | None:
    """``7d``/``12h``/``30m``/``90s`` ago as epoch seconds; RFC 3339 or epoch as given."""
    if text is None:
        return None
    match = _AGO.match(text.strip())
    if match:
        return str(int(time.time()) - int(match.group(1)) * _FACTOR[match.group(2)])
    if not text.strip():
        raise usage_error(f"{option}: give a time (RFC 3339, epoch seconds, or 7d/12h ago)")
    return text.strip()


def _wait(value: Any) -> str:
    if value is None:
        return "-"
    seconds = int(value)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


def _columns(group_by: list[str]) -> list[Column]:
    cols = [Column(g.upper(), lambda r, g=g: r.get(g)) for g in group_by]
    for key, head in zip(NUMBERS, HEADERS, strict=True):
        if key.startswith("wait_"):
            cols.append(Column(head, lambda r, k=key: _wait(r.get(k))))
        else:
            cols.append(Column(head, lambda r, k=key: r.get(k)))
    return cols


def register(root: typer.Typer) -> None:
    root.command("usage")(usage)


@command
def usage(
    since: Annotated[str | None, typer.Option("--since", "-S", help="Start: RFC 3339, epoch "
                                              "seconds, or 7d/12h ago (default: 7d).")] = None,
    until: Annotated[str | None, typer.Option("--until", "-E", help="End (default: now).")]
    = None,
    team: Annotated[str | None, typer.Option("--team", "-t")] = None,
    user: Annotated[str | None, typer.Option("--user", "-u")] = None,
    pool: Annotated[str | None, typer.Option("--pool")] = None,
    group_by: Annotated[str, typer.Option("--group-by", "-g", help="team, user, pool; "
                                          "comma-separated.")] = "team",
    output: Annotated[UsageFormat, typer.Option("-o", "--output", help="table, csv, json "
                                                "or yaml.")] = UsageFormat.TABLE,
) -> None:
    """GPU-hours (reserved/elastic), preemptions, lost GPU-hours and wait-time
    percentiles over a window, per team (or user, pool)."""
    with common.open_client() as client:
        data = client.usage(since=when(since, "--since"), until=when(until, "--until"),
                            team=team, user=user, pool=pool, group_by=group_by)
    groups = list(data.get("group_by") or [])
    if output in (UsageFormat.JSON, UsageFormat.YAML):
        print_data(data, Format(output.value))
        return
    rows = list(data.get("rows") or [])
    if output is UsageFormat.CSV:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow([*groups, *NUMBERS])
        for r in rows:
            writer.writerow([r.get(k) if r.get(k) is not None else "" for k in (*groups,
                                                                                 *NUMBERS)])
        return
    total = {**data["total"], **dict.fromkeys(groups, "")}
    if groups:
        total[groups[0]] = "TOTAL"
    print_table(_columns(groups), [*rows, total])
    common.note(f"from {data['since']} to {data['until']}")
