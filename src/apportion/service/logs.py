"""Workload logs: agents append the bytes of their pods' log files; users read
them (SPEC 3: what the program printed, per attempt and pod).

Storage is the ``log_chunks`` table, so every server of a PostgreSQL-backed
control plane sees the same logs. A pod's log is a byte stream; an agent sends
``(offset, bytes)`` and the server appends only at the current end:

- ``offset`` == end: appended;
- ``offset`` < end: the bytes already stored are skipped (a retry after a lost
  answer is harmless), any new tail is appended;
- ``offset`` > end: refused (``accepted: false``) with ``next_offset`` = end, so
  the agent resends from there (e.g. the server's database was replaced).

Every answer carries ``next_offset``: the agent continues from it.
"""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass
from typing import Any

from apportion.domain.errors import ValidationError
from apportion.domain.lifecycle import Status
from apportion.service.authz import require_agent
from apportion.service.context import Ctx
from apportion.service.inputs import LogChunkIn
from apportion.service.workloads import get as get_workload
from apportion.service.workloads import run_id
from apportion.store.db import Session
from apportion.store.repos import logs as repo
from apportion.store.repos import workloads as wl_repo

#: largest chunk one request may carry (decoded bytes)
MAX_CHUNK = 256 * 1024
#: largest read of one pod's log in one request
MAX_READ = 1024 * 1024


def append(session: Session, ctx: Ctx, chunk: LogChunkIn, max_bytes: int) -> dict[str, Any]:
    """Append one chunk of a pod's log (agent of the workload's pool only)."""
    pool = ctx.actor.pool or ""
    require_agent(ctx, pool, "agent.logs")
    wid, attempt, pod, offset = chunk.workload_id, chunk.attempt, chunk.pod, chunk.offset
    try:
        data = base64.b64decode(chunk.data, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError("data", "is not base64", "base64 of the log bytes") from None
    if len(data) > MAX_CHUNK:
        raise ValidationError("data", f"chunk of {len(data)} bytes is too large",
                              f"at most {MAX_CHUNK} bytes per request")
    row = wl_repo.get_workload(session, ctx.org_id, wid)
    if row.pool != pool and not any(a.get("pool") == pool for a in row.attempts or []):
        require_agent(ctx, row.pool or "", "agent.logs")
    rid = chunk.run_id
    if rid is not None and rid != run_id(wid, attempt):
        raise ValidationError("run_id", f"{rid!r} does not match attempt {attempt}",
                              run_id(wid, attempt))
    if attempt > row.attempt or pod >= int(row.spec.get("pods") or 1):
        pods = int(row.spec.get("pods") or 1)
        raise ValidationError("attempt" if attempt > row.attempt else "pod",
                              "no such attempt or pod of this workload",
                              f"attempt 1..{row.attempt}, pod 0..{pods - 1}")
    end = repo.log_end(session, wid, attempt, pod)
    out = {"workload_id": wid, "attempt": attempt, "pod": pod}
    if end >= max_bytes:  # full: accept and drop, so the agent moves on
        return {**out, "accepted": True, "next_offset": max(end, offset + len(data)),
                "note": f"log limit of {max_bytes} bytes reached; the rest is dropped"}
    if offset > end:
        return {**out, "accepted": False, "next_offset": end,
                "note": f"offset {offset} is past the stored end {end}; resend from there"}
    new = data[end - offset:]
    dropped = len(new) > max_bytes - end
    new = new[:max_bytes - end]
    if new and not repo.insert_chunk(session, ctx.org_id, wid, attempt, pod, end, new,
                                     time.time()):
        # A concurrent copy of this request (a retry while the first was still
        # running) appended at the same offset first: answer from what is stored.
        return {**out, "accepted": True, "next_offset": repo.log_end(session, wid, attempt, pod),
                "note": "appended concurrently; continue from next_offset"}
    note = f"log limit of {max_bytes} bytes reached; the rest is dropped" if dropped else ""
    # next_offset covers dropped bytes too, so the agent moves on past them.
    return {**out, "accepted": True, "next_offset": max(end, offset + len(data)), "note": note}


@dataclass(frozen=True, slots=True)
class LogSlice:
    """What a read returns: the bytes per pod, where each ends, and whether the
    attempt has ended (so a follower can stop)."""

    attempt: int
    parts: list[tuple[int, bytes, int]]  # (pod, bytes, next offset)
    is_ended: bool
    pods: int


def read(
    session: Session, ctx: Ctx, workload_id: int, attempt: int | None, pod: int | None,
    offsets: dict[int, int], limit: int,
) -> LogSlice:
    """Up to ``limit`` bytes per pod from ``offsets[pod]`` (default 0), for the
    given attempt (default the latest) and pod (default every pod). Same
    authorization as reading the workload."""
    row = get_workload(session, ctx, workload_id)
    number = row.attempt if attempt is None else attempt
    if not 1 <= number <= row.attempt:
        raise ValidationError("attempt", f"workload {workload_id} has no attempt {number}",
                              f"1..{row.attempt}")
    pods = int(row.spec.get("pods") or 1)
    if pod is not None and not 0 <= pod < pods:
        raise ValidationError("pod", f"workload {workload_id} has no pod {pod}",
                              f"0..{pods - 1}")
    wanted = [pod] if pod is not None else list(range(pods))
    parts = []
    for p in wanted:
        start = offsets.get(p, 0)
        data = repo.read_log(session, workload_id, number, p, start, limit)
        parts.append((p, data, start + len(data)))
    is_ended = number < row.attempt or Status(row.status).is_terminal
    return LogSlice(number, parts, is_ended, pods)
