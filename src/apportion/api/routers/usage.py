"""Accounting: ``GET /v1/usage`` (``service/usage.py`` is the one definition,
shared with ``apportion usage`` and the dashboard's usage page)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from apportion.api.deps import CtxDep, capture_response, envelope, parse_time, read
from apportion.api.schemas import Envelope
from apportion.api.schemas_usage import UsageReport
from apportion.service import usage

router = APIRouter(tags=["usage"], dependencies=[Depends(capture_response)])
TIME = Query(max_length=64, description="RFC 3339 or epoch seconds")


@router.get("/usage", response_model=Envelope[UsageReport])
def get_usage(
    request: Request, ctx: CtxDep,
    since: Annotated[str | None, TIME] = None,
    until: Annotated[str | None, TIME] = None,
    team: Annotated[str | None, Query(max_length=63)] = None,
    user: Annotated[str | None, Query(max_length=255)] = None,
    pool: Annotated[str | None, Query(max_length=255)] = None,
    group_by: Annotated[str | None, Query(
        max_length=64, description="comma-separated: team, user, pool (default team)")] = None,
) -> dict[str, Any]:
    start, end = parse_time(since, "since"), parse_time(until, "until")
    groups = usage.parse_group_by(group_by)
    wanted = usage.Filters(team=team, user=user, pool=pool)
    data = read(request, lambda s: usage.checked_usage(
        s, ctx, since=start, until=end, group_by=groups, filters=wanted))
    return envelope(request, data)
