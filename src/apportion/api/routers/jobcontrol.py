"""Job control (issue 16): hold and release a workload, cancel an array.

Submitting held (``hold``), an array (``array``), with dependencies
(``after``) or a time limit (``time_limit``) goes through ``POST /v1/workloads``;
``GET /v1/workloads?array=ID`` lists an array's members.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request

from apportion.api.deps import CtxDep, IdemDep, WorkloadId, capture_response, run_command
from apportion.api.schemas import ArrayCancelBody, Envelope, WorkloadRead
from apportion.api.schemas_jobcontrol import ArrayCancelRead
from apportion.domain import limits
from apportion.service import jobcontrol

router = APIRouter(tags=["workloads"], dependencies=[Depends(capture_response)])

ArrayId = Annotated[int, Path(ge=1, le=limits.MAX_INT64,
                              description="the array's id (its first member's id)")]


@router.post("/workloads/{workload_id}/hold", response_model=Envelope[WorkloadRead])
def hold(request: Request, ctx: CtxDep, idem: IdemDep, workload_id: WorkloadId
         ) -> dict[str, Any]:
    """Hold a Pending or Queued workload: it waits with reason HELD until
    released (its submitter, a lead of its team, or an org admin)."""
    return run_command(request, ctx, idem,
                       lambda s: jobcontrol.set_held(s, ctx, workload_id, True))


@router.post("/workloads/{workload_id}/release", response_model=Envelope[WorkloadRead])
def release(request: Request, ctx: CtxDep, idem: IdemDep, workload_id: WorkloadId
            ) -> dict[str, Any]:
    """Release a held workload: the next cycle schedules it as any other."""
    return run_command(request, ctx, idem,
                       lambda s: jobcontrol.set_held(s, ctx, workload_id, False))


@router.post("/arrays/{array_id}/cancel", response_model=Envelope[ArrayCancelRead])
def cancel_array(request: Request, ctx: CtxDep, idem: IdemDep, array_id: ArrayId,
                 body: ArrayCancelBody | None = None) -> dict[str, Any]:
    """Cancel every member of the array that has not ended."""
    message = (body.message if body else None) or ""
    return run_command(request, ctx, idem,
                       lambda s: jobcontrol.cancel_array(s, ctx, array_id, message))
