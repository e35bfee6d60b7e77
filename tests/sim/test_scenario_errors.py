"""Bad scenario files: one clear line naming the field's path, exit code 2,
no traceback; unknown keys suggest the closest allowed key."""

from __future__ import annotations

import pytest

from apportion.domain.errors import ValidationError
from apportion.sim.scenario import parse_scenario
from tests.sim.helpers import cli, shell

POOL = "pools: [{name: main, nodes: [{name: a, gpus: 8}, {prefix: b, count: 2, gpus: 4}]}]\n"
TEAM = "teams: [{name: r}]\n"


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        pytest.param(
            POOL + "teams: [{name: r, reservations: {main: 8}, children: "
            "[{name: x}, {name: y, reservations: {main: -1}}]}]",
            "teams[0].children[1].reservations.main", ["must be >= 0"], id="negative-reservation",
        ),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpu: 1}]",
                     "workloads[0].gpu", ["did you mean 'gpus'?"], id="unknown-key"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: rr, gpus: 1}]",
                     "workloads[0].team", ["no team named 'rr'", "did you mean 'r'?"],
                     id="unknown-team"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1.5}]",
                     "workloads[0].gpus", ["0.25, 0.5, 0.75"], id="bad-gpus"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, class: gold, gpus: 1}]",
                     "workloads[0].class", ["reserved, elastic"], id="bad-class"),
        pytest.param(POOL + "teams: [{name: r, reservations: {mian: 2}}]",
                     "teams[0].reservations.mian", ["did you mean 'main'?"], id="unknown-pool"),
        pytest.param(POOL + "teams: [{name: r, reservations: {main: 20}}]",
                     "teams", ["more than its capacity of 16"], id="over-capacity"),
        pytest.param(POOL + "teams: [{name: r, reservations: {main: 4}, children: "
                     "[{name: c, reservations: {main: 6}}]}]",
                     "teams[0].reservations.main", ["reserves only 4"], id="children-over-parent"),
        pytest.param(POOL + "teams: [{name: r, children: [{name: c}]}]\n"
                     "workloads: [{name: w, team: r, gpus: 1}]",
                     "workloads[0].team", ["leaf teams"], id="not-a-leaf"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1}]\n"
                     "events: [{at: 0, cancel: w}]",
                     "events[0].cancel", ["submitted at 0"], id="event-before-submission"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1}]\n"
                     "events: [{at: 5, cancle: w}]",
                     "events[0].cancle", ["did you mean 'cancel'?"], id="unknown-event"),
        pytest.param(POOL + TEAM + "events: [{at: 5, node_down: zz}]",
                     "events[0].node_down", ["no node named 'zz'"], id="unknown-node"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 2, "
                     "placement: [{node: a, devices: [0]}]}]",
                     "workloads[0].placement[0].devices", ["needs 2"], id="placement-devices"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, "
                     "placement: [{node: a, devices: [9]}]}]",
                     "workloads[0].placement[0].devices[0]", ["<= 7"], id="placement-index"),
        pytest.param("pools: [{name: main, nodes: [{name: a, gpus: 8}, {name: a, gpus: 8}]}]",
                     "pools[0].nodes[1]", ["already defined"], id="duplicate-node"),
        pytest.param("pools: [{name: main, start_delay: -5, nodes: []}]",
                     "pools[0].start_delay", [">= 0"], id="negative-delay"),
        pytest.param("pool: []", "pool", ["did you mean 'pools'?"], id="top-level-typo"),
        pytest.param(POOL + "teams: [{name: R_1}]", "teams[0].name", ["DNS label"], id="slug"),
        pytest.param(POOL + "teams: [{name: r, bursting_priority: 11}]",
                     "teams[0].bursting_priority", ["1..10"], id="weight"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1}, "
                     "{name: w, team: r, gpus: 1}]", "workloads[1]", ["already defined"],
                     id="duplicate-workload"),
        pytest.param(POOL + TEAM + "workloads: [{name: u, team: r, gpus: 1}, "
                     "{name: v, team: r, gpus: 1}, {name: w, team: r, gpus: 1, cpu: 0.0005}]",
                     "workloads[2].cpu", ["must be a multiple of 0.001 ≥ 0"], id="cpu-step"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, cpu: -2}]",
                     "workloads[0].cpu", ["must be a multiple of 0.001 ≥ 0"], id="cpu-negative"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, cpu: 8c}]",
                     "workloads[0].cpu", ["multiple of 0.001", "8 or 0.5"], id="cpu-text"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, memory_mib: 1.5}]",
                     "workloads[0].memory_mib", ["whole number of MiB"], id="memory-fraction"),
        pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, memory: 64}]",
                     "workloads[0].memory", ["did you mean 'memory_mib'?"],
                     id="memory-key-typo"),
        pytest.param("pools: [{name: main, nodes: [{name: a, gpus: 8, cpu: 96.0001}]}]",
                     "pools[0].nodes[0].cpu", ["must be a multiple of 0.001 ≥ 0"],
                     id="node-cpu"),
        pytest.param("pools: [{name: main, nodes: [{name: a, gpus: 8, memory_mib: -1}]}]",
                     "pools[0].nodes[0].memory_mib", ["whole number of MiB ≥ 0"],
                     id="node-memory"),
        pytest.param("pools: [{name: main, packing: bestfit, nodes: []}]",
                     "pools[0].packing", ["did you mean 'best_fit'?",
                                          "fragmentation, best_fit"], id="packing"),
        pytest.param("pools: [{name: main, typical_pods: [{gpus: 8}, {gpus: 0.3}], nodes: []}]",
                     "pools[0].typical_pods[1].gpus", ["0.3 is not a valid GPU request",
                                                       "0.25, 0.5, 0.75"], id="typical-gpus"),
        pytest.param("pools: [{name: main, typical_pods: [{gpus: 1, cuont: 2}], nodes: []}]",
                     "pools[0].typical_pods[0].cuont", ["gpus, count, cpu, memory_mib"],
                     id="typical-key"),
    ],
)
def test_errors_name_the_field(text: str, field: str, words: list[str]) -> None:
    with pytest.raises(ValidationError) as err:
        parse_scenario(text)
    assert err.value.field == field
    for word in words:
        assert word in str(err.value)


