"""The agent's handling of a ``shrink`` decision (SPEC 6.5), without a network:
decisions go straight into ``Agent.apply``; the executor is the sim executor,
or one that fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apportion.agent.executors.sim import SimExecutor
from apportion.agent.loop import Agent
from apportion.agent.model import ExecSpec, Instruction, NodeInfo
from apportion.agent.state import StateFile
from apportion.domain.workload import DeviceShare, PodPlacement

PLACEMENT = tuple(PodPlacement("n1", (DeviceShare(i, 1000),)) for i in range(4))


def _agent(tmp_path: Path, executor: Any) -> Agent:
    return Agent(api=None, executor=executor, state_file=StateFile(tmp_path / "a.json"),  # type: ignore[arg-type]
                 pool="main")


def _start(i: int = 1) -> Instruction:
    return Instruction(i, "start", 7, 1, "w7-a1", PLACEMENT, ExecSpec(name="sweep"))


def _shrink(i: int, pods: tuple[int, ...]) -> Instruction:
    return Instruction(i, "shrink", 7, 1, "w7-a1", PLACEMENT[pods[0]:], grace_seconds=5,
                    reason="preempted", pods=pods)


def test_a_shrink_stops_the_pods_records_them_and_reports_running(tmp_path: Path) -> None:
    sim = SimExecutor([NodeInfo("n1", 4)])
    agent = _agent(tmp_path, sim)
    agent.apply([_start()], 1)
    agent.apply([_shrink(2, (2, 3))], 2)
    assert sim.pods_running("w7-a1") == 2
    assert agent.state.runs["w7-a1"].run.stopped == (2, 3)
    report = agent.state.outbox[-1]
    assert (report["status"], report["pods_running"]) == ("running", 2)
    assert report["message"] == "shrunk: pods 2-3 stopped (preempted); 2 pod(s) running"
    reloaded = StateFile(tmp_path / "a.json").load("main")  # survives a restart
    assert reloaded.runs["w7-a1"].run.stopped == (2, 3)


def test_a_replayed_or_foreign_shrink_changes_nothing(tmp_path: Path) -> None:
    sim = SimExecutor([NodeInfo("n1", 4)])
    agent = _agent(tmp_path, sim)
    agent.apply([_start(), _shrink(2, (3,))], 2)
    outbox = list(agent.state.outbox)
    agent.apply([_shrink(2, (3,))], 2)  # the same decision again (a replay)
    agent.apply([Instruction(3, "shrink", 9, 1, "w9-a1", pods=(0,))], 3)  # unknown run
    assert agent.state.outbox == outbox and sim.pods_running("w7-a1") == 3


class _BrokenShrink(SimExecutor):
    def shrink(self, run_id: str, pods: tuple[int, ...], grace_seconds: float) -> None:
        raise RuntimeError("422 Invalid: spec.completions: field is immutable")


def test_a_shrink_the_executor_cannot_do_fails_the_run(tmp_path: Path) -> None:
    sim = _BrokenShrink([NodeInfo("n1", 4)])
    agent = _agent(tmp_path, sim)
    agent.apply([_start()], 1)
    agent.apply([_shrink(2, (3,))], 2)
    report = agent.state.outbox[-1]
    assert report["status"] == "failed"
    assert report["message"].startswith("executor error: could not stop pod 3 for a shrink")
    assert agent.state.runs["w7-a1"].phase == "stopping"


def test_a_start_and_its_shrink_in_one_batch_never_start_the_taken_pods(
    tmp_path: Path,
) -> None:
    """An agent catching up (e.g. live decisions after a lost state file) sees the
    attempt's start with all its pods, then the shrink: the taken pods never run."""
    sim = SimExecutor([NodeInfo("n1", 4)])
    agent = _agent(tmp_path, sim)
    agent.apply([_start(), _shrink(2, (3,))], 2)
    assert sim.runs["w7-a1"].run.stopped == (3,) and sim.pods_running("w7-a1") == 3
    assert sim.started == ["w7-a1"]
