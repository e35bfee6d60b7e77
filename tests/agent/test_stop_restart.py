"""A stop in flight survives a restart of the agent, on every executor (issue 18).

The agent saves each stop's deadline (``stop_at``) in its state file before it
asks the executor; a restarted agent hands the run back to the executor as
*being stopped*, with the grace that is left, instead of adopting it as a run
still wanted. Without that, a preempted attempt kept running beside the
workload that took its devices (and beside its own requeued attempt); a
workload without a duration never ended at all.

The agent is driven step by step (``apply``/``observe``, no network), each
"restart" is a new ``Agent`` and a new executor on the same state file, as
after a SIGKILL: nothing of the old objects is reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apportion.agent.executor import Executor
from apportion.agent.executors.local import LocalExecutor
from apportion.agent.executors.sim import SimExecutor
from apportion.agent.loop import Agent
from apportion.agent.model import Instruction, RunStatus, instruction_from_json
from apportion.agent.state import StateFile
from tests.agent.test_sim import NODES
from tests.timing import ManualClock, wait_until


def _start(node: str, *, command: list[str] | None = None,
           duration: float | None = None) -> Instruction:
    return instruction_from_json({
        "id": 1, "kind": "start", "workload_id": 5, "attempt": 1, "run_id": "w5-a1",
        "placement": [{"node": node, "devices": [{"index": 0, "milli": 1000}]}],
        "exec": {"name": "job", "team": "nlp", "command": command, "duration": duration,
                 "image": "ghcr.io/acme/train:1"}})


def _stop(grace: float) -> Instruction:
    return instruction_from_json({"id": 2, "kind": "stop", "workload_id": 5, "attempt": 1,
                               "run_id": "w5-a1", "reason": "preempted",
                               "grace_seconds": grace})


def _agent(tmp_path: Path, executor: Executor, clock: ManualClock) -> Agent:
    return Agent(api=None, executor=executor,  # type: ignore[arg-type]
                 state_file=StateFile(tmp_path / "agent-main.json"), pool="main", clock=clock)


def _saved_run(tmp_path: Path) -> dict[str, Any]:
    raw = json.loads((tmp_path / "agent-main.json").read_text())
    return dict(raw["runs"]["w5-a1"])


def _reported(agent: Agent) -> list[tuple[str, str]]:
    return [(i["run_id"], i["status"]) for i in agent.state.outbox]


# -- sim -----------------------------------------------------------------------------------


def test_a_sim_run_being_stopped_is_stopped_after_a_restart_at_its_deadline(
    tmp_path: Path,
) -> None:
    """A workload without a duration (it runs until stopped) is stopped with a
    5 s grace; the agent dies 1 s into it. The new agent's executor ends it
    when the 5 s are over, not later and not never."""
    clock = ManualClock()
    sim = SimExecutor(NODES, stop_delay=10, clock=clock.now)  # it uses its whole grace
    first = _agent(tmp_path, sim, clock)
    first.apply([_start("n1")], 1)
    first.observe()
    first.apply([_stop(5)], 2)
    assert _saved_run(tmp_path)["phase"] == "stopping"
    assert _saved_run(tmp_path)["stop_at"] == pytest.approx(clock.now() + 5)
    clock.advance(1)  # the agent is SIGKILLed with the stop in flight

    again = SimExecutor(NODES, stop_delay=10, clock=clock.now)
    second = _agent(tmp_path, again, clock)
    second.restore()
    assert again.adopted == ["w5-a1"] and again.started == []
    second.observe()
    assert "w5-a1" in second.state.runs  # within its grace: still exiting
    clock.advance(3.9)
    second.observe()
    assert "w5-a1" in second.state.runs
    clock.advance(0.1)  # the 5 s of the stop decision are over
    second.observe()
    assert "w5-a1" not in second.state.runs and "w5-a1" not in again.runs
    assert second.state.outbox[-1]["status"] == "failed"  # "it has exited": devices free
    assert second.state.outbox[-1]["message"] == "stopped"


def test_a_sim_run_whose_grace_ran_out_while_no_agent_ran_stops_at_once(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    first = _agent(tmp_path, SimExecutor(NODES, stop_delay=2, clock=clock.now), clock)
    first.apply([_start("n1", duration=600)], 1)
    first.observe()
    first.apply([_stop(2)], 2)
    clock.advance(30)  # down far longer than the grace
    again = SimExecutor(NODES, stop_delay=2, clock=clock.now)
    second = _agent(tmp_path, again, clock)
    second.restore()
    second.observe()
    assert second.state.runs == {} and again.runs == {}
    clock.advance(600)  # it never comes back to "complete" later
    second.observe()
    assert _reported(second) == [("w5-a1", "failed")]  # its queued "running" was dropped


# -- local ---------------------------------------------------------------------------------


@pytest.fixture
def reaper() -> Iterator[list[LocalExecutor]]:
    """Kills whatever the local executors of a test left running (a failing test
    must not leave ``sleep 300`` behind)."""
    made: list[LocalExecutor] = []
    yield made
    for ex in made:
        for local in ex.runs.values():
            for pod in local.pods:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if pod.pid > 0:
                        os.killpg(pod.pid, signal.SIGKILL)


def _local(tmp_path: Path, clock: ManualClock, made: list[LocalExecutor]) -> LocalExecutor:
    ex = LocalExecutor(tmp_path, node="box", gpus=4, use_nvidia_smi=False,
                       clock=clock.monotonic)
    made.append(ex)
    return ex


def test_a_local_run_ignoring_sigterm_is_killed_at_its_deadline_after_a_restart(
    tmp_path: Path, reaper: list[LocalExecutor],
) -> None:
    """The SIGTERM→SIGKILL deadline is not lost with the agent: a pod that traps
    SIGTERM is SIGKILLed by the new agent's executor when the grace is over."""
    clock = ManualClock()
    ex = _local(tmp_path, clock, reaper)
    first = _agent(tmp_path, ex, clock)
    first.apply([_start("box", command=["sh", "-c", 'trap "" TERM; echo ready; sleep 300'])],
                1)
    log = ex.log_dir(5, 1) / "pod-0.log"
    wait_until(lambda: log.exists() and "ready" in log.read_text(), timeout=10,
               what="the pod's SIGTERM trap")
    first.observe()
    first.apply([_stop(5)], 2)  # SIGTERM sent; SIGKILL due in 5 s
    clock.advance(1)  # the agent dies

    again = _local(tmp_path, clock, reaper)
    second = _agent(tmp_path, again, clock)
    second.restore()
    second.observe()
    clock.advance(3.9)
    second.observe()
    assert {o.run_id: o.status for o in again.poll()}["w5-a1"] is RunStatus.RUNNING
    assert "w5-a1" in second.state.runs  # it ignores SIGTERM and is within its grace
    clock.advance(0.1)  # the grace is over: the next poll sends SIGKILL

    def gone() -> bool:
        second.observe()
        return "w5-a1" not in second.state.runs
    wait_until(gone, timeout=10, what="the stubborn pod killed by the restarted agent")
    assert second.state.outbox[-1]["status"] == "failed"
    assert len(list(again.log_dir(5, 1).glob("pod-*.log"))) == 1  # nothing spawned again


