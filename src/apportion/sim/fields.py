"""Small readers for scenario fields: each error names the field's path in the
file (``teams[0].children[1].reservations.main``) and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from apportion.domain import limits
from apportion.domain.errors import ValidationError, did_you_mean, unknown_key
from apportion.domain.host import ALLOWED_CPU, parse_cpu, parse_memory_mib


def join(path: str, key: str | int) -> str:
    """``path`` extended by a key (``.key``) or a list index (``[i]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def mapping(value: object, path: str, allowed: Iterable[str], what: str) -> Mapping[str, Any]:
    """``value`` as a mapping whose keys are all in ``allowed``.

    An unknown key is an error naming the closest allowed key.
    """
    keys = tuple(allowed)
    if not isinstance(value, Mapping):
        raise ValidationError(
            path, f"must be a mapping ({what}), got {_kind(value)}", ", ".join(keys)
        )
    for key in value:
        if not isinstance(key, str) or key not in keys:
            raise unknown_key(join(path, str(key)), str(key), keys)
    return value


def sequence(value: object, path: str, what: str) -> list[Any]:
    """``value`` as a list (a missing list is empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError(path, f"must be a list of {what}, got {_kind(value)}")
    return value


def text(value: object, path: str, what: str = "a non-empty string") -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(path, f"must be {what}, got {value!r}")
    return value


def integer(value: object, path: str, lo: int = 0, hi: int | None = limits.MAX_INT64) -> int:
    """An integer within ``lo..hi`` (a float with no fraction is accepted);
    ``hi`` defaults to the largest integer any store column holds."""
    allowed = f"an integer >= {lo}" if hi is None else f"an integer {lo}..{hi}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(path, f"must be an integer, got {value!r}", allowed)
    if value < lo:
        raise ValidationError(path, f"must be >= {lo}, got {value}", allowed)
    if hi is not None and value > hi:
        raise ValidationError(path, f"must be <= {hi}, got {value}", allowed)
    return value


def cpu(value: object, path: str) -> int:
    """Cores in steps of 0.001 (``8``, ``0.5``) -> milli-CPU."""
    try:
        return parse_cpu(value, path)
    except ValidationError:
        raise ValidationError(path, f"must be a multiple of 0.001 ≥ 0, got {value!r}",
                              ALLOWED_CPU) from None


def memory_mib(value: object, path: str) -> int:
    """A whole number of MiB >= 0."""
    return parse_memory_mib(value, path)


def choice(value: object, path: str, allowed: Iterable[str]) -> str:
    """``value`` if it is one of ``allowed`` (a word, not a name of something)."""
    words = tuple(allowed)
    if not isinstance(value, str) or value not in words:
        raise ValidationError(path, f"{value!r} is not allowed{did_you_mean(str(value), words)}",
                              ", ".join(words))
    return value


def labels(value: object, path: str) -> dict[str, str]:
    """A mapping of label keys to values; scalar values become strings."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(path, f"must be a mapping of label keys to values, got {value!r}")
    out: dict[str, str] = {}
    for key, val in value.items():
        if not isinstance(key, str) or isinstance(val, Mapping | list) or val is None:
            raise ValidationError(join(path, str(key)), "labels are key: value strings")
        out[key] = str(val).lower() if isinstance(val, bool) else str(val)
    return out


def one_of(name: object, path: str, known: Iterable[str], what: str) -> str:
    """``name`` if it is one of ``known``, else an error with a suggestion."""
    names = tuple(known)
    word = text(name, path, f"the name of {what}")
    if word not in names:
        shown = ", ".join(sorted(names)[:12]) or "none defined"
        raise ValidationError(
            path, f"no {what} named {word!r}{did_you_mean(word, names)}", shown
        )
    return word


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"{value!r}"
