"""The published Alibaba 2023 pod lists differ in their columns (the
``multigpu`` lists have no times, the simulator's ``nomem`` lists no memory);
``apportion replay`` reads them all (docs/replay.md, "Traces")."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apportion.cli.main import app
from apportion.domain.errors import ValidationError
from apportion.replay import report
from apportion.replay.alibaba import load_alibaba
from apportion.replay.org import load_org
from apportion.replay.runner import Replay, run, window_end
from apportion.replay.scenario_trace import load_scenario_trace
from apportion.replay.trace import UNTIL_END

VARIANTS = Path(__file__).parent / "fixtures" / "alibaba-variants"
ONE_TEAM = ("pool: {name: main}\nteams: [{name: a, reservations: {main: 8}}]\n"
            "mapping:\n  teams: {by: hash, buckets: {a: 1}}\n")


def test_a_list_without_times_is_one_deep_queue_in_row_order() -> None:
    trace = load_alibaba(str(VARIANTS / "openb_pod_list_multigpu50.csv"))
    assert [j.name for j in trace.jobs] == ["openb-pod-0000", "openb-pod-0002",
                                            "openb-pod-0003", "openb-pod-0004",
                                            "openb-pod-0005"]
    assert {(j.submit, j.duration) for j in trace.jobs} == {(0, UNTIL_END)}
    assert [j.gpu_milli for j in trace.jobs] == [4000, 8000, 2000, 2000, 500]
    assert trace.jobs[0].memory_mib == 16384 and trace.jobs[0].qos is None
    assert trace.counts["no_gpu"] == 1 and trace.counts["never_scheduled"] == 0
    assert any("no times in this pod list" in note for note in trace.notes)
    # the replay of such a list lasts one second: every arrival scheduled once
    assert window_end(trace, 0) == 1


def test_each_policy_fills_the_cluster_from_the_queue_in_its_own_order(tmp_path: Path) -> None:
    org = tmp_path / "org.yaml"
    org.write_text(ONE_TEAM)
    trace = load_alibaba(str(VARIANTS / "openb_pod_list_multigpu50.csv"))
    results = run(Replay(trace, load_org(str(org)), ("apportion", "fifo")))
    assert results["window"] == {"start": 0, "end": 1}
    fifo, ours = results["policies"]["fifo"], results["policies"]["apportion"]
    # fifo takes the rows in order: 4 GPUs, the 8-GPU pod no longer fits, 2 and 2:
    # the node is full and the 8-GPU pod and the half GPU wait
    assert fifo["utilization"]["average"] == pytest.approx(1.0)
    assert fifo["never_started"]["elastic"] == 2
    # apportion orders one team's work by its deficit after admitting it
    # (SPEC 6.2): the smallest first, 0.5 + 2 + 2; then the 4-GPU pod finds
    # 3 whole devices, and the 8-GPU pod none
    assert ours["utilization"]["average"] == pytest.approx(4.5 / 8)
    assert ours["never_started"]["elastic"] == 2
    # one state for the whole second, its idle GPUs counted at every point:
    # 3.5 free, fewer than either waiting pod asks
    assert ours["idle"]["average_gpus"] == pytest.approx(3.5)
    assert ours["idle"]["by_reason_gpus"]["too_few_free"] == pytest.approx(3.5)
    assert ours["idle"]["instants"]["too_few_free"] == 4000


def test_a_list_without_memory_requests_none() -> None:
    trace = load_alibaba(str(VARIANTS / "openb_pod_list_nomem.csv"))
    jobs = {j.name: j for j in trace.jobs}
    assert jobs["openb-pod-0000"].memory_mib == 0
    assert (jobs["openb-pod-0001"].submit, jobs["openb-pod-0001"].duration) == (100, 750)
    assert jobs["openb-pod-0001"].gpu_types == ("G2",) and jobs["openb-pod-0001"].qos == "BE"


def test_a_list_with_some_times_but_not_all_is_refused_by_name() -> None:
    with pytest.raises(ValidationError) as err:
        load_alibaba(str(VARIANTS / "openb_pod_list_partial.csv"))
    text = str(err.value)
    assert text.startswith("openb_pod_list_partial.csv: missing column(s) deletion_time, "
                           "scheduled_time")
    assert "or none (arrival order)" in text


def test_the_command_replays_a_list_without_times(tmp_path: Path) -> None:
    org = tmp_path / "org.yaml"
    org.write_text(ONE_TEAM)
    got = CliRunner().invoke(app, ["replay", str(VARIANTS / "openb_pod_list_multigpu50.csv"),
                                   "--org", str(org), "--policy", "fifo", "-o", "json"])
    assert got.exit_code == 0, got.output
    results = json.loads(got.stdout)
    assert results["trace"]["jobs"] == 5
    assert results["policies"]["fifo"]["utilization"]["average"] == pytest.approx(1.0)


def test_work_without_a_duration_does_not_stretch_the_window(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "pools: [{name: main, nodes: [{name: n1, gpus: 8}]}]\n"
        "teams: [{name: a, reservations: {main: 8}}]\n"
        "workloads:\n"
        "  - {name: forever, team: a, class: elastic, gpus: 1}\n"
        "  - {name: short, team: a, class: elastic, gpus: 1, duration: 100, at: 20}\n")
    trace, _ = load_scenario_trace(str(scenario))
    # the window ends with the last job that ends by itself, not 10**9 s later
    assert window_end(trace, 0) == 120


def test_the_report_of_a_trace_without_reserved_work_draws_cleanly(tmp_path: Path) -> None:
    org = tmp_path / "org.yaml"
    org.write_text(ONE_TEAM)
    trace = load_alibaba(str(VARIANTS / "openb_pod_list_multigpu50.csv"))
    results = run(Replay(trace, load_org(str(org)), ("fifo",)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's empty-legend warning included
        written = report.write(results, str(tmp_path / "out"))
    assert (tmp_path / "out" / "report.html").is_file() and written
