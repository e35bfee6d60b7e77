"""The engine's tests kill its mutants: ``scripts/mutation --ci`` runs mutmut on
a fixed sample of the preemption, fair-share and placement code against the
engine and domain scenario tables, and this test holds the score
(docs/testing.md, "Mutation testing", has the runs and the survivors).

CI runs ``scripts/mutation --ci`` as its own step after the suite (.ci/run),
with the same threshold; inside the suite it would add minutes to a run
whose budget is 15, so here it runs only when asked:
``APPORTION_MUTATION=1 ./scripts/test tests/test_mutation.py``. Otherwise it
is skipped, with that reason in the summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The CI sample (one in 40, scenario tables only, no Hypothesis properties
#: since 2026-12-02) scored 100 % (170 of 170, 11 listed equivalents apart;
#: 75.7 % before the scenarios of issue 19; docs/testing.md); .ci/run's step
#: uses the same threshold. The margin (about 7 survivors) is for the sample
#: moving with the source.
MIN_SCORE = 96.0


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("APPORTION_MUTATION") != "1",
    reason="CI runs the sampled mutation score as its own step (.ci/run);"
    " set APPORTION_MUTATION=1 to run it here",
)
@pytest.mark.timeout(1800)
def test_the_sampled_engine_mutants_are_killed() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Its own process group: on a timeout mutmut's workers go too.
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "mutation"), "--ci", "--min-score", str(MIN_SCORE)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=1700)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail("scripts/mutation --ci took over 1700 s:\n" + stdout[-3000:])
    lines = [ln for ln in stdout.splitlines() if ln.startswith("MUTATION_STATS ")]
    assert lines, stdout[-3000:] + stderr[-3000:]
    stats = json.loads(lines[-1].removeprefix("MUTATION_STATS "))
    apart = ("score", "not checked", "skipped", "equivalent")
    tested = sum(v for k, v in stats.items() if k not in apart and not k.endswith("_score"))
    assert tested >= 50, stats  # the sample really ran
    assert stats.get("not checked", 0) == 0, stats
    assert stats["score"] >= MIN_SCORE, (stats, (ROOT / ".mutation/ci/survivors.txt").read_text())
    assert proc.returncode == 0, stderr[-3000:]
