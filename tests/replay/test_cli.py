"""``apportion replay`` end to end on small traces, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from apportion.cli.main import app

FIXTURES = Path(__file__).parent / "fixtures"
TINY = str(FIXTURES / "tiny.csv")
ORG = str(FIXTURES / "org.yaml")


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["replay", *args])


def test_csv_trace_prints_the_summary_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    got = invoke(TINY, "--org", ORG, "--report", str(out), "--policy", "reclaim-to-quota",
                 "--policy", "apportion")
    assert got.exit_code == 0, got.output
    for name in ("apportion", "reclaim-to-quota", "GPU util %", "over-preemption"):
        assert name in got.output
    assert "goal: reserved workloads preempted: 0 (target 0): met" in got.output
    results = json.loads((out / "results.json").read_text())
    assert list(results["policies"]) == ["apportion", "reclaim-to-quota"]
    assert (out / "report.html").is_file()


def test_all_five_policies_run_by_default() -> None:
    got = invoke(TINY, "--org", ORG, "-o", "table")
    assert got.exit_code == 0, got.output
    for name in ("apportion", "fifo", "strict-priority", "flat-fair-share", "reclaim-to-quota"):
        assert name in got.output


def test_json_output_with_chosen_policies_and_a_window() -> None:
    got = invoke(TINY, "--org", ORG, "--policy", "fifo", "--policy", "apportion",
                 "--window", "50s", "-o", "json")
    assert got.exit_code == 0, got.output
    results = json.loads(got.stdout)
    assert list(results["policies"]) == ["apportion", "fifo"]
    assert results["window"] == {"start": 0, "end": 50}


def test_alibaba_folder_end_to_end(tmp_path: Path) -> None:
    org = tmp_path / "org.yaml"
    org.write_text(
        "pool: {name: main}\ncluster: {gpus: 10}\n"
        "teams: [{name: a, reservations: {main: 4}}, {name: b, bursting_priority: 2}]\n"
        "mapping:\n  teams: {by: hash, buckets: {a: 1, b: 1}}\n"
        "  classes: {LS: {class: reserved}, Guaranteed: {class: reserved}}\n"
        "  reserved_overflow: {class: elastic, priority: 90}\n")
    got = invoke(str(FIXTURES / "alibaba"), "--org", str(org), "-o", "json")
    assert got.exit_code == 0, got.output
    results = json.loads(got.stdout)
    assert results["trace"]["jobs"] == 6
    assert results["org"]["capacity_gpus"] == 10
    assert results["policies"]["apportion"]["workloads"] == 6


def test_scenario_file_replays_with_its_own_org() -> None:
    path = str(Path(__file__).parents[2] / "examples" / "s5_surplus_split.yaml")
    got = invoke(path, "--policy", "apportion", "--policy", "flat-fair-share", "-o", "json")
    assert got.exit_code == 0, got.output
    results = json.loads(got.stdout)
    teams = results["policies"]["apportion"]["teams"]
    assert set(teams) == {"nlp", "vision", "production"}


def test_bad_input_is_one_line_naming_the_field(tmp_path: Path) -> None:
    got = invoke(TINY, "--org", ORG, "--policy", "lottery")
    assert got.exit_code == 2
    assert "'lottery' is not a policy; allowed: apportion, fifo" in got.output
    got = invoke(TINY)
    assert got.exit_code == 2 and "--org: an org file is required" in got.output
    got = invoke(TINY, "--org", ORG, "--window", "soon")
    assert got.exit_code == 2 and "--window: 'soon' is not a duration" in got.output
    bad = tmp_path / "org.yaml"
    bad.write_text("teams: [{name: alpha, reservations: {main: 100}}]\n"
                   "cluster: {nodes: [{name: n1, gpus: 8}]}\n")
    got = invoke(TINY, "--org", str(bad))
    assert got.exit_code == 2
    assert "teams: top-level teams reserve 100 GPUs in pool 'main', more than its capacity " \
        "of 8" in got.output
    assert "Traceback" not in got.output
