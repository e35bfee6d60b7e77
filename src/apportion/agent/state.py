"""The agent's state file: what survives a restart of the agent.

One small JSON file per agent (``<data dir>/agent-<pool>.json``), rewritten
atomically (temporary file, fsync, rename) after every change, holding:

- ``cursor``: the id of the last decision applied;
- ``runs``: every run this agent started and has not finished with, by run id,
  with its phase (``waiting``: a start held back until the runs stopping on its
  devices have exited, not yet handed to the executor; ``active``;
  ``stopping``), the last status reported and,
  once stopping, ``stop_at``: the wall-clock time (agent's clock) by which the
  executor must have ended it (the decision's grace), so that a restarted agent
  re-arms the stop with the grace that is left instead of adopting a run that
  was being stopped as if it were still wanted;
- ``outbox``: outcomes (and ``running`` notices) not yet acknowledged by the
  control plane, in the order they happened;
- ``logs``: per run, the log files of its pods and how many bytes of each the
  control plane has acknowledged (shipping resumes there after an outage or a
  restart); an entry goes once its run is finished and every byte is shipped;
- ``done``: run ids finished recently (bounded), so a decision replayed after a
  crash never starts a finished run a second time.

Invariant: a run is written here *before* the executor is asked to start it,
so a crash between the two leaves a record and no duplicate start (executors
are idempotent by run id).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apportion.agent.model import Run, run_from_json, run_to_json

DONE_KEPT = 2000
FORMAT = 1


@dataclass(slots=True)
class RunRecord:
    run: Run
    phase: str = "active"  # waiting | active | stopping
    reported: str | None = None  # last status queued for the control plane
    #: once stopping: wall-clock deadline of the stop (agent's clock); None = at once
    stop_at: float | None = None


@dataclass(slots=True)
class AgentState:
    pool: str
    cursor: int | None = None
    runs: dict[str, RunRecord] = field(default_factory=dict)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    #: run id -> {"workload_id", "attempt", "files": {pod: path}, "offsets": {pod: int},
    #: "is_done": bool}; pods are strings (JSON keys)
    logs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def mark_done(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        if run_id in self.logs:
            self.logs[run_id]["is_done"] = True
        if run_id not in self.done:
            self.done.append(run_id)
            del self.done[:-DONE_KEPT]

    def is_known(self, run_id: str) -> bool:
        return run_id in self.runs or run_id in self.done


class StateFile:
    """Loads and saves :class:`AgentState` at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, pool: str) -> AgentState:
        if not self.path.exists():
            return AgentState(pool=pool)
        raw = json.loads(self.path.read_text())
        if raw.get("pool") != pool:
            raise ValueError(f"state file {self.path} belongs to pool {raw.get('pool')!r}, "
                             f"not {pool!r}; use another --data-dir")
        runs = {
            rid: RunRecord(run_from_json(r["run"]), r.get("phase", "active"), r.get("reported"),
                           None if r.get("stop_at") is None else float(r["stop_at"]))
            for rid, r in (raw.get("runs") or {}).items()
        }
        return AgentState(pool=pool, cursor=raw.get("cursor"), runs=runs,
                          outbox=list(raw.get("outbox") or []),
                          done=list(raw.get("done") or []), logs=dict(raw.get("logs") or {}))

    def save(self, state: AgentState) -> None:
        body = {
            "format": FORMAT, "pool": state.pool, "cursor": state.cursor,
            "runs": {rid: {"run": run_to_json(r.run), "phase": r.phase, "reported": r.reported,
                           "stop_at": r.stop_at}
                     for rid, r in sorted(state.runs.items())},
            "outbox": state.outbox, "done": state.done, "logs": state.logs,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".agent-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(body, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
