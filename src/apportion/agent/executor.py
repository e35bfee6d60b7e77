"""The one interface every executor (sim, local, kubernetes) implements.

The agent owns desired state (decisions) and reporting; an executor owns
actual state (what runs) and nothing else. All methods are called from the
agent's loop thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from apportion.agent.model import NodeInfo, Observed, Run


class Executor(Protocol):
    """Runs workloads on the pool's nodes.

    - ``start`` and ``stop`` are idempotent by ``run_id`` (a second start of a
      known run does nothing); neither blocks for long.
    - ``poll`` returns the current status of every run the executor knows,
      including finished ones until :meth:`forget` is called, and may also
      return runs it finds that nobody told it about (orphans).
    - ``log_files`` names the files holding each pod's output (pod index → path),
      which the agent ships to the control plane; ``{}`` when the output lives
      elsewhere (Kubernetes keeps pod logs itself; the simulator prints nothing).
    - ``shrink`` stops only ``pods`` of a run (SPEC 6.5's shrink: the run's
      highest pod indices) within ``grace_seconds``; the other pods go on and
      ``poll`` keeps reporting the run by them alone: the taken pods' exit is
      neither a failure nor a completion. Idempotent; a run handed to ``start``
      or ``adopt`` with ``Run.stopped`` set never runs those pods.
    - ``adopt`` is called once after an agent restart with the runs its state
      file says were started and not yet finished: the executor re-attaches to
      them (and reports ``lost`` for those it cannot find). ``stopping`` names
      those the agent was stopping, each with the seconds of its grace that are
      left (0 when it has run out): the executor starts nothing of them again,
      only re-attaches and stops them within that time (the local executor's
      SIGKILL deadline, the simulator's stop time), so a stop in flight
      survives a restart of the agent.
    """

    name: str

    def inventory(self) -> list[NodeInfo]: ...

    def start(self, run: Run) -> None: ...

    def stop(self, run_id: str, grace_seconds: float) -> None: ...

    def shrink(self, run_id: str, pods: tuple[int, ...], grace_seconds: float) -> None: ...

    def poll(self) -> list[Observed]: ...

    def adopt(self, runs: Sequence[Run],
              stopping: Mapping[str, float] | None = None) -> None: ...

    def forget(self, run_id: str) -> None: ...

    def log_files(self, run: Run) -> dict[int, Path]: ...

    def close(self) -> None: ...
