"""Enumerated query filters, checked one way: an unknown value is a 400
``BAD_REQUEST`` naming the parameter, the allowed values and the closest one
(``?status=Runing`` → ``did you mean 'Running'?``). Filters that name objects
(team, pool) are checked by ``service/filters.py`` (404 with a did-you-mean)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from apportion.api.deps import BadParam
from apportion.domain.errors import did_you_mean
from apportion.domain.lifecycle import Status
from apportion.domain.workload import WorkloadClass

STATUSES = tuple(s.value for s in Status)
CLASSES = tuple(c.value for c in WorkloadClass)
NODE_STATES = ("ready", "cordoned", "down", "unknown")
OUTCOMES = ("ok", "denied", "ignored")
EVENT_TYPES = ("workload.status", "workload.reason", "workload.pods", "node.changed",
               "pool.agent", "team.changed", "reservation.changed")


def one_of(field: str, value: str | None, allowed: Sequence[str]) -> str | None:
    """``value`` if it is None or one of ``allowed``; else BadParam."""
    if value is None or value in allowed:
        return value
    raise BadParam(field, f"{value!r} is not allowed{did_you_mean(value, allowed)}",
                   ", ".join(allowed))


def many_of(field: str, values: Iterable[str] | None, allowed: Sequence[str]) -> list[str]:
    """Repeated or comma-separated values, each one of ``allowed``."""
    out = [v.strip() for raw in (values or []) for v in raw.split(",") if v.strip()]
    for value in out:
        one_of(field, value, allowed)
    return out
