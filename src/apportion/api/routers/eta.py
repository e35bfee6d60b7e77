"""Start-time estimates: ``GET /v1/workloads/{id}/eta`` and ``GET /v1/eta``
(``service/eta.py``: the live snapshot run forward by the engine's own cycle)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from apportion.api.deps import CtxDep, WorkloadId, capture_response, envelope, read
from apportion.api.schemas import Envelope
from apportion.api.schemas_usage import EtaList, EtaRead
from apportion.service import eta

router = APIRouter(tags=["workloads"], dependencies=[Depends(capture_response)])


@router.get("/workloads/{workload_id}/eta", response_model=Envelope[EtaRead])
def workload_eta(request: Request, ctx: CtxDep, workload_id: WorkloadId) -> dict[str, Any]:
    """When the workload is estimated to start, the workloads whose end frees
    its space, and the assumption the estimate rests on."""
    return envelope(request, read(request, lambda s: eta.workload_eta(s, ctx, workload_id)))


@router.get("/eta", response_model=Envelope[EtaList])
def pool_eta(
    request: Request, ctx: CtxDep,
    pool: Annotated[str | None, Query(max_length=255, description="one pool (default: all)")]
    = None,
) -> dict[str, Any]:
    """Estimates of all waiting work (of ``pool``), from one forward run per pool."""
    return envelope(request, read(request, lambda s: eta.pool_etas(s, ctx, pool)))
