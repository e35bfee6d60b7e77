"""The chaos suite's figures: each test prints one line and, when
``APPORTION_CHAOS_FIGURES`` names a file, appends it there as JSON, so that
``scripts/chaos-figures`` can rebuild the table in docs/reliability.md."""

from __future__ import annotations

import json
import os
from typing import Any


def record(part: str, backend: str, summary: str, **numbers: Any) -> None:
    """``summary``: what a reader sees; ``numbers``: the counts behind it."""
    print(f"{part} ({backend}): {summary}")
    path = os.environ.get("APPORTION_CHAOS_FIGURES")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"part": part, "backend": backend, "summary": summary,
                                  **numbers}) + "\n")
