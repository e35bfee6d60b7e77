"""Printing: kubectl-style tables (``table``/``wide``) and the API objects as JSON/YAML.

Tables are plain columns separated by three spaces, never wrapped or truncated (so
``grep``/``awk`` work and golden tests are stable at any terminal width). Colour is added
only on a terminal (Rich decides; ``NO_COLOR`` is respected). ``json``/``yaml`` print the
API objects exactly as the server sent them.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from rich.console import Console
from rich.text import Text

from apportion.domain.host import format_memory_mib

STATUS_STYLES = {
    "Pending": "yellow", "Queued": "yellow", "Starting": "cyan", "Running": "green",
    "Completed": "blue", "Failed": "red", "Preempted": "magenta", "Cancelled": "dim",
}
TEAM_PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan",
                "bright_magenta", "bright_green", "bright_yellow", "bright_blue", "bright_red")


class Format(enum.StrEnum):
    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: its stable ``header``, how to read a cell from an object, and
    whether it appears only with ``-o wide``."""

    header: str
    get: Callable[[dict[str, Any]], Any]
    is_wide_only: bool = False
    style: Callable[[str], str | None] | None = None


def stdout() -> Console:
    """A console on the current ``sys.stdout`` (created per call, so test runners that
    swap ``sys.stdout`` see the output)."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=True)


def stderr() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def cell(value: Any) -> str:
    """How a value reads in a table: ``-`` for nothing, numbers without trailing zeros."""
    if value is None or value == "" or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return fmt_gpus(value)
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def fmt_gpus(value: float | int | None) -> str:
    """GPU amounts: ``8``, ``0.5``, ``28.8``, at most three decimals."""
    if value is None:
        return "-"
    text = f"{float(value):.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def fmt_memory_mib(value: int | float | None) -> str:
    """Host memory as Kubernetes writes it (``domain.host.format_memory_mib``)."""
    return format_memory_mib(value)


def fmt_gpu_types(value: str | list[str] | None) -> str:
    """A workload's ``gpu_type``: ``h100``, ``v100-16g,v100-32g`` (any of them), ``-``."""
    if not value:
        return "-"
    return value if isinstance(value, str) else ",".join(str(v) for v in value)


def gpus_phrase(value: float | int | None) -> str:
    """``1 GPU``, ``0.5 GPUs``, ``8 GPUs`` (``-`` GPUs when unknown)."""
    return f"{fmt_gpus(value)} GPU{'' if value == 1 else 's'}"


def team_style(team: str) -> str:
    """A stable colour per team name (same team, same colour, in every command)."""
    return TEAM_PALETTE[sum(team.encode()) % len(TEAM_PALETTE)]


def status_style(status: str) -> str | None:
    return STATUS_STYLES.get(status)


def table_lines(
    columns: Sequence[Column], rows: Iterable[dict[str, Any]], *,
    is_wide: bool = False, has_headers: bool = True, widths: list[int] | None = None,
) -> list[Text]:
    """Lay ``rows`` out under ``columns``; returns one styled line per row.

    ``widths`` (one per shown column) is read and widened in place: a watch
    passes the same list for every row it prints, so rows stay under the header."""
    shown = [c for c in columns if is_wide or not c.is_wide_only]
    cells = [[cell(c.get(row)) for c in shown] for row in rows]
    grid = ([[c.header for c in shown]] if has_headers else []) + cells
    found = [max((len(r[i]) for r in grid), default=0) for i in range(len(shown))]
    if widths is None:
        widths = found
    else:
        widths[:] = [max(a, b) for a, b in zip(widths or [0] * len(found), found, strict=True)]
    lines: list[Text] = []
    for n, row_cells in enumerate(grid):
        is_header = has_headers and n == 0
        line = Text()
        for i, (col, value) in enumerate(zip(shown, row_cells, strict=True)):
            last = i == len(shown) - 1
            padded = value if last else value.ljust(widths[i]) + "   "
            style = None if is_header or col.style is None else col.style(value)
            line.append(padded, style=style or ("bold" if is_header else None))
        line.rstrip()
        lines.append(line)
    return lines


def print_table(
    columns: Sequence[Column], rows: Iterable[dict[str, Any]], *,
    is_wide: bool = False, has_headers: bool = True, console: Console | None = None,
    widths: list[int] | None = None,
) -> None:
    out = console or stdout()
    for line in table_lines(columns, rows, is_wide=is_wide, has_headers=has_headers,
                            widths=widths):
        out.print(line)


def print_data(data: Any, fmt: Format) -> None:
    """JSON (indented, key order as sent) or YAML (block style) of API objects."""
    if fmt is Format.JSON:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    sys.stdout.flush()


def emit(
    data: Any, fmt: Format, columns: Sequence[Column], *, has_headers: bool = True,
    widths: list[int] | None = None,
) -> None:
    """Print a list (or one object) as ``fmt``: table/wide via ``columns``, else JSON/YAML."""
    if fmt in (Format.JSON, Format.YAML):
        print_data(data, fmt)
        return
    rows = data if isinstance(data, list) else [data]
    print_table(columns, rows, is_wide=fmt is Format.WIDE, has_headers=has_headers,
                widths=widths)
