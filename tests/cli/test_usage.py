"""Usage errors (exit 2), the config file, completion scripts, argument parsing: no
server needed (or, for the unreachable case, none listening)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from apportion.cli.common import CliError
from apportion.cli.main import app
from apportion.cli.submit_cmd import parse_duration, parse_gpu_memory


def run(tmp_path: Path, *args: str, **env: str) -> Result:
    base = {"APPORTION_CONFIG": str(tmp_path / "cfg" / "config.yaml"), "APPORTION_SERVER": "",
            "APPORTION_TOKEN": "", "COLUMNS": "120"}
    return CliRunner().invoke(app, list(args), env={**base, **env})


@pytest.mark.parametrize(("text", "mib"), [("20Gi", 20480), ("512Mi", 512), ("1024", 1024),
                                           ("1.5Gi", 1536), ("1Ti", 1048576), ("8G", 8192)])
def test_gpu_memory_units(text: str, mib: int) -> None:
    assert parse_gpu_memory(text) == mib


@pytest.mark.parametrize("text", ["20GB", "-1Gi", "abc", "0Mi", "0.5Mi"])
def test_gpu_memory_rejected(text: str) -> None:
    with pytest.raises(CliError) as info:
        parse_gpu_memory(text)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(("text", "seconds"), [("3600", 3600), ("30m", 1800), ("2h", 7200),
                                               ("1d", 86400), ("90s", 90)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


def test_not_logged_in_is_a_usage_error(tmp_path: Path) -> None:
    result = run(tmp_path, "workloads", "list")
    assert result.exit_code == 2
    assert "not logged in: run `apportion login --server URL" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [
    ["submit", "x", "--gpus", "1", "--gpu-memory", "2Gi", "--team", "t"],
    ["submit", "x", "--team", "t"],
    ["submit", "--team", "t", "--gpus", "1"],
    ["submit", "x", "--gpus", "1"],
    ["submit", "x", "--team", "t", "--gpus", "1", "--class", "gold"],
    ["submit", "x", "--team", "t", "--gpu-memory", "lots"],
    ["submit", "x", "--team", "t", "--gpus", "1", "--env", "NOEQUALS"],
    ["workloads", "list", "-o", "xml"],
    ["teams", "move", "nlp"],
    ["teams", "set", "nlp"],
    ["nosuchcommand"],
])
def test_bad_arguments_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = run(tmp_path, *args, APPORTION_SERVER="http://127.0.0.1:9", APPORTION_TOKEN="t")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_unreachable_server_is_one_line_exit_1(tmp_path: Path) -> None:
    # bound and never listening, held for the test: a connection is refused, and no
    # other process can start serving on the port meanwhile
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        result = run(tmp_path, "teams", "tree", APPORTION_SERVER=url, APPORTION_TOKEN="apt_a_b")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot reach the server at {url}" in lines[0]


def test_config_set_get_and_file_mode(tmp_path: Path) -> None:
    assert run(tmp_path, "config", "set", "default-team", "nlp").exit_code == 0
    assert run(tmp_path, "config", "set", "output", "wide").exit_code == 0
    assert run(tmp_path, "config", "get", "default_team").stdout.strip() == "nlp"
    everything = run(tmp_path, "config", "get").stdout
    assert "output: wide" in everything and "default_team: nlp" in everything
    path = tmp_path / "cfg" / "config.yaml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    bad = run(tmp_path, "config", "set", "output", "xml")
    assert bad.exit_code == 2 and "output must be one of" in bad.stderr
    assert run(tmp_path, "config", "set", "colour", "red").exit_code == 2


def test_env_overrides_config_server(tmp_path: Path) -> None:
    run(tmp_path, "config", "set", "server", "http://from-file:1")
    got = run(tmp_path, "config", "get", "server", APPORTION_SERVER="http://from-env:2")
    assert got.stdout.strip() == "http://from-env:2"


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete"), ("zsh", "compdef"),
                                               ("fish", "complete")])
def test_completion_scripts(tmp_path: Path, shell: str, marker: str) -> None:
    result = run(tmp_path, "completion", shell)
    assert result.exit_code == 0
    assert marker in result.stdout and "_APPORTION_COMPLETE" in result.stdout
