"""The sim executor: virtual nodes, workloads that "run" for their duration.

Nothing is executed. A run is ``starting`` for ``start_delay`` seconds, then
``running`` for its ``duration`` seconds, then ``completed``; all times are
divided by ``speed`` (speed 10 → a 60 s workload takes 6 s of wall time).
A workload without a duration runs until it is stopped (or ``default_duration``).

Failure injection (for tests and demos):

- configuration ``failures: [{name: "flaky-*", after: 5, message: "..."}]`` fails
  matching workloads (``fnmatch`` on the name) ``after`` seconds of Running;
- the workload label ``sim.apportion.io/fail-after: "<seconds>"`` does the same;
- :meth:`SimExecutor.fail` fails one run now; :meth:`SimExecutor.set_node_health`
  marks a node ``down`` (its runs fail) or ``ready`` again.

Runs are derived from ``Run.started_at`` (kept in the agent's state file), so a
restarted agent re-adopts them and they finish when they would have.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from apportion.agent.inventory import nodes_from_config
from apportion.agent.model import NodeInfo, Observed, Run, RunStatus

FAIL_LABEL = "sim.apportion.io/fail-after"


@dataclass(slots=True)
class _SimRun:
    run: Run
    fail_after: float | None
    fail_message: str
    ended: Observed | None = None
    stop_at: float | None = None


class SimExecutor:
    name = "sim"

    def __init__(
        self, nodes: Sequence[NodeInfo], *, speed: float = 1.0, start_delay: float = 0.0,
        default_duration: float | None = None, failures: Sequence[Mapping[str, Any]] = (),
        stop_delay: float = 0.0, clock: Callable[[], float] = time.time,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.nodes = {n.name: n for n in nodes}
        self.speed = speed
        self.start_delay = start_delay
        self.default_duration = default_duration
        self.failures = list(failures)
        self.stop_delay = stop_delay
        self.clock = clock
        self.runs: dict[str, _SimRun] = {}
        self.started: list[str] = []  # every start made, for tests (no duplicates)
        self.adopted: list[str] = []  # runs taken over from a previous agent

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, speed: float | None = None,
                    nodes: Sequence[NodeInfo] | None = None) -> SimExecutor:
        return cls(
            nodes if nodes is not None else nodes_from_config(config),
            speed=float(speed if speed is not None else config.get("speed", 1.0)),
            start_delay=float(config.get("start_delay", 0.0)),
            default_duration=config.get("default_duration"),
            failures=config.get("failures") or (),
            stop_delay=float(config.get("stop_delay", 0.0)),
        )

    # -- Executor ---------------------------------------------------------------------------

    def inventory(self) -> list[NodeInfo]:
        return [self.nodes[k] for k in sorted(self.nodes)]

    def start(self, run: Run) -> None:
        if run.run_id in self.runs:
            return
        missing = sorted(set(run.nodes) - set(self.nodes))
        if missing:
            raise ValueError(f"placed on unknown node(s): {', '.join(missing)}")
        fail_after, message = self._failure_for(run)
        self.runs[run.run_id] = _SimRun(run, fail_after, message)
        self.started.append(run.run_id)

    def pod_env(self, run_id: str, pod: int) -> dict[str, str]:
        """The environment pod ``pod`` of a run would see, were it executed: the
        workload's ``env`` (an array member's ``APPORTION_ARRAY_ID`` and
        ``APPORTION_ARRAY_INDEX`` included) plus the run id and pod index, as
        the local executor gives them."""
        run = self.runs[run_id].run
        return {**run.exec.env, "APPORTION_RUN_ID": run.run_id,
                "APPORTION_POD_INDEX": str(pod)}

    def adopt(self, runs: Sequence[Run],
              stopping: Mapping[str, float] | None = None) -> None:
        """Continue the runs from their original start; those being stopped stop
        within the grace that is left (and never complete first)."""
        stopping = stopping or {}
        for run in runs:
            if run.run_id not in self.runs:
                fail_after, message = self._failure_for(run)
                self.runs[run.run_id] = _SimRun(run, fail_after, message)
                self.adopted.append(run.run_id)
                if run.run_id in stopping:
                    self.stop(run.run_id, max(0.0, stopping[run.run_id]))

    def stop(self, run_id: str, grace_seconds: float) -> None:
        sim = self.runs.get(run_id)
        if sim is None or sim.ended is not None or sim.stop_at is not None:
            return
        sim.stop_at = self.clock() + min(grace_seconds, self.stop_delay) / self.speed

    def shrink(self, run_id: str, pods: tuple[int, ...], grace_seconds: float) -> None:
        """The taken pods stop at once (nothing runs); the run goes on with the rest."""
        sim = self.runs.get(run_id)
        if sim is None or sim.ended is not None:
            return
        sim.run = replace(sim.run, stopped=tuple(sorted({*sim.run.stopped, *pods})))

    def pods_running(self, run_id: str) -> int:
        """Pods of a run that still run (0 for an unknown or ended run); for tests."""
        sim = self.runs.get(run_id)
        if sim is None or sim.ended is not None:
            return 0
        return sim.run.pods_running

    def poll(self) -> list[Observed]:
        now = self.clock()
        return [self._observe(sim, now) for _rid, sim in sorted(self.runs.items())]

    def log_files(self, run: Run) -> dict[int, Path]:
        """Simulated runs print nothing."""
        return {}

    def forget(self, run_id: str) -> None:
        self.runs.pop(run_id, None)

    def close(self) -> None:
        """Nothing to release: simulated runs live in the state file."""

    # -- failure injection ------------------------------------------------------------------

    def fail(self, run_id: str, message: str = "injected failure") -> None:
        sim = self.runs.get(run_id)
        if sim is not None and sim.ended is None:
            sim.ended = Observed(run_id, RunStatus.FAILED, message, 1)

    def set_node_health(self, node: str, health: str) -> None:
        """``down`` fails every run with a pod on ``node``; ``ready`` brings it back."""
        info = self.nodes[node]
        self.nodes[node] = replace(info, health=health)
        if health == "down":
            for rid, sim in self.runs.items():
                if node in sim.run.nodes and sim.ended is None:
                    sim.ended = Observed(rid, RunStatus.FAILED, f"node {node} is down")

    # -- internals --------------------------------------------------------------------------

    def _failure_for(self, run: Run) -> tuple[float | None, str]:
        label = run.exec.labels.get(FAIL_LABEL)
        if label is not None:
            return float(label), f"injected failure ({FAIL_LABEL}={label})"
        for rule in self.failures:
            if fnmatch.fnmatchcase(run.exec.name, str(rule.get("name", "*"))):
                return float(rule.get("after", 0)), str(rule.get("message", "injected failure"))
        return None, ""

    def _observe(self, sim: _SimRun, now: float) -> Observed:
        rid = sim.run.run_id
        if sim.ended is not None:
            return sim.ended
        if sim.stop_at is not None and now >= sim.stop_at:
            sim.ended = Observed(rid, RunStatus.STOPPED, "stopped")
            return sim.ended
        elapsed = (now - sim.run.started_at) * self.speed - self.start_delay
        if elapsed < 0:
            return Observed(rid, RunStatus.STARTING, "starting")
        if sim.fail_after is not None and elapsed >= sim.fail_after:
            sim.ended = Observed(rid, RunStatus.FAILED, sim.fail_message, 1)
            return sim.ended
        duration = sim.run.exec.duration
        if duration is None:
            duration = self.default_duration
        if duration is not None and elapsed >= duration and sim.stop_at is None:
            sim.ended = Observed(rid, RunStatus.COMPLETED, f"ran {duration:g} s (simulated)", 0)
            return sim.ended
        return Observed(rid, RunStatus.RUNNING, "running (simulated)")