def test_cli_bad_file_exit_2_one_clear_line(scenario_file) -> None:
    path = scenario_file(POOL + TEAM + "workloads: [{name: w, team: r, gpu: 1}]")
    run = cli(path, "-o", "json")
    assert run.exit_code == 2
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "workloads[0].gpu: unknown key; did you mean 'gpus'?" in lines[0]


def test_shell_no_traceback_for_yaml_syntax_or_missing_file(tmp_path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("pools: [{name: main\nteams: [")
    for path in (str(bad), str(tmp_path / "missing.yaml")):
        run = shell(path)
        assert run.exit_code == 2
        assert "Traceback" not in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
    assert "line" in shell(str(bad)).stderr


def test_cli_bad_cpu_exit_2_one_line(scenario_file) -> None:
    path = scenario_file(POOL + TEAM + "workloads: [{name: u, team: r, gpus: 1}, "
                         "{name: v, team: r, gpus: 1}, {name: w, team: r, gpus: 1, cpu: 0.0001}]")
    run = cli(path, "-o", "json")
    assert run.exit_code == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        next(line for line in run.stderr.splitlines() if "workloads[2].cpu" in line)]
    assert "workloads[2].cpu: must be a multiple of 0.001 ≥ 0" in run.stderr


def test_host_resources_and_packing_are_read_and_kept() -> None:
    scenario = parse_scenario(
        "pools: [{name: main, packing: best_fit, nodes: [{name: a, gpus: 8, cpu: 96, "
        "memory_mib: 786432}, {name: b, gpus: 8}]}]\n" + TEAM +
        "workloads: [{name: w, team: r, gpus: 1, cpu: 0.5, memory_mib: 16384}, "
        "{name: v, team: r, gpus: 1}]")
    assert scenario.pools["main"].packing == "best_fit"
    a, b = scenario.nodes
    assert (a.cpu_milli, a.memory_mib) == (96000, 786432)
    assert (b.cpu_milli, b.memory_mib) == (None, None)  # not stated: not limited
    w, v = (x.spec for x in scenario.workloads)
    assert (w.cpu_milli, w.memory_mib) == (500, 16384)
    assert (v.cpu_milli, v.memory_mib) == (0, 0)
    default = parse_scenario(POOL)
    assert default.pools["main"].packing == "fragmentation"


def test_placement_that_does_not_fit_refuses_the_file(scenario_file) -> None:
    path = scenario_file(POOL + TEAM + "workloads:\n"
                         "  - {name: w, team: r, gpus: 4, placement: [{node: a, devices: "
                         "[0, 1, 2, 3]}]}\n"
                         "  - {name: v, team: r, gpus: 1, at: 10, "
                         "placement: [{node: a, devices: [3]}]}\n")
    run = cli(path)
    assert run.exit_code == 2
    assert "workloads[1].placement[0].devices" in run.stderr and "held by w" in run.stderr


def test_unknown_output_format_is_a_usage_error(scenario_file) -> None:
    run = cli(scenario_file(POOL), "-o", "xml")
    assert run.exit_code == 2


