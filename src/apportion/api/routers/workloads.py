"""Workloads: submit, list, get, cancel, events, why, dry-run."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from apportion.api import filters, links
from apportion.api.deps import (
    CtxDep,
    IdemDep,
    IfMatch,
    PageDep,
    WorkloadId,
    capture_response,
    envelope,
    parse_time,
    read,
    run_command,
)
from apportion.api.schemas import (
    CancelBody,
    DryRunRead,
    Envelope,
    EventRead,
    VictimRead,
    WhyRead,
    WorkloadCreate,
    WorkloadRead,
)
from apportion.domain import limits
from apportion.service import dryrun, jobcontrol
from apportion.service import workloads as svc
from apportion.service.commands import Result, Session, execute
from apportion.service.filters import known_pool, known_team
from apportion.service.views import workload_view

router = APIRouter(tags=["workloads"], dependencies=[Depends(capture_response)])


@router.post("/workloads", status_code=201, response_model=Envelope[WorkloadRead],
             responses={201: {"description": "the workload, Pending",
                              "links": links.WORKLOAD_SUBMITTED}})
def submit(request: Request, ctx: CtxDep, idem: IdemDep, body: WorkloadCreate) -> dict[str, Any]:
    spec = body.to_spec()
    held, array = body.job_options()  # issue 16: submit held, or an array
    return run_command(request, ctx, idem,
                       lambda s: jobcontrol.submit(s, ctx, spec, held=held, array=array),
                       status=201)


@router.get("/workloads", response_model=Envelope[list[WorkloadRead]])
def list_workloads(
    request: Request, ctx: CtxDep, page: PageDep,
    status: Annotated[list[str] | None, Query(description="repeat or comma-separate")] = None,
    team: Annotated[str | None, Query(description="a team and its subtree")] = None,
    class_: Annotated[str | None, Query(alias="class")] = None,
    pool: str | None = None,
    submitted_by: str | None = None,
    submitted_after: Annotated[str | None, Query(description="RFC 3339 or epoch")] = None,
    submitted_before: Annotated[str | None, Query(description="RFC 3339 or epoch")] = None,
    name: str | None = None,
    array: Annotated[int | None, Query(ge=1, le=limits.MAX_INT64,
                                       description="the members of this array")] = None,
) -> dict[str, Any]:
    statuses = filters.many_of("status", status, filters.STATUSES)
    filters.one_of("class", class_, filters.CLASSES)
    f = svc.WorkloadFilter(
        statuses=statuses, wclass=class_, pool=pool, submitted_by=submitted_by,
        submitted_after=parse_time(submitted_after, "submitted_after"),
        submitted_before=parse_time(submitted_before, "submitted_before"), name=name,
        array=array,
    )

    def fn(s: Session) -> Any:
        known_team(s, ctx.org_id, team)
        known_pool(s, ctx.org_id, pool)
        return svc.list_(s, ctx, f, team, page.after, page.limit)

    res = read(request, fn)
    return envelope(request, res.items, next_after=res.next_after, total=res.total)


@router.post("/workloads/dry-run", response_model=Envelope[DryRunRead])
def dry_run(request: Request, ctx: CtxDep, idem: IdemDep, body: WorkloadCreate) -> dict[str, Any]:
    spec = body.to_spec()
    held = body.hold
    if idem is None:
        return envelope(request, read(request,
                                      lambda s: dryrun.dry_run(s, ctx, spec, held=held)))
    cp = request.app.state.control
    result = execute(cp.db, ctx, idem,
                     lambda s: Result(200, dryrun.dry_run(s, ctx, spec, held=held)))
    return envelope(request, result.data, replayed=result.replayed)


@router.get("/workloads/{workload_id}", response_model=Envelope[WorkloadRead])
def get_workload(request: Request, ctx: CtxDep, workload_id: WorkloadId) -> dict[str, Any]:
    return envelope(request, read(request, lambda s: workload_view(svc.get(s, ctx, workload_id))))


@router.post("/workloads/{workload_id}/cancel", response_model=Envelope[WorkloadRead])
def cancel(
    request: Request, ctx: CtxDep, idem: IdemDep, workload_id: WorkloadId,
    body: CancelBody | None = None, if_match: IfMatch = None,
) -> dict[str, Any]:
    version = body.version if body and body.version is not None else if_match
    message = (body.message if body else None) or ""
    return run_command(request, ctx, idem,
                       lambda s: svc.cancel(s, ctx, workload_id, version, message))


@router.get("/workloads/{workload_id}/events", response_model=Envelope[list[EventRead]])
def workload_events(request: Request, ctx: CtxDep, page: PageDep, workload_id: WorkloadId
                    ) -> dict[str, Any]:
    res = read(request, lambda s: svc.events(s, ctx, workload_id, page.after, page.limit))
    return envelope(request, res.items, next_after=res.next_after, total=res.total)


@router.get("/workloads/{workload_id}/victims", response_model=Envelope[list[VictimRead]])
def victims(request: Request, ctx: CtxDep, workload_id: WorkloadId) -> dict[str, Any]:
    """The workloads this one preempted (SPEC 6.5), one entry per attempt it ended."""
    return envelope(request, read(request, lambda s: svc.victims(s, ctx, workload_id)))


@router.get("/workloads/{workload_id}/why", response_model=Envelope[WhyRead])
def why(request: Request, ctx: CtxDep, workload_id: WorkloadId) -> dict[str, Any]:
    return envelope(request, read(request, lambda s: svc.why(s, ctx, workload_id)))
