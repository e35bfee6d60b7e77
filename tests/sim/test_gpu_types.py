"""Scenario workloads that accept several GPU types (SPEC 3) and ask for host
CPU/memory (SPEC 1): read, placed only on nodes of those types, and shown in
``apportion simulate``'s JSON and table; a bad list names the field's path."""

from __future__ import annotations

from tests.sim.helpers import cli

SCENARIO = """
pools:
  - name: mixed
    nodes:
      - {name: old, gpus: 4, gpu_type: k80}
      - {name: v16, gpus: 4, gpu_type: v100-16g, cpu: 32, memory_mib: 262144}
      - {name: v32, gpus: 4, gpu_type: v100-32g, cpu: 32, memory_mib: 262144}
teams:
  - {name: ml}
workloads:
  - {name: train, team: ml, gpus: 4, pods: 2, gang: true, gpu_type: [v100-32g, v100-16g],
     cpu: 8, memory_mib: 65536, duration: 100}
  - {name: legacy, team: ml, gpus: 1, gpu_type: k80, duration: 100}
  - {name: anywhere, team: ml, gpus: 1, gpu_type: [a100], duration: 100}
"""


def test_a_type_list_is_placed_on_those_types_and_shown_with_cpu_and_memory() -> None:
    out = cli("-", "-o", "json", "--until", "0", stdin=SCENARIO).json()
    train, legacy, nothing = (out["workloads"][n] for n in ("train", "legacy", "anywhere"))
    assert train["status"] in ("Starting", "Running")
    assert sorted(p["node"] for p in train["placement"]) == ["v16", "v32"]
    assert train["gpu_type"] == ["v100-16g", "v100-32g"]
    assert (train["cpu"], train["memory_mib"]) == (8, 65536)
    assert (legacy["gpu_type"], legacy["cpu"], legacy["memory_mib"]) == ("k80", 0, 0)
    assert [p["node"] for p in legacy["placement"]] == ["old"]
    assert nothing["gpu_type"] == "a100" and nothing["status"] == "Pending"
    assert nothing["reason"]["code"] == "NO_ELIGIBLE_POOL"


def test_the_table_shows_types_cpu_memory_and_nodes() -> None:
    run = cli("-", "--until", "0", stdin=SCENARIO)
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    head = next(line for line in lines if "GPU type" in line and "CPU/pod" in line)
    assert "memory/pod" in head and "nodes" in head
    train = next(line for line in lines if line.strip("│ ").startswith("train"))
    assert "v100-16g or v100-32g" in train and "64Gi" in train and "v16, v32" in train
    legacy = next(line for line in lines if line.strip("│ ").startswith("legacy"))
    assert " k80 " in legacy and " old " in legacy


def test_a_bad_type_list_names_the_workloads_field(scenario_file) -> None:
    for bad, words in (("[v100, '']", "each type must be a non-empty string"),
                       ("[]", "must list 1-16 types, got 0"),
                       (str([f"t{i}" for i in range(17)]), "must list 1-16 types, got 17")):
        path = scenario_file(SCENARIO.replace("gpu_type: [a100]", f"gpu_type: {bad}"))
        run = cli(path, "-o", "json")
        assert run.exit_code == 2, run.stdout
        assert "Traceback" not in run.stderr and run.stdout == ""
        assert len(run.stderr.strip().splitlines()) == 1
        assert f"workloads[2].gpu_type: {words}" in run.stderr, run.stderr
