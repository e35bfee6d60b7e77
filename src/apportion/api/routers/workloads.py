"""Workloads: submit, list, get, cancel, events, why, dry-run."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from apportion.api.deps import (
    CtxDep,
    IdemDep,
    PageDep,
    body_of,
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
    WhyRead,
    WorkloadCreate,
    WorkloadRead,
)
from apportion.service import dryrun
from apportion.service import workloads as svc
from apportion.service.commands import Result, execute
from apportion.service.views import workload_view
from apportion.store.repos.workloads import WorkloadFilter

router = APIRouter(tags=["workloads"])
STATUSES = ("Pending", "Queued", "Starting", "Running", "Completed", "Failed", "Preempted",
            "Cancelled")


@router.post("/workloads", status_code=201, response_model=Envelope[WorkloadRead])
def submit(request: Request, ctx: CtxDep, idem: IdemDep, body: WorkloadCreate) -> JSONResponse:
    data = body_of(body)
    return run_command(request, ctx, idem, lambda s: svc.submit(s, ctx, data), status=201)


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
) -> JSONResponse:
    statuses = [s.strip() for v in (status or []) for s in v.split(",") if s.strip()]
    from apportion.api.deps import BadParam

    for s_ in statuses:
        if s_ not in STATUSES:
            raise BadParam("status", f"{s_!r} is not a status", ", ".join(STATUSES))
    if class_ is not None and class_ not in ("reserved", "elastic"):
        raise BadParam("class", f"{class_!r} is not a class", "reserved, elastic")
    f = WorkloadFilter(
        statuses=statuses, wclass=class_, pool=pool, submitted_by=submitted_by,
        submitted_after=parse_time(submitted_after, "submitted_after"),
        submitted_before=parse_time(submitted_before, "submitted_before"), name=name,
    )
    res = read(request, lambda s: svc.list_(s, ctx, f, team, page.after, page.limit))
    return envelope(request, res.items, next_after=res.next_after, total=res.total)


@router.post("/workloads/dry-run", response_model=Envelope[DryRunRead])
def dry_run(request: Request, ctx: CtxDep, idem: IdemDep, body: WorkloadCreate) -> JSONResponse:
    data = body_of(body)
    if idem is None:
        return envelope(request, read(request, lambda s: dryrun.dry_run(s, ctx, data)))
    cp = request.app.state.control
    result = execute(cp.db, ctx, idem, lambda s: Result(200, dryrun.dry_run(s, ctx, data)))
    return envelope(request, result.data, replayed=result.replayed)


@router.get("/workloads/{workload_id}", response_model=Envelope[WorkloadRead])
def get_workload(request: Request, ctx: CtxDep, workload_id: int) -> JSONResponse:
    return envelope(request, read(request, lambda s: workload_view(svc.get(s, ctx, workload_id))))


@router.post("/workloads/{workload_id}/cancel", response_model=Envelope[WorkloadRead])
def cancel(
    request: Request, ctx: CtxDep, idem: IdemDep, workload_id: int,
    body: CancelBody | None = None,
) -> JSONResponse:
    version = body.version if body else None
    message = (body.message if body else None) or ""
    if version is None and request.headers.get("if-match"):
        version = int(request.headers["if-match"])
    return run_command(request, ctx, idem,
                       lambda s: svc.cancel(s, ctx, workload_id, version, message))


@router.get("/workloads/{workload_id}/events", response_model=Envelope[list[EventRead]])
def workload_events(request: Request, ctx: CtxDep, page: PageDep, workload_id: int
                    ) -> JSONResponse:
    res = read(request, lambda s: svc.events(s, ctx, workload_id, page.after, page.limit))
    return envelope(request, res.items, next_after=res.next_after, total=res.total)


@router.get("/workloads/{workload_id}/why", response_model=Envelope[WhyRead])
def why(request: Request, ctx: CtxDep, workload_id: int) -> JSONResponse:
    return envelope(request, read(request, lambda s: svc.why(s, ctx, workload_id)))
