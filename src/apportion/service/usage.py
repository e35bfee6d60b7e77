"""Accounting: GPU-hours, preemption losses and wait times over a window.

The one definition of usage, shared by ``GET /v1/usage``, ``apportion usage``
and the dashboard's usage page. It reads the attempt intervals every workload
keeps (``spans.intervals``: pool, placement, start and end of each attempt):

- **GPU-hours** of an attempt: its GPUs (milli / 1000) x the hours it held
  them (Starting or Running, and for a preempted attempt until its grace
  ended) inside the window ``[since, until)``; split by the workload's class
  into reserved and elastic.
- **Preemptions** and **lost GPU-hours**: attempts that ended Preempted inside
  the window, and the whole run time of each of them x its GPUs (the work it
  had done and lost).
- **Wait times**: per workload whose first attempt started inside the window,
  first start - submission; p50/p95/p99 by the nearest-rank method (the
  smallest wait with at least p % of the waits at or below it), in seconds.

Sums are exact (integer milli-GPU x seconds) and rounded once, at the end, to
six decimals of a GPU-hour.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from apportion.domain.errors import ValidationError
from apportion.service.authz import require_reader
from apportion.service.context import Ctx
from apportion.service.filters import known_pool, known_team
from apportion.service.spans import Interval, intervals
from apportion.service.views import iso
from apportion.store.db import Session

GROUPS = ("team", "user", "pool")
DEFAULT_WINDOW = 7 * 86400
PERCENTILES = (50, 95, 99)
MILLI_SECONDS_PER_GPU_HOUR = 1000 * 3600
FIELDS = ("reserved_gpu_hours", "elastic_gpu_hours", "gpu_hours", "preemptions",
          "lost_gpu_hours", "started", "wait_p50_s", "wait_p95_s", "wait_p99_s")


@dataclass(frozen=True, slots=True)
class Filters:
    """Only spans of this team, user and pool (None: any)."""

    team: str | None = None
    user: str | None = None
    pool: str | None = None

    def keep(self, s: Interval) -> bool:
        return ((self.team is None or s.team == self.team)
                and (self.user is None or s.user == self.user)
                and (self.pool is None or s.pool == self.pool))


def parse_group_by(raw: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"team,user"`` (or a list) -> ("team", "user"); default ("team",).
    ValidationError naming ``group_by`` and the allowed values otherwise."""
    if raw is None or raw == "" or raw == []:
        return ("team",)
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    out: list[str] = []
    for item in (i.strip() for i in items):
        if item not in GROUPS:
            raise ValidationError("group_by", f"{item!r} is not a grouping",
                                  ", ".join(GROUPS) + " (comma-separated)")
        if item not in out:
            out.append(item)
    return tuple(out)


def window(since: float | None, until: float | None, now: float) -> tuple[float, float]:
    """The window, defaulting to the 7 days before ``until`` (default: now)."""
    end = now if until is None else until
    start = end - DEFAULT_WINDOW if since is None else since
    if start >= end:
        raise ValidationError("since", f"must be before until ({start} >= {end})",
                              "a time before until")
    return start, end


def percentile(values: Sequence[float], p: int) -> float | None:
    """Nearest-rank percentile of sorted ``values`` (None when empty)."""
    if not values:
        return None
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


def _blank(key: tuple[str, ...], group_by: tuple[str, ...]) -> dict[str, Any]:
    row: dict[str, Any] = dict(zip(group_by, key, strict=True))
    row.update({"reserved": 0, "elastic": 0, "lost": 0, "preemptions": 0, "waits": []})
    return row


