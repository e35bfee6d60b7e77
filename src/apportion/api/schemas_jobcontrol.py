"""Request and response models of job control (issue 16) that are not part of
a workload's own models (those are in ``schemas.py``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ArrayCancelRead(BaseModel):
    array_id: int
    members: int = Field(description="members of the array")
    cancelled: list[int] = Field(description="ids of the members this call cancelled")
