"""Writes ``unit_pods.csv``: a day of 1-GPU elastic jobs from four teams at
~1.25x the 16 GPUs of ``four_teams.yaml``, every job the same priority: the
fairness test without lumps (docs/replay.md, "Fairness without lumps").

Deterministic (seeded): running it again writes the same file.
Usage: python examples/replay/make_unit_pods.py [OUT.csv]
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

HORIZON = 86_400  # one day of submissions
MEAN_GPUS = 5.0  # each team's offered load, in GPUs busy on average
DURATION = (1_800, 7_200)  # seconds, uniform


def rows(seed: int = 7) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    out = []
    mean_duration = sum(DURATION) / 2
    for team in ("a", "b", "c", "d"):
        at, i = 0.0, 0
        while True:
            duration = rng.randint(*DURATION)
            at += rng.expovariate(MEAN_GPUS / mean_duration)
            if at >= HORIZON:
                break
            out.append((int(at), f"{team}-{i},{int(at)},{duration},{team},elastic,50,1"))
            i += 1
    return sorted(out)


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("unit_pods.csv")
    lines = ["name,submit,duration,team,class,priority,gpus", *(r for _at, r in rows())]
    path.write_text("\n".join(lines) + "\n")
    print(f"{path}: {len(lines) - 1} jobs")


if __name__ == "__main__":
    main()
