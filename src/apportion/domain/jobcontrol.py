"""Job control (issue 16): time limits, dependencies and arrays, as users
write them, parsed into plain values. Pure: the gating of waiting work lives
in ``engine/gating.py``.

- Time limits take Slurm's formats (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``,
  ``D-HH:MM``, ``D-HH:MM:SS``; a bare number means minutes, as in Slurm) and
  unit forms (``90s``, ``90m``, ``4h``, ``2d``, ``1h30m``); the REST API takes
  integer seconds.
- A dependency is ``ID[:ok|:any|:notok]`` (``ok`` if not given).
- An array is ``0-99``, ``1,3,5-7``, ``0-99:2`` (a step), each with an optional
  ``%N``: at most N members running at once.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from apportion.domain import limits
from apportion.domain.errors import ValidationError

#: members of one array
MAX_ARRAY_SIZE = 10_000
#: the largest array index
MAX_ARRAY_INDEX = 1_000_000
#: dependencies of one workload
MAX_DEPENDENCIES = 100

TIME_FORMATS = ("MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (a bare number is minutes), "
                "or units such as 90s, 90m, 4h, 2d, 1h30m")
ARRAY_FORMATS = ("indexes such as 0-99, 1,3,5-7 or 0-99:2, optionally with %N (at most N "
                 f"running at once); at most {MAX_ARRAY_SIZE} members, indexes "
                 f"0..{MAX_ARRAY_INDEX}")


class DepCondition(enum.StrEnum):
    """When a dependency is met (Slurm's afterok, afterany, afternotok)."""

    OK = "ok"  # the workload completed successfully
    ANY = "any"  # the workload ended, however
    NOTOK = "notok"  # the workload ended other than Completed


@dataclass(frozen=True, slots=True, order=True)
class Dependency:
    workload_id: int
    condition: DepCondition = DepCondition.OK

    def to_json(self) -> dict[str, object]:
        return {"id": self.workload_id, "condition": self.condition.value}

    def __str__(self) -> str:
        return f"{self.workload_id}:{self.condition.value}"


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """The indexes of an array's members, in order, and its %N limit."""

    indexes: tuple[int, ...]
    limit: int | None = None


_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNITS_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_time_limit(value: object, fname: str = "time_limit") -> int:
    """Seconds from a Slurm time (a string) or an integer of seconds; > 0."""
    if isinstance(value, bool):
        raise ValidationError(fname, f"must be a time limit, got {value!r}", TIME_FORMATS)
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, str):
        seconds = _parse_time_text(value.strip().lower(), fname)
    else:
        raise ValidationError(fname, f"must be a time limit, got {value!r}", TIME_FORMATS)
    if not 1 <= seconds <= limits.MAX_SECONDS:
        raise ValidationError(fname, f"{seconds} s is out of range",
                              f"1..{limits.MAX_SECONDS} seconds")
    return seconds


def _parse_time_text(text: str, fname: str) -> int:
    def bad() -> ValidationError:
        return ValidationError(fname, f"{text!r} is not a time limit", TIME_FORMATS)

    if not text:
        raise bad()
    if text[-1] in _UNIT:
        m = _UNITS_RE.match(text)
        if m is None or not any(m.groups()):
            raise bad()
        d, h, mi, s = (int(g) if g else 0 for g in m.groups())
        return d * 86400 + h * 3600 + mi * 60 + s
    days = 0
    rest = text
    if "-" in text:
        day_text, rest = text.split("-", 1)
        if not day_text.isdigit() or not rest:
            raise bad()
        days = int(day_text)
    parts = rest.split(":")
    if not all(p.isdigit() and len(p) <= 12 for p in parts) or len(parts) > 3:
        raise bad()
    nums = [int(p) for p in parts]
    if "-" in text:  # D-HH, D-HH:MM, D-HH:MM:SS
        h, mi, s = [*nums, 0, 0][:3]
        return days * 86400 + h * 3600 + mi * 60 + s
    if len(nums) == 1:  # MM
        return nums[0] * 60
    if len(nums) == 2:  # MM:SS
        return nums[0] * 60 + nums[1]
    return nums[0] * 3600 + nums[1] * 60 + nums[2]  # HH:MM:SS


