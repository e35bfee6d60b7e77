"""Shipping the pods' log files to the control plane (``POST /v1/agent/logs``).

The executor names each run's log files (``Executor.log_files``); the state
file remembers, per pod, how many bytes the control plane has acknowledged. Each
pass sends the new bytes in chunks of at most :data:`CHUNK` bytes, at most
:data:`PASS_BUDGET` bytes per pass (so a chatty workload cannot stall the
loop). The server's ``next_offset`` is the truth: a retried chunk is skipped by
the server, and after the server lost its logs the agent resends from where the
server's copy ends. A finished run's entry goes once every byte is shipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apportion.agent.model import Run
from apportion.agent.state import AgentState
from apportion.client import ApiError

log = logging.getLogger("apportion.agent")
CHUNK = 256 * 1024
PASS_BUDGET = 4 * 1024 * 1024


def track(state: AgentState, run: Run, files: dict[int, Path]) -> None:
    """Remember the log files of a run this agent starts (or adopts)."""
    if not files or run.run_id in state.logs:
        return
    state.logs[run.run_id] = {
        "workload_id": run.workload_id, "attempt": run.attempt,
        "files": {str(p): str(path) for p, path in sorted(files.items())},
        "offsets": {str(p): 0 for p in sorted(files)}, "is_done": False,
    }


def ship(state: AgentState, send: Callable[..., dict[str, Any]]) -> bool:
    """Send new log bytes of every tracked run; returns whether the state changed.

    ``send(workload_id, attempt, run_id, pod, offset, data)`` is the client call
    (wrapped so that an unreachable server raises and ends this pass: what was
    acknowledged so far is kept).
    """
    budget = PASS_BUDGET
    changed = False
    for rid in sorted(state.logs):
        entry = state.logs[rid]
        try:
            pending, budget, moved = _ship_run(rid, entry, send, budget)
        except ApiError as err:  # a client error: this log can never be accepted
            log.error("%s: logs refused by the control plane: %s; not shipping them", rid, err)
            pending, moved = False, True
            entry["is_done"] = True
        changed |= moved
        if entry["is_done"] and not pending:
            del state.logs[rid]
            changed = True
        if budget <= 0:
            break
    return changed


def _ship_run(rid: str, entry: dict[str, Any], send: Callable[..., dict[str, Any]],
              budget: int) -> tuple[bool, int, bool]:
    """(bytes still unshipped?, budget left, offsets moved?) for one run."""
    pending, moved = False, False
    for pod, path in sorted(entry["files"].items(), key=lambda kv: int(kv[0])):
        offset = int(entry["offsets"].get(pod, 0))
        try:
            size = Path(path).stat().st_size
        except OSError:
            continue  # not written yet (or removed): nothing to ship
        while offset < size and budget > 0:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(min(CHUNK, budget))
            if not data:
                break
            answer = send(entry["workload_id"], entry["attempt"], rid, int(pod), offset, data)
            new = int(answer.get("next_offset", offset + len(data)))
            budget -= len(data)
            if new != offset:
                moved = True
            if new == offset and answer.get("accepted"):
                break  # should not happen; never spin
            offset = new
            entry["offsets"][pod] = offset
        pending |= offset < size
    return pending, budget, moved
