"""Importer of replay's own CSV format (docs/replay.md, "CSV traces").

One job a row; a header names the columns, in any order:

- required: ``submit`` (seconds from the trace's start), ``duration`` (seconds
  of running), ``team`` (a leaf team of the org), ``gpus`` (per pod: 0.25,
  0.5, 0.75 or a whole number);
- optional: ``name`` (default ``job-<row>``), ``class`` (``reserved`` or
  ``elastic``; default: the org's mapping of ``qos``, else elastic),
  ``priority``, ``pods`` (default 1), ``min_pods``, ``cpu`` (cores per pod),
  ``memory_mib`` (per pod), ``gpu_type`` (``|``-separated), ``qos``.

A CSV trace has no nodes: the org file gives the cluster.
"""

from __future__ import annotations

import csv
from decimal import Decimal, InvalidOperation
from pathlib import Path

from apportion.domain.errors import ValidationError
from apportion.replay.trace import Trace, TraceJob

REQUIRED = ("submit", "duration", "team", "gpus")
OPTIONAL = ("name", "class", "priority", "pods", "min_pods", "cpu", "memory_mib", "gpu_type",
            "qos")
CLASSES = ("reserved", "elastic")


def load_csv(path: str) -> Trace:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return parse_csv(fh.read(), source=path)
    except OSError as err:
        raise ValidationError(path, f"cannot read the file: {err.strerror or err}") from None


def parse_csv(text: str, source: str = "trace.csv") -> Trace:
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ValidationError(f"{Path(source).name}: header",
                              f"missing column(s) {', '.join(missing)}",
                              ", ".join(REQUIRED + OPTIONAL))
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if unknown:
        raise ValidationError(f"{Path(source).name}: header",
                              f"unknown column(s) {', '.join(unknown)}",
                              ", ".join(REQUIRED + OPTIONAL))
    jobs = []
    for i, row in enumerate(reader):
        where = f"{Path(source).name}[row {i + 2}]"
        jobs.append(_job(row, i + 2, where))
    jobs.sort(key=lambda j: j.submit)
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ValidationError(f"{Path(source).name}: name", f"{dup!r} appears twice",
                              "unique job names")
    return Trace(source=source, jobs=tuple(jobs), counts={"rows": len(jobs)})


def _int(row: dict[str, str], key: str, where: str, default: int | None = None,
         low: int = 0) -> int:
    raw = (row.get(key) or "").strip()
    if not raw and default is not None:
        return default
    if not raw.lstrip("-").isdigit():
        raise ValidationError(f"{where}.{key}", f"{raw!r} is not a whole number")
    value = int(raw)
    if value < low:
        raise ValidationError(f"{where}.{key}", f"must be >= {low}, got {value}")
    return value


def _milli(row: dict[str, str], key: str, where: str, default: int = 0) -> int:
    raw = (row.get(key) or "").strip()
    if not raw:
        return default
    try:
        value = Decimal(raw) * 1000
    except InvalidOperation:
        raise ValidationError(f"{where}.{key}", f"{raw!r} is not a number") from None
    if value < 0 or value != value.to_integral_value():
        raise ValidationError(f"{where}.{key}", f"{raw!r} is not a multiple of 0.001 >= 0")
    return int(value)


def _job(row: dict[str, str], line: int, where: str) -> TraceJob:
    gpus = _milli(row, "gpus", where)
    if gpus <= 0 or (gpus < 1000 and gpus % 250) or (gpus > 1000 and gpus % 1000):
        raise ValidationError(f"{where}.gpus", f"{row.get('gpus')!r} is not a GPU request",
                              "0.25, 0.5, 0.75 or a whole number")
    wclass = (row.get("class") or "").strip() or None
    if wclass is not None and wclass not in CLASSES:
        raise ValidationError(f"{where}.class", f"{wclass!r} is not a class", "reserved, elastic")
    team = (row.get("team") or "").strip()
    if not team:
        raise ValidationError(f"{where}.team", "is empty", "a leaf team of the org")
    priority = (row.get("priority") or "").strip()
    min_pods = (row.get("min_pods") or "").strip()
    return TraceJob(
        name=(row.get("name") or "").strip() or f"job-{line}",
        submit=_int(row, "submit", where),
        duration=_int(row, "duration", where, low=1),
        gpu_milli=gpus,
        pods=_int(row, "pods", where, default=1, low=1),
        min_pods=None if not min_pods else _int(row, "min_pods", where, low=1),
        cpu_milli=_milli(row, "cpu", where),
        memory_mib=_int(row, "memory_mib", where, default=0),
        gpu_types=tuple(t for t in (row.get("gpu_type") or "").split("|") if t),
        qos=(row.get("qos") or "").strip() or None,
        team=team,
        wclass=wclass,
        priority=None if not priority else _int(row, "priority", where),
    )