@pytest.mark.parametrize(("text", "field", "words"), [
    pytest.param("pools: [{name: main, nodes: [{prefix: n, count: 100000000000, gpus: 8}]}]",
                 "pools[0].nodes[0].count", ["<= 100000"], id="node-count"),
    pytest.param("pools: [{name: main, nodes: [{name: a, gpus: 100000000}]}]",
                 "pools[0].nodes[0].gpus", ["<= 1024"], id="node-gpus"),
    pytest.param(POOL + TEAM + "workloads: [{prefix: w, count: 10000000000, team: r, gpus: 1}]",
                 "workloads[0].count", ["<= 100000"], id="workload-count"),
    pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, pods: 100000000000}]",
                 "workloads[0].pods", ["1..10000"], id="pods"),
    pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1e308}]",
                 "workloads[0].gpus", ["more GPUs than one pod"], id="gpus-huge"),
    pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: .inf}]",
                 "workloads[0].gpus", ["finite"], id="gpus-inf"),
    pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, at: 10000000000000}]",
                 "workloads[0].at", ["<= 3153600000"], id="at"),
    pytest.param(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, "
                 "duration: 100000000000000}]",
                 "workloads[0].duration", ["out of range"], id="duration"),
    pytest.param(POOL + "teams: [{name: r, reservations: {main: 1e30}}]",
                 "teams[0].reservations.main", ["<= 1000000"], id="reservation"),
    # each within its own limit, together too much: 102,400,000 simulated devices
    # never finished (and 100,000 + 1 nodes passed the per-entry count)
    pytest.param("pools: [{name: main, nodes: [{prefix: n, count: 100000, gpus: 1024}]}]",
                 "pools[0].nodes[0]", ["102400000 GPUs", "at most 1000000 GPUs"],
                 id="file-gpus"),
    pytest.param("pools: [{name: main, nodes: [{prefix: n, count: 100000, gpus: 1}, "
                 "{name: extra, gpus: 1}]}]",
                 "pools[0].nodes[1]", ["100001 nodes", "at most 100000 nodes"],
                 id="file-nodes"),
])
def test_every_count_size_and_time_has_a_limit(text: str, field: str, words: list[str]) -> None:
    with pytest.raises(ValidationError) as err:
        parse_scenario(text)
    assert err.value.field == field
    for word in words:
        assert word in str(err.value)


def test_a_hundred_billion_nodes_exit_2_at_once(scenario_file) -> None:
    """Checked before a single node is built: the run that grew to 24 GB."""
    path = scenario_file("pools: [{name: main, nodes: [{prefix: n, count: 100000000000, "
                         "gpus: 8}]}]\nteams: [{name: r}]\n")
    run = shell(path)
    assert run.exit_code == 2
    assert run.stderr.strip().endswith(
        "pools[0].nodes[0].count: must be <= 100000, got 100000000000 "
        "(allowed: an integer 1..100000)")


def test_a_file_of_too_many_gpus_exits_2_at_once(scenario_file) -> None:
    path = scenario_file("pools: [{name: main, nodes: [{prefix: n, count: 100000, "
                         "gpus: 1024}]}]\nteams: [{name: r}]\n")
    run = shell(path)
    assert run.exit_code == 2
    assert run.stderr.strip().endswith(
        "pools[0].nodes[0]: brings the file to 102400000 GPUs "
        "(allowed: at most 1000000 GPUs on all nodes)")


def test_the_summary_counts_in_singular_for_one(scenario_file) -> None:
    path = scenario_file(POOL + TEAM + "workloads: [{name: w, team: r, gpus: 1, duration: 5}]")
    run = cli(path)
    assert run.exit_code == 0
    summary = run.stdout.strip().splitlines()[-1]
    assert ": 1 workload, 0 preemptions," in summary, summary


def test_typical_pods_are_read_and_kept() -> None:
    scenario = parse_scenario(
        "pools: [{name: main, typical_pods: [{gpus: 0.5, count: 3, cpu: 4}, {gpus: 8}], "
        "nodes: [{name: a, gpus: 8}]}]\n" + TEAM + "workloads: []")
    assert [t.to_json() for t in scenario.pools["main"].typical_pods or ()] == [
        {"gpus": 0.5, "count": 3, "cpu": 4, "memory_mib": 0},
        {"gpus": 8, "count": 1, "cpu": 0, "memory_mib": 0}]
    assert parse_scenario("pools: [{name: main, nodes: [{name: a, gpus: 8}]}]\n" + TEAM
                          + "workloads: []").pools["main"].typical_pods is None