def report(spans: Iterable[Interval], since: float, until: float,
           group_by: tuple[str, ...] = ("team",), filters: Filters = Filters()
           ) -> list[dict[str, Any]]:
    """The usage rows of ``spans`` over ``[since, until)``, one per group of
    ``group_by``, sorted by GPU-hours (most first), then the group's values.
    Each row: the group's keys and ``FIELDS``. Groups with no GPU-hours, no
    preemption and no start in the window are left out."""
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for s in spans:
        if not filters.keep(s):
            continue
        key = tuple(getattr(s, g) for g in group_by)
        row = rows.get(key) or rows.setdefault(key, _blank(key, group_by))
        lo, hi = max(s.start, since), min(until if s.end is None else s.end, until)
        if hi > lo:
            row["reserved" if s.is_reserved else "elastic"] += s.milli * (hi - lo)
        if s.status == "Preempted" and s.end is not None and since <= s.end < until:
            row["preemptions"] += 1
            row["lost"] += s.milli * (s.end - s.start)
        # a later attempt exists only after a placed one: attempt 1 is the first start
        if s.attempt == 1 and since <= s.start < until and s.submitted_at is not None:
            row["waits"].append(s.start - s.submitted_at)
    return _finish(rows.values())


def _finish(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        waits = sorted(row.pop("waits"))
        reserved, elastic, lost = row.pop("reserved"), row.pop("elastic"), row.pop("lost")
        if not (reserved or elastic or row["preemptions"] or waits):
            continue
        hours = MILLI_SECONDS_PER_GPU_HOUR
        row.update({
            "reserved_gpu_hours": round(reserved / hours, 6),
            "elastic_gpu_hours": round(elastic / hours, 6),
            "gpu_hours": round((reserved + elastic) / hours, 6),
            "lost_gpu_hours": round(lost / hours, 6),
            "started": len(waits),
        })
        for p in PERCENTILES:
            row[f"wait_p{p}_s"] = percentile(waits, p)
        out.append(row)
    keys = [k for k in GROUPS if k in out[0]] if out else []
    out.sort(key=lambda r: (-r["gpu_hours"], *(r[k] for k in keys)))
    return out


def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The sums of ``rows`` (the wait percentiles are not additive: left out)."""
    out: dict[str, Any] = {k: round(sum(r[k] for r in rows), 6) for k in
                           ("reserved_gpu_hours", "elastic_gpu_hours", "gpu_hours",
                            "lost_gpu_hours")}
    out["preemptions"] = sum(r["preemptions"] for r in rows)
    out["started"] = sum(r["started"] for r in rows)
    return out


def usage(
    session: Session, ctx: Ctx, *, since: float | None = None, until: float | None = None,
    group_by: tuple[str, ...] = ("team",), filters: Filters = Filters(),
    now: float | None = None,
) -> dict[str, Any]:
    """The usage report of the caller's organization (any human role may read
    it, as the dashboard's usage page): ``{since, until, group_by, rows,
    total}``; ``total`` is the whole window under ``filters`` with its own wait
    percentiles."""
    require_reader(ctx, "capacity.read", "usage")
    start, end = window(since, until, ctx.clock.now() if now is None else now)
    spans = intervals(session, ctx.org_id, start)
    rows = report(spans, start, end, group_by, filters)
    whole = report(spans, start, end, (), filters)
    total = whole[0] if whole else {**dict.fromkeys(FIELDS, 0),
                                    **{f"wait_p{p}_s": None for p in PERCENTILES}}
    return {"since": iso(start), "until": iso(end), "group_by": list(group_by), "rows": rows,
            "total": total}


def checked_usage(
    session: Session, ctx: Ctx, *, since: float | None = None, until: float | None = None,
    group_by: tuple[str, ...] = ("team",), filters: Filters = Filters(),
) -> dict[str, Any]:
    """:func:`usage` after checking that the team and pool filters name a team
    and a pool (NotFound with the closest name otherwise)."""
    require_reader(ctx, "capacity.read", "usage")
    known_team(session, ctx.org_id, filters.team)
    known_pool(session, ctx.org_id, filters.pool)
    return usage(session, ctx, since=since, until=until, group_by=group_by, filters=filters)
