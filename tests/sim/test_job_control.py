"""Job control in scenario files (issue 16): time limits, dependencies,
holds and arrays, run through ``apportion simulate`` as a user would."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.helpers import cli, example


def _w(out: dict[str, Any], name: str) -> dict[str, Any]:
    return out["workloads"][name]


def test_time_limits_example_ends_runs_at_their_limit() -> None:
    out = example("time_limits")
    long = _w(out, "long")
    assert (long["status"], long["ended_at"]) == ("Failed", 3600)
    assert long["reason"]["code"] == "TIME_LIMIT"
    # the pool's default applies to work that gives no limit
    assert (_w(out, "default")["status"], _w(out, "default")["ended_at"]) == ("Failed", 7200)
    # the grace holds long's GPUs until 3660: next needs them
    assert _w(out, "next")["started_at"] == 3660
    assert _w(out, "short")["status"] == "Completed"
    # above the pool's maximum: the maximum applies; requeue_on_timeout starts attempt 2
    capped = _w(out, "capped")
    assert [a["status"] for a in capped["attempts"]] == ["Failed", "Cancelled"]
    assert capped["attempts"][0]["ended_at"] == 14400


def test_dependencies_example_waits_runs_and_cancels_with_a_reason() -> None:
    out = example("dependencies")
    assert _w(out, "train")["started_at"] == 100  # prepare completed at 100
    assert _w(out, "cleanup")["started_at"] == 400  # after train, whatever the outcome
    never = _w(out, "report-failure")
    assert never["status"] == "Cancelled" and never["ended_at"] == 400
    assert never["reason"]["code"] == "DEPENDENCY_NEVER_SATISFIED"
    assert "workload 3 ended Completed" in never["reason"]["message"]
    assert _w(out, "retry")["started_at"] == 50  # flaky failed at 50: notok is met
    assert _w(out, "publish")["status"] == "Cancelled"


def test_arrays_example_runs_at_most_the_limit_at_once() -> None:
    out = example("arrays")
    starts = [_w(out, f"sweep[{i}]")["started_at"] for i in range(10)]
    assert starts == [0, 0, 0, 100, 100, 100, 200, 200, 200, 300]
    assert _w(out, "held")["started_at"] == 150  # released at 150


def _run(tmp_path: Any, text: str, *args: str) -> dict[str, Any]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return cli(str(path), "-o", "json", *args).json()


BASE = """
pools:
  - name: main
    nodes: [{name: n1, gpus: 4}]
teams: [{name: t}]
"""


def test_a_waiting_dependent_shows_reason_dependency(tmp_path: Any) -> None:
    out = _run(tmp_path, BASE + """
workloads:
  - {name: a, team: t, gpus: 1, duration: 100}
  - {name: b, team: t, gpus: 1, duration: 100, after: ["a:ok"]}
""", "--until", "50")
    b = _w(out, "b")
    assert b["status"] == "Pending"
    assert b["reason"]["code"] == "DEPENDENCY" and "1 (ok)" in b["reason"]["message"]


def test_a_held_workload_waits_with_reason_held(tmp_path: Any) -> None:
    out = _run(tmp_path, BASE + """
workloads:
  - {name: a, team: t, gpus: 1, duration: 100, hold: true}
""")
    assert _w(out, "a")["status"] == "Pending"
    assert _w(out, "a")["reason"]["code"] == "HELD"


def test_array_members_beyond_the_limit_show_reason_array_limit(tmp_path: Any) -> None:
    out = _run(tmp_path, BASE + """
workloads:
  - {name: s, team: t, gpus: 1, duration: 100, array: "1,3,5-7%2"}
""", "--until", "10")
    assert sorted(out["workloads"]) == ["s[1]", "s[3]", "s[5]", "s[6]", "s[7]"]
    running = [n for n, w in out["workloads"].items() if w["status"] == "Running"]
    assert running == ["s[1]", "s[3]"]
    assert _w(out, "s[7]")["reason"]["code"] == "ARRAY_LIMIT"


def test_an_integer_time_limit_is_seconds_and_a_limit_equal_to_duration_completes(
    tmp_path: Any,
) -> None:
    out = _run(tmp_path, BASE + """
workloads:
  - {name: a, team: t, gpus: 1, duration: 3600, time_limit: 60}
  - {name: b, team: t, gpus: 1, duration: 3600, time_limit: "1:00:00"}
""")
    assert (_w(out, "a")["status"], _w(out, "a")["ended_at"]) == ("Failed", 60)
    assert (_w(out, "b")["status"], _w(out, "b")["ended_at"]) == ("Completed", 3600)


@pytest.mark.parametrize(("workload", "field", "text"), [
    ("{name: b, team: t, gpus: 1, after: [zz]}", "workloads[1].after[0]", "no such workload"),
    ("{name: b, team: t, gpus: 1, after: [b]}", "workloads[1].after[0]", "not submitted before"),
    ("{name: b, team: t, gpus: 1, array: '0-20000'}", "workloads[1].array", "10000"),
    ("{name: b, team: t, gpus: 1, time_limit: 'soon'}", "time_limit", "not a time limit"),
])
def test_bad_job_control_is_a_clear_error(
    tmp_path: Any, workload: str, field: str, text: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(BASE + f"workloads:\n  - {{name: a, team: t, gpus: 1}}\n  - {workload}\n")
    run = cli(str(path))
    assert run.exit_code != 0
    assert field in run.stderr and text in run.stderr