def test_a_local_stop_decided_but_not_signalled_before_the_crash_is_sent_after_it(
    tmp_path: Path, reaper: list[LocalExecutor],
) -> None:
    """The agent saves the stop, then dies before it signals: the restarted
    agent sends the SIGTERM (and keeps the deadline); it spawns nothing."""
    clock = ManualClock()
    ex = _local(tmp_path, clock, reaper)
    first = _agent(tmp_path, ex, clock)
    first.apply([_start("box", command=["sleep", "300"])], 1)
    first.observe()
    state = StateFile(tmp_path / "agent-main.json")
    saved = state.load("main")  # what _stop writes before it asks the executor
    saved.runs["w5-a1"].phase, saved.runs["w5-a1"].stop_at = "stopping", clock.now() + 5
    state.save(saved)

    again = _local(tmp_path, clock, reaper)
    second = _agent(tmp_path, again, clock)
    second.restore()

    def gone() -> bool:
        second.observe()
        return "w5-a1" not in second.state.runs
    wait_until(gone, timeout=10, what="sleep 300 stopped by SIGTERM after the restart")
    assert (again.log_dir(5, 1) / "pod-0.exit").read_text().strip() == "143"
    assert len(list(again.log_dir(5, 1).glob("pod-*.log"))) == 1


