"""Workload log chunks (bytes shipped by agents, per attempt and pod)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
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



def insert_chunk(
    session: Session, org_id: int, workload_id: int, attempt: int, pod: int, offset: int,
    data: bytes, created_at: float,
) -> bool:
    """Store ``data`` as the pod's log from byte ``offset``, in a savepoint; False
    (nothing stored) if a chunk at that offset already exists."""
    try:
        with session.begin_nested():
            session.add(LogChunkRow(
                org_id=org_id, workload_id=workload_id, attempt=attempt, pod=pod,
                offset=offset, end_offset=offset + len(data), data=data,
                created_at=created_at))
    except IntegrityError:
        return False
    return True
