"""The GPU-holding intervals of workload attempts, decoded once per row version.

Every attempt of a workload keeps its pool, placement, start and end (the
``attempts`` column plus the current attempt's columns). Decoding those JSON
columns for thousands of rows on every page view would dominate the
dashboard, so, like ``snapshots.StateCache``, :class:`SpanCache` keeps each
row's decoded intervals with the row's ``(version, updated_at)``: every
change of a workload row bumps its version and sets ``updated_at``
(``codec.state_to_row``), so a hit is exactly what decoding again would give.
A read then selects plain columns for all rows and the JSON only of the rows
that changed since the last read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from apportion.store.db import Session
from apportion.store.repos import workloads as wl_repo

PLACED = ("Starting", "Running")


@dataclass(frozen=True, slots=True)
class Interval:
    """One attempt's hold on GPUs: ``milli`` in ``pool`` from ``start`` to
    ``end`` (None: still held). ``status`` is how the attempt ended (or its
    current status)."""

    workload_id: int
    attempt: int
    team: str
    pool: str
    is_reserved: bool
    milli: int
    start: float
    end: float | None
    status: str
    #: who submitted the workload, and when (accounting: users, wait times)
    user: str = ""
    submitted_at: float | None = None


@dataclass(frozen=True, slots=True)
class Decoded:
    """A row's intervals, its name and status, and its current placement."""

    name: str
    status: str
    spans: tuple[Interval, ...]
    placement: tuple[Any, ...]


def milli_of(placement: Iterable[Any] | None) -> int:
    return sum(int(d["milli"]) for p in placement or () for d in p["devices"])


def decode(row: Any) -> Decoded:
    """Every attempt interval of a row (earlier attempts, then the current one)."""
    is_reserved = row.wclass == "reserved"
    who = (row.submitted_by, float(row.submitted_at))
    out: list[Interval] = []
    for a in row.attempts or ():
        if a.get("started_at") is None or a.get("pool") is None:
            continue
        end = a.get("ended_at")
        out.append(Interval(row.id, int(a["attempt"]), row.team, a["pool"], is_reserved,
                            milli_of(a.get("placement")), float(a["started_at"]),
                            None if end is None else float(end), a["status"], *who))
    if row.started_at is not None and row.pool is not None:
        end = None if row.status in PLACED else row.ended_at
        out.append(Interval(row.id, row.attempt, row.team, row.pool, is_reserved,
                            milli_of(row.placement), float(row.started_at), end, row.status,
                            *who))
    return Decoded(row.name, row.status, tuple(out), tuple(row.placement or ()))


class SpanCache:
    """Decoded rows by (database, workload id), valid while (version, updated_at) hold."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int], tuple[tuple[int, float], Decoded]] = {}
        self._lock = threading.Lock()

    def rows(self, session: Session, org_id: int, current: list[tuple[int, int, float]]
             ) -> dict[int, Decoded]:
        """The decoded rows of ``org_id`` whose ``(id, version, updated_at)`` are
        ``current``, by id (the rows that changed are read again)."""
        db = str(session.get_bind().engine.url)
        stale = [wid for wid, version, at in current
                 if (hit := self._rows.get((db, wid))) is None or hit[0] != (version, at)]
        fresh: dict[tuple[str, int], tuple[tuple[int, float], Decoded]] = {}
        for row in wl_repo.span_columns(session, org_id, stale):
            fresh[(db, row.id)] = ((row.version, row.updated_at), decode(row))
        with self._lock:
            self._rows.update(fresh)
            out = {}
            for wid, version, at in current:
                hit = self._rows.get((db, wid))
                if hit is not None and hit[0] == (version, at):
                    out[wid] = hit[1]
            if len(self._rows) > 4 * len(current) + 20_000:
                self._rows = {k: v for k, v in self._rows.items() if k[0] != db or k[1] in out}
        return out


CACHE = SpanCache()


def intervals(session: Session, org_id: int, since: float) -> list[Interval]:
    """Attempt intervals that were still open at ``since`` or began after it."""
    rows = CACHE.rows(session, org_id, wl_repo.span_versions_since(session, org_id, since))
    return [s for wid in sorted(rows) for s in rows[wid].spans
            if s.end is None or s.end >= since]


def placed(session: Session, org_id: int, pool: str | None = None) -> dict[int, Decoded]:
    """The decoded Starting and Running workloads (of ``pool``, if given), by id."""
    return CACHE.rows(session, org_id,
                      wl_repo.placed_versions(session, org_id, PLACED, pool))