# -- kubernetes ----------------------------------------------------------------------------


def _kube_agent(tmp_path: Path, clock: ManualClock) -> tuple[Agent, Any, Any]:
    pytest.importorskip("lightkube", reason="the 'kubernetes' extra (lightkube) is not "
                        "installed")
    from apportion.agent.executors.kubernetes import KubernetesExecutor, KubeSettings
    from tests.agent.kubefake import FakeKube

    kube = FakeKube()
    kube.add_node("a1", 8)
    settings = KubeSettings(namespace="apportion", pool="main")
    ex = KubernetesExecutor(kube.client(), settings)
    agent = _agent(tmp_path, ex, clock)
    agent.apply([_start("a1", command=["python", "train.py"])], 1)
    kube.job_controller()
    kube.set_phase("apportion-w5-a1", "Running")
    agent.observe()

    def restart() -> tuple[Agent, Any]:
        fresh = KubernetesExecutor(kube.client(), settings)
        return _agent(tmp_path, fresh, clock), fresh
    return agent, kube, restart


def test_a_kubernetes_run_stopped_before_a_restart_is_not_created_again(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    first, kube, restart = _kube_agent(tmp_path, clock)
    first.apply([_stop(30)], 2)
    assert kube.objects["jobs"] == {}  # deleted by the stop (its pods with 30 s grace)
    second, _fresh = restart()
    before = len(kube.requests)
    second.restore()
    assert not any(m == "POST" for m, _p in kube.requests[before:])  # no Job created
    second.observe()
    assert kube.objects["jobs"] == {} and second.state.runs == {}
    assert second.state.outbox[-1]["status"] == "failed"


def test_a_kubernetes_stop_saved_before_a_crash_deletes_with_the_grace_that_is_left(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    _first, kube, restart = _kube_agent(tmp_path, clock)
    state = StateFile(tmp_path / "agent-main.json")
    saved = state.load("main")  # the stop was saved, then the agent died
    saved.runs["w5-a1"].phase, saved.runs["w5-a1"].stop_at = "stopping", clock.now() + 30
    state.save(saved)
    clock.advance(10)
    second, _fresh = restart()
    second.restore()
    pods = [d for d in kube.deleted if d[0] == "pods"]
    assert pods and pods[0][2].get("gracePeriodSeconds") == "20"  # 30 s less the 10 gone
    assert kube.objects["jobs"] == {}
    second.observe()
    assert second.state.runs == {}


# -- a start waits for the runs stopping on its devices ------------------------------------


def _start_on(rid: str, wid: int, index: int, milli: int = 1000, i: int = 3) -> Instruction:
    return instruction_from_json({
        "id": i, "kind": "start", "workload_id": wid, "attempt": 1, "run_id": rid,
        "placement": [{"node": "n1", "devices": [{"index": index, "milli": milli}]}],
        "exec": {"name": "next", "team": "nlp", "duration": 600}})


def test_a_start_on_devices_a_stopping_run_holds_waits_until_it_has_exited(
    tmp_path: Path,
) -> None:
    """After an outage the victim's stop and its replacement's start arrive in one
    batch: the replacement starts only once the victim is gone, also across a
    restart of the agent; a start on other devices is not held back."""
    clock = ManualClock()
    sim = SimExecutor(NODES, stop_delay=10, clock=clock.now)
    first = _agent(tmp_path, sim, clock)
    first.apply([_start("n1")], 1)
    first.observe()
    first.apply([_stop(5), _start_on("w6-a1", 6, 0), _start_on("w7-a1", 7, 1, i=4)], 4)
    assert sim.started == ["w5-a1", "w7-a1"]  # w6 needs device 0, still held by w5
    assert first.state.runs["w6-a1"].phase == "waiting"
    clock.advance(2)
    first.observe()
    assert "w6-a1" not in sim.runs
    clock.advance(1)  # the agent dies; the waiting start is in its state file

    again = SimExecutor(NODES, stop_delay=10, clock=clock.now)
    second = _agent(tmp_path, again, clock)
    second.restore()
    assert sorted(again.adopted) == ["w5-a1", "w7-a1"]  # the waiting one is not adopted
    second.observe()
    assert "w6-a1" not in again.runs
    clock.advance(1.9)
    second.observe()
    assert "w6-a1" not in again.runs  # w5's grace has 0.1 s left
    clock.advance(0.1)
    second.observe()  # w5 exits; w6 starts in the same pass
    assert "w5-a1" not in again.runs and again.started == ["w6-a1"]
    assert second.state.runs["w6-a1"].phase == "active"


def test_a_fraction_that_fits_beside_a_stopping_run_starts_at_once(tmp_path: Path) -> None:
    clock = ManualClock()
    sim = SimExecutor(NODES, stop_delay=10, clock=clock.now)
    agent = _agent(tmp_path, sim, clock)
    agent.apply([_start_on("w5-a1", 5, 0, milli=500, i=1)], 1)
    agent.observe()
    agent.apply([_stop(5), _start_on("w6-a1", 6, 0, milli=500)], 3)
    assert sim.started == ["w5-a1", "w6-a1"]  # 500 + 500: the device is not overcommitted


def test_a_stop_of_a_held_back_start_ends_it_without_starting_it(tmp_path: Path) -> None:
    clock = ManualClock()
    sim = SimExecutor(NODES, stop_delay=10, clock=clock.now)
    agent = _agent(tmp_path, sim, clock)
    agent.apply([_start("n1")], 1)
    agent.observe()
    agent.apply([_stop(5), _start_on("w6-a1", 6, 0)], 3)
    agent.apply([instruction_from_json({"id": 4, "kind": "stop", "workload_id": 6, "attempt": 1,
                                     "run_id": "w6-a1", "reason": "cancelled",
                                     "grace_seconds": 0})], 4)
    clock.advance(5)
    agent.observe()
    assert sim.started == ["w5-a1"] and agent.state.runs == {}
    assert "w6-a1" in agent.state.done


def test_a_new_attempt_waits_until_the_old_attempt_of_its_workload_has_exited(
    tmp_path: Path,
) -> None:
    """After a partition the stop of a preempted attempt (with its grace) and the
    start of the workload's next attempt, on other devices, arrive in one batch:
    the new attempt started at once, and two attempts of one workload ran side
    by side for the old one's grace (found by tests/chaos/test_partition.py).
    It now waits until the old attempt has exited; other work is not held back."""
    clock = ManualClock()
    sim = SimExecutor(NODES, stop_delay=10, clock=clock.now)
    agent = _agent(tmp_path, sim, clock)
    agent.apply([_start("n1")], 1)  # w5-a1 on n1 device 0
    agent.observe()
    again = instruction_from_json({
        "id": 3, "kind": "start", "workload_id": 5, "attempt": 2, "run_id": "w5-a2",
        "placement": [{"node": "n2", "devices": [{"index": 0, "milli": 1000}]}],
        "exec": {"name": "job", "team": "nlp", "duration": 600}})
    agent.apply([_stop(5), again, _start_on("w7-a1", 7, 1, i=4)], 4)
    assert sim.started == ["w5-a1", "w7-a1"]  # w7 is another workload: not held back
    assert agent.state.runs["w5-a2"].phase == "waiting"
    clock.advance(4.9)
    agent.observe()
    assert "w5-a2" not in sim.runs  # w5-a1 is still within its grace
    clock.advance(0.1)
    agent.observe()  # w5-a1 exits; its next attempt starts in the same pass
    assert "w5-a1" not in sim.runs and sim.started == ["w5-a1", "w7-a1", "w5-a2"]
    assert agent.state.runs["w5-a2"].phase == "active"
