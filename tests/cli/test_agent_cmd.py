"""``apportion agent`` as a user runs it: bad options are refused before anything
starts; a sim agent registers its nodes, runs a workload to completion, keeps
its state file and exits 0 on SIGTERM or after ``--duration``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from tests.cli.conftest import Org, wait_for

ENTRY = "from apportion.cli.main import main; main()"


def _agent_args(org: Org, token: str, data_dir: Path, *extra: str) -> list[str]:
    return ["agent", "--server", org.url, "--token", token, "--pool", "main",
            "--data-dir", str(data_dir), "--poll-interval", "0.1", "--log-level", "warning",
            *extra]


@pytest.mark.parametrize(("extra", "message"), [
    pytest.param(["--executor", "slurm"], "one of sim, local, kubernetes", id="executor"),
    pytest.param(["--config", "/nonexistent/agent.yaml"], "apportion agent: ", id="config"),
    pytest.param(["--shape", "4x4"], "expected RACKSxNODESxGPUS", id="shape"),
])
def test_bad_options_exit_2_before_connecting(tmp_path: Path, extra: list[str],
                                              message: str) -> None:
    # The server URL points nowhere: a refused option must not get as far as the network.
    args = ["agent", "--server", "http://127.0.0.1:9", "--token", "t", "--pool", "main",
            "--data-dir", str(tmp_path), *extra]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = CliRunner().invoke(app, args)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "agent-main.json").exists()


def test_sim_agent_runs_a_workload_and_stops_on_sigterm(org: Org, tmp_path: Path) -> None:
    org.admin.create_pool("main")
    token = org.token("agent-main", "agent", pool="main")
    org.admin.create_team("t")
    config = tmp_path / "agent.yaml"
    config.write_text("speed: 10\ngpu_type: l4\n")
    data = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-c", ENTRY,
                             *_agent_args(org, token, data, "--config", str(config),
                                          "--shape", "1x2x4")],
                            env={**os.environ, "NO_COLOR": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: org.admin.get_pool("main")["capacity"] == 8, 30, "nodes registered")
        nodes = sorted((n["name"], n["gpus"]) for n in org.admin.list_nodes().items)
        assert nodes == [("r1n1", 4), ("r1n2", 4)]
        wid = int(org.admin.submit_workload({"name": "sim-job", "team": "t", "gpus": 4,
                                             "duration": 5})["id"])
        org.wait_status(wid, "Completed", timeout=30)  # 5 s at speed 10
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, stderr
    assert f"apportion agent: pool main, executor sim, server {org.url}" in stderr
    state = json.loads((data / "agent-main.json").read_text())
    assert f"w{wid}-a1" in state["done"]


def test_duration_ends_the_agent_by_itself(org: Org, tmp_path: Path) -> None:
    org.admin.create_pool("main")
    token = org.token("agent-main", "agent", pool="main")
    proc = subprocess.run([sys.executable, "-c", ENTRY,
                           *_agent_args(org, token, tmp_path, "--shape", "1x1x2",
                                        "--duration", "1")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert org.admin.get_pool("main")["capacity"] == 2  # it did connect and register
