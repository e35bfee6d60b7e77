"""The agent loop driven step by step with a ManualClock and an in-memory
control plane (the three agent endpoints recorded): heartbeats follow the
agent's clock, a sim job ends when its duration has passed on that clock, and
an outcome carried by a heartbeat keeps its message and exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apportion.agent.executors.sim import SimExecutor
from apportion.agent.loop import Agent, AgentOptions
from apportion.agent.state import StateFile
from apportion.client import Page
from tests.agent.test_sim import NODES
from tests.timing import ManualClock


class MemoryApi:
    """The agent endpoints, in memory: decisions to hand out, calls recorded."""

    def __init__(self, decisions: list[dict[str, Any]] | None = None) -> None:
        self.decisions = decisions or []
        self.heartbeats: list[list[dict[str, Any]]] = []
        self.reports: list[dict[str, Any]] = []

    def agent_heartbeat(self, pool: str, nodes: list[dict[str, Any]], *,
                        agent_version: str = "",
                        runs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        self.heartbeats.append(list(runs or []))
        return {"pool": pool, "nodes": len(nodes), "decisions_cursor": len(self.decisions)}

    def agent_decisions(self, cursor: int = 0, *, limit: int | None = None,
                        wait: float | None = None, live: bool = False) -> Page:
        items = [d for d in self.decisions if d["id"] > cursor]
        return Page(items, next_token=str(items[-1]["id"]) if items else str(cursor))

    def agent_report(self, workload_id: int, attempt: int, run_id: str, status: str, *,
                     message: str | None = None, exit_code: int | None = None,
                     pods_running: int | None = None) -> dict[str, Any]:
        self.reports.append({"run_id": run_id, "status": status, "message": message})
        return {"accepted": True}

    def agent_log(self, workload_id: int, attempt: int, run_id: str, pod: int, offset: int,
                  data: bytes) -> dict[str, Any]:
        return {"accepted": True, "next_offset": offset + len(data)}


START = {"id": 1, "kind": "start", "workload_id": 5, "attempt": 1, "run_id": "w5-a1",
         "placement": [{"node": "n1", "devices": [{"index": 0, "milli": 1000}]}],
         "exec": {"name": "job", "team": "nlp", "duration": 600}}


def _agent(tmp_path: Path, api: MemoryApi, clock: ManualClock) -> tuple[Agent, SimExecutor]:
    sim = SimExecutor(NODES, clock=clock.now)
    options = AgentOptions(poll_interval=0.0, heartbeat_interval=10.0)
    return Agent(api, sim, StateFile(tmp_path / "agent.json"), "main", options,
                 clock=clock), sim


def test_heartbeats_and_job_durations_follow_the_agents_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    api = MemoryApi([START])
    agent, sim = _agent(tmp_path, api, clock)
    agent.step()
    assert sim.started == ["w5-a1"] and len(api.heartbeats) == 1
    agent.step()
    assert [r["status"] for r in api.reports] == ["running"]
    clock.advance(9.9)
    agent.step()
    assert len(api.heartbeats) == 1  # not yet due
    clock.advance(0.1)
    agent.step()
    assert len(api.heartbeats) == 2  # due after 10 s on the agent's clock
    clock.advance(600 - 10)  # the job's 600 s have passed
    agent.step()
    assert [r["status"] for r in api.reports] == ["running", "completed"]
    assert agent.state.runs == {} and "w5-a1" in agent.state.done


def test_a_heartbeat_carries_a_queued_outcome_with_its_message(tmp_path: Path) -> None:
    clock = ManualClock()
    api = MemoryApi([START])
    agent, sim = _agent(tmp_path, api, clock)
    agent.step()
    agent.step()
    sim.fail("w5-a1", "pod 0 exited with code 2")
    agent.observe()  # queued in the outbox (as while the control plane is away)
    agent.heartbeat()
    carried = [r for r in api.heartbeats[-1] if r["run_id"] == "w5-a1"]
    assert carried == [{"workload_id": 5, "attempt": 1, "run_id": "w5-a1", "status": "failed",
                        "message": "pod 0 exited with code 2", "exit_code": 1}]
