"""Keyset pagination over an integer id column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next_after: int | None
    total: int


def paginate(
    session: Session, stmt: Select[Any], id_col: Any, after: int | None, limit: int,
    *, descending: bool = False,
) -> Page[Any]:
    """Rows of ``stmt`` ordered by ``id_col`` after the cursor, at most ``limit``.

    ``total`` counts every row matching ``stmt`` (without the cursor).
    """
    total = session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery())) or 0
    q = stmt
    if after is not None:
        q = q.where(id_col < after) if descending else q.where(id_col > after)
    q = q.order_by(id_col.desc() if descending else id_col).limit(limit + 1)
    rows = list(session.scalars(q))
    has_more = len(rows) > limit
    rows = rows[:limit]
    next_after = None
    if has_more and rows:
        next_after = int(getattr(rows[-1], id_col.key))
    return Page(rows, next_after, int(total))
