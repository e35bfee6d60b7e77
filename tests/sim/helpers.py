"""Helpers for the simulator's tests: run ``apportion simulate`` as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from apportion.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        assert self.exit_code == 0, self.stderr
        return json.loads(self.stdout)


def cli(*args: str, stdin: str | None = None) -> Run:
    """``apportion simulate ARGS`` in-process (Typer's runner), wide output."""
    runner = CliRunner(env={"COLUMNS": "200"})
    result = runner.invoke(app, ["simulate", *args], input=stdin)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


def shell(*args: str, stdin: str | None = None) -> Run:
    """``apportion simulate ARGS`` in a fresh Python process, as from a shell."""
    proc = subprocess.run(
        [sys.executable, "-c", "from apportion.cli.main import main; main()", "simulate", *args],
        input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def example(name: str, *args: str) -> dict[str, Any]:
    """The JSON outcome of ``examples/<name>.yaml``."""
    return cli(str(EXAMPLES / f"{name}.yaml"), "-o", "json", *args).json()