def format_seconds(seconds: int) -> str:
    """``1h30m``, ``2d``, ``45s``: a time limit as users write it."""
    if seconds <= 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, seconds = divmod(seconds, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)


def parse_dependency(value: object, fname: str = "after") -> Dependency:
    """``ID``, ``ID:ok|any|notok``, or ``{id, condition}``."""
    allowed = "ID[:ok|:any|:notok], or {id, condition}"
    if isinstance(value, Dependency):
        return value
    cond: object = "ok"
    if isinstance(value, dict):
        extra = set(value) - {"id", "condition"}
        if extra:
            raise ValidationError(f"{fname}.{sorted(extra)[0]}", "unknown key", "id, condition")
        wid: object = value.get("id")
        cond = value.get("condition") or "ok"
    elif isinstance(value, str):
        wid, _, c = value.strip().partition(":")
        cond = c or "ok"
        if isinstance(wid, str) and wid.isdigit():
            wid = int(wid)
    else:
        wid = value
    if isinstance(wid, bool) or not isinstance(wid, int) or not 1 <= wid <= limits.MAX_INT64:
        raise ValidationError(fname, f"{value!r} does not name a workload id", allowed)
    try:
        condition = DepCondition(str(cond).lower())
    except ValueError:
        raise ValidationError(fname, f"{cond!r} is not a condition", "ok, any, notok") from None
    return Dependency(wid, condition)


def parse_dependencies(value: object, fname: str = "after") -> tuple[Dependency, ...]:
    """A list of dependencies (or one), each id once, sorted."""
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else [value]
    if len(items) > MAX_DEPENDENCIES:
        raise ValidationError(fname, f"{len(items)} dependencies",
                              f"at most {MAX_DEPENDENCIES}")
    deps = [parse_dependency(v, f"{fname}[{i}]") for i, v in enumerate(items)]
    ids = [d.workload_id for d in deps]
    if len(set(ids)) != len(ids):
        raise ValidationError(fname, "a workload is named twice", "each workload id once")
    return tuple(sorted(deps))


_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def parse_array(value: object, fname: str = "array") -> ArraySpec:
    """``0-99%10``, ``1,3,5-7``, ``0-15:4``: the member indexes and the limit."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(fname, f"must be a string, got {value!r}", ARRAY_FORMATS)
    text = value.strip()
    limit: int | None = None
    if "%" in text:
        text, _, lim = text.partition("%")
        if not lim.isdigit() or int(lim) < 1:
            raise ValidationError(fname, f"%{lim} is not a limit", "%N with N >= 1")
        limit = int(lim)
    indexes: set[int] = set()
    for part in text.split(","):
        m = _RANGE_RE.match(part.strip())
        if m is None:
            raise ValidationError(fname, f"{part!r} is not an index or range", ARRAY_FORMATS)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo or step < 1 or hi > MAX_ARRAY_INDEX:
            raise ValidationError(fname, f"{part!r} is not a valid range", ARRAY_FORMATS)
        if len(indexes) + (hi - lo) // step + 1 > MAX_ARRAY_SIZE:
            raise ValidationError(fname, f"{value!r} has more than {MAX_ARRAY_SIZE} members",
                                  f"at most {MAX_ARRAY_SIZE} members")
        indexes.update(range(lo, hi + 1, step))
    if len(indexes) > MAX_ARRAY_SIZE:
        raise ValidationError(fname, f"{value!r} has more than {MAX_ARRAY_SIZE} members",
                              f"at most {MAX_ARRAY_SIZE} members")
    return ArraySpec(tuple(sorted(indexes)), limit)


def array_text(spec: ArraySpec) -> str:
    """``0-99%10``-style text of an array (ranges collapsed)."""
    parts: list[str] = []
    idx = list(spec.indexes)
    i = 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        parts.append(str(idx[i]) if i == j else f"{idx[i]}-{idx[j]}")
        i = j + 1
    return ",".join(parts) + (f"%{spec.limit}" if spec.limit else "")
