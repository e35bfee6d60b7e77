from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def scenario_file(tmp_path: Path):
    """Write YAML text to a file in a temporary directory; return its path."""

    def write(text: str, name: str = "scenario.yaml") -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write
