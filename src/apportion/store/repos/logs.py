"""Workload log chunks (bytes shipped by agents, per attempt and pod)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from apportion.store.models import LogChunkRow


def log_end(session: Session, workload_id: int, attempt: int, pod: int) -> int:
    """Bytes stored so far for this pod's log (the next offset to append at)."""
    q = select(func.max(LogChunkRow.end_offset)).where(
        LogChunkRow.workload_id == workload_id, LogChunkRow.attempt == attempt,
        LogChunkRow.pod == pod)
    return int(session.scalar(q) or 0)


def log_pods(session: Session, workload_id: int, attempt: int) -> list[int]:
    """Pods of this attempt with a stored log, ascending."""
    q = (select(LogChunkRow.pod).distinct()
         .where(LogChunkRow.workload_id == workload_id, LogChunkRow.attempt == attempt)
         .order_by(LogChunkRow.pod))
    return [int(p) for p in session.scalars(q)]


def read_log(
    session: Session, workload_id: int, attempt: int, pod: int, offset: int, limit: int
) -> bytes:
    """Up to ``limit`` bytes of the pod's log from byte ``offset``."""
    q = (select(LogChunkRow)
         .where(LogChunkRow.workload_id == workload_id, LogChunkRow.attempt == attempt,
                LogChunkRow.pod == pod, LogChunkRow.end_offset > offset,
                LogChunkRow.offset < offset + limit)
         .order_by(LogChunkRow.offset))
    out = bytearray()
    for row in session.scalars(q):
        start = max(0, offset - row.offset)
        out += row.data[start:]
    return bytes(out[:limit])

