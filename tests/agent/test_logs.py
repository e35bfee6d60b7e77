"""Workload logs end to end: the local executor writes them, the agent ships
them, the control plane stores them, the API and ``apportion workloads logs``
print them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from apportion.agent.executors.local import LocalExecutor
from apportion.cli.main import app
from apportion.client import ApiError, ApportionClient

from .conftest import ADMIN_TOKEN, Cluster, wait_for


def _local_agent(cluster: Cluster, tmp_path: Path) -> LocalExecutor:
    ex = LocalExecutor(tmp_path / "agent", node="box", gpus=4, use_nvidia_smi=False)
    cluster.agent(ex)
    wait_for(lambda: cluster.admin.get_pool("main")["capacity"] == 4, 10, "node registered")
    return ex


def _cli(cluster: Cluster, tmp_path: Path, *args: str) -> str:
    env = {"APPORTION_CONFIG": str(tmp_path / "cli.yaml"), "APPORTION_SERVER": cluster.server.url,
           "APPORTION_TOKEN": ADMIN_TOKEN}
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_stdout_and_stderr_reach_apportion_workloads_logs(cluster: Cluster, tmp_path: Path
                                                          ) -> None:
    _local_agent(cluster, tmp_path)
    wid = cluster.submit(name="talk", gpus=1, command=["sh", "-c", "echo hello; echo oops >&2"])
    cluster.wait_status(wid, "Completed")
    # The agent ships the bytes before it reports the outcome.
    assert cluster.admin.workload_logs(wid) == b"hello\noops\n"
    assert _cli(cluster, tmp_path, "workloads", "logs", "talk") == "hello\noops\n"
    assert "Completed" in _cli(cluster, tmp_path, "workloads", "logs", "talk", "--events")
    assert cluster.admin.workload_logs(wid, pod=0, offset=6) == b"oops\n"


def test_follow_streams_until_the_workload_ends(cluster: Cluster, tmp_path: Path) -> None:
    _local_agent(cluster, tmp_path)
    script = "for i in 1 2 3; do echo line $i; sleep 0.4; done"
    wid = cluster.submit(name="slow", gpus=1, pods=2, command=["sh", "-c", script])
    cluster.wait_status(wid, "Running")
    env = {"APPORTION_CONFIG": str(tmp_path / "cli.yaml"), "APPORTION_SERVER": cluster.server.url,
           "APPORTION_TOKEN": ADMIN_TOKEN, "PATH": "/usr/bin:/bin"}
    started = time.monotonic()
    proc = subprocess.run([str(Path(sys.executable).parent / "apportion"), "workloads", "logs",
                           "slow", "-f"], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 20
    assert cluster.status(wid) == "Completed"
    lines = proc.stdout.splitlines()
    for pod in (0, 1):
        assert [x for x in lines if x.startswith(f"[pod {pod}]")] == [
            f"[pod {pod}] line {i}" for i in (1, 2, 3)]


def test_the_log_endpoint_appends_by_offset_and_checks_its_input(cluster: Cluster,
                                                                  tmp_path: Path) -> None:
    _local_agent(cluster, tmp_path)
    wid = cluster.submit(name="quiet", gpus=1, command=["sleep", "30"])  # prints nothing
    cluster.wait_status(wid, "Running")
    agent = ApportionClient(cluster.server.url, cluster.agent_token, timeout=30.0)
    try:
        a = agent.agent_log(wid, 1, f"w{wid}-a1", 0, 0, b"abc")
        assert a["accepted"] and a["next_offset"] == 3
        again = agent.agent_log(wid, 1, f"w{wid}-a1", 0, 0, b"abcde")  # retry + new tail
        assert again["next_offset"] == 5
        gap = agent.agent_log(wid, 1, f"w{wid}-a1", 0, 9, b"x")
        assert not gap["accepted"] and gap["next_offset"] == 5
        assert cluster.admin.workload_logs(wid) == b"abcde"
        with pytest.raises(ApiError) as err:
            agent.agent_log(wid, 1, f"w{wid}-a1", 0, 5, b"x" * (256 * 1024 + 1))
        assert err.value.status == 422 and err.value.details.get("field") == "data"
        with pytest.raises(ApiError) as err:
            agent.agent_log(wid, 1, f"w{wid}-a1", 3, 0, b"x")
        assert err.value.status == 422 and err.value.details.get("field") == "pod"
        with pytest.raises(ApiError) as err:  # users cannot write logs
            cluster.admin.agent_log(wid, 1, f"w{wid}-a1", 0, 5, b"x")
        assert err.value.status == 403
        with pytest.raises(ApiError) as err:  # agents cannot read them
            agent.workload_logs(wid)
        assert err.value.status == 403
        with pytest.raises(ApiError) as err:
            cluster.admin.workload_logs(wid, attempt=2)
        assert err.value.status == 422 and err.value.details.get("field") == "attempt"
        bad = httpx.post(f"{cluster.server.url}/v1/agent/logs",
                         headers={"Authorization": f"Bearer {cluster.agent_token}"},
                         json={"workload_id": wid, "attempt": 1, "pod": 0, "offset": 0,
                               "data": "not base64!"})
        assert bad.status_code == 422 and bad.json()["error"]["details"]["field"] == "data"
        other = cluster.submit(name="unplaced", gpus=8)  # never in this agent's pool
        with pytest.raises(ApiError) as err:
            agent.agent_log(other, 1, f"w{other}-a1", 0, 0, b"x")
        assert err.value.status == 403
    finally:
        agent.close()


def test_logs_written_during_an_outage_arrive_afterwards(cluster: Cluster, tmp_path: Path
                                                         ) -> None:
    ex = _local_agent(cluster, tmp_path)
    go = tmp_path / "go"  # the workload prints its second line only once this exists
    script = f"echo before; while [ ! -e {go} ]; do sleep 0.05; done; echo after"
    wid = cluster.submit(name="outage", gpus=1, command=["sh", "-c", script])
    wait_for(lambda: cluster.admin.workload_logs(wid) == b"before\n", 20, "first line")
    cluster.server.stop()
    go.touch()
    log = ex.log_dir(wid, 1) / "pod-0.log"
    wait_for(lambda: log.read_bytes() == b"before\nafter\n", 20,
             '"after" written while the control plane is away')
    cluster.server.start()
    cluster.wait_status(wid, "Completed", timeout=20)
    assert cluster.admin.workload_logs(wid) == b"before\nafter\n"
