"""Job control at the agent (issue 16): an array member's index reaches the
executor's environment (local processes, Kubernetes pods), and the agent ends a
run past its time limit itself when the control plane has not."""

from __future__ import annotations

from pathlib import Path

import pytest

from apportion.agent.executors.local import LocalExecutor
from apportion.agent.model import RunStatus, instruction_from_json
from apportion.service.plan_committer import _exec
from tests.agent.conftest import wait_for
from tests.agent.test_loop_clock import START, MemoryApi, _agent
from tests.timing import ManualClock


def _member_decision(command: list[str]) -> dict[str, object]:
    """A start decision for member 3 of array 40, as the control plane writes it."""
    spec = {"name": "sweep[3]", "team": "nlp", "image": "img", "command": command,
            "env": {"EPOCHS": "2"}}
    return {"id": 1, "kind": "start", "workload_id": 43, "attempt": 1, "run_id": "w43-a1",
            "placement": [{"node": "box", "devices": [{"index": 0, "milli": 1000}]}],
            "exec": _exec(spec, 3600, 40, 3)}


def test_a_local_pod_sees_its_array_id_and_index(tmp_path: Path) -> None:
    d = instruction_from_json(_member_decision(
        ["sh", "-c", "echo $APPORTION_ARRAY_ID $APPORTION_ARRAY_INDEX $EPOCHS"]))
    assert d.exec.time_limit == 3600
    ex = LocalExecutor(tmp_path, node="box", gpus=1, gpu_memory_mib=40960,
                       use_nvidia_smi=False)
    ex.start(d.to_run(0.0))
    wait_for(lambda: {o.run_id: o for o in ex.poll()}["w43-a1"].status
             is RunStatus.COMPLETED, 10, "the pod to finish")
    assert (ex.log_dir(43, 1) / "pod-0.log").read_text().splitlines()[-1] == "40 3 2"


def test_a_kubernetes_pod_sees_its_array_id_and_index() -> None:
    pytest.importorskip("lightkube", reason="the kubernetes extra is not installed")
    from apportion.agent.executors.kubernetes import KubeSettings, build_job

    d = instruction_from_json(_member_decision(["python", "train.py"]))
    job = build_job(d.to_run(0.0), KubeSettings(namespace="apportion", pool="gpu-a"))
    env = {e.name: e.value for e in job.spec.template.spec.containers[0].env}
    assert (env["APPORTION_ARRAY_ID"], env["APPORTION_ARRAY_INDEX"]) == ("40", "3")


def test_a_sim_pod_sees_its_array_id_and_index(tmp_path: Path) -> None:
    clock = ManualClock()
    api = MemoryApi([{**_member_decision(["true"]),
                      "placement": [{"node": "n1", "devices": [{"index": 0, "milli": 1000}]}]}])
    agent, sim = _agent(tmp_path, api, clock)
    agent.step()
    env = sim.pod_env("w43-a1", 0)
    assert (env["APPORTION_ARRAY_ID"], env["APPORTION_ARRAY_INDEX"]) == ("40", "3")
    assert env["EPOCHS"] == "2" and env["APPORTION_POD_INDEX"] == "0"


def test_a_workload_not_in_an_array_gets_no_array_variables() -> None:
    out = _exec({"name": "x", "env": {"A": "1"}})
    assert out["env"] == {"A": "1"} and "time_limit" not in out


def test_the_agent_stops_a_run_past_its_time_limit_plus_the_fallback(tmp_path: Path) -> None:
    clock = ManualClock()
    start = {**START, "exec": {**START["exec"], "duration": 100000, "time_limit": 600}}
    api = MemoryApi([start])
    agent, _sim = _agent(tmp_path, api, clock)
    agent.step()
    agent.step()
    assert [r["status"] for r in api.reports] == ["running"]
    clock.advance(600 + agent.options.time_limit_fallback - 1)  # the control plane's turn
    agent.step()
    assert [r["status"] for r in api.reports] == ["running"]
    clock.advance(1)
    agent.step()
    agent.step()
    assert [r["status"] for r in api.reports] == ["running", "failed"]
    assert "time limit of 600 s reached" in (api.reports[-1]["message"] or "")
    assert agent.state.runs == {}


def test_a_run_without_a_time_limit_is_never_stopped_by_the_agent(tmp_path: Path) -> None:
    clock = ManualClock()
    start = {**START, "exec": {**START["exec"], "duration": None}}
    api = MemoryApi([start])
    agent, _sim = _agent(tmp_path, api, clock)
    agent.step()
    clock.advance(10 * 86400)
    agent.step()
    assert [r["status"] for r in api.reports] == ["running"]
