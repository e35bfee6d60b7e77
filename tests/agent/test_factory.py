"""Building executors from configuration: the factory, the inventory file, the
rack shape, ``nvidia-smi`` parsing (canned output, and a fake ``nvidia-smi`` on
PATH), and the sim and local executors' ``from_config``. No server needed."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from apportion.agent.executors.local import LocalExecutor
from apportion.agent.executors.sim import SimExecutor
from apportion.agent.factory import build_executor
from apportion.agent.inventory import (
    load_config,
    nodes_from_config,
    nvidia_smi_gpus,
    parse_nvidia_smi,
    parse_shape,
    rack_nodes,
)
from apportion.agent.model import NodeInfo, RunStatus
from tests.agent.test_local import _run

H100 = "0, NVIDIA H100 80GB HBM3, 81559\n1, NVIDIA H100 80GB HBM3, 81559\n"

#: What the local executor reports of this machine: its CPUs and memory.
MACHINE = (len(os.sched_getaffinity(0)) * 1000,
           int(next(line for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith("MemTotal:")).split()[1]) // 1024)


# -- the configuration file -------------------------------------------------------------------

def test_load_config_reads_yaml_and_is_empty_without_a_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("gpu_type: a100\nnodes:\n  - {name: x, gpus: 4}\n")
    assert load_config(path) == {"gpu_type": "a100", "nodes": [{"name": "x", "gpus": 4}]}
    assert load_config(None) == {}
    (tmp_path / "empty.yaml").write_text("")
    assert load_config(tmp_path / "empty.yaml") == {}
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="expected a mapping at the top level"):
        load_config(tmp_path / "list.yaml")


def test_nodes_from_config_expands_prefixes_and_applies_defaults() -> None:
    config = {"gpu_type": "h100", "gpu_memory_mib": 40960, "nodes": [
        {"name": "a1", "gpus": 8, "labels": {"rack": "r1"}},
        {"prefix": "b", "count": 3, "gpus": 4, "gpu_type": "l4", "labels": {"rack": 2}},
    ]}
    nodes = nodes_from_config(config)
    assert [n.name for n in nodes] == ["a1", "b1", "b2", "b3"]
    assert nodes[0] == NodeInfo("a1", 8, "h100", 40960, {"rack": "r1"})
    assert {(n.gpus, n.gpu_type, n.gpu_memory_mib) for n in nodes[1:]} == {(4, "l4", 40960)}
    assert nodes[1].labels == {"rack": "2"}  # label values become strings
    assert nodes_from_config({}) == []
    assert nodes_from_config({"nodes": [{"name": "m"}]})[0].gpu_memory_mib == 81920


@pytest.mark.parametrize(("nodes", "message"), [
    pytest.param(["x"], r"nodes\[0\]: expected a mapping", id="not-a-mapping"),
    pytest.param([{"gpus": 8}], r"nodes\[0\]: needs name, or prefix and count", id="no-name"),
    pytest.param([{"name": "a"}, {"name": "b", "gpus": -1}], r"nodes\[1\].gpus: must be",
                 id="negative-gpus"),
])
def test_nodes_from_config_names_the_bad_entry(nodes: list[object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        nodes_from_config({"nodes": nodes})


def test_shape_and_rack_nodes() -> None:
    assert parse_shape("2X3x8") == (2, 3, 8)
    for bad in ("4x4", "4x0x8", "axbxc", "4x4x8x1"):
        with pytest.raises(ValueError, match="expected RACKSxNODESxGPUS"):
            parse_shape(bad)
    nodes = rack_nodes(3, 2, 8)
    assert [n.name for n in nodes] == ["r1n1", "r1n2", "r2n1", "r2n2", "r3n1", "r3n2"]
    assert [n.labels["zone"] for n in nodes[::2]] == ["z1", "z2", "z1"]
    assert {n.gpus for n in nodes} == {8}


# -- nvidia-smi -------------------------------------------------------------------------------

@pytest.mark.parametrize(("output", "expected"), [
    pytest.param(H100, [(0, "NVIDIA H100 80GB HBM3", 81559),
                        (1, "NVIDIA H100 80GB HBM3", 81559)], id="two-h100"),
    pytest.param("0, NVIDIA A100-SXM4-40GB, 40960.0\n", [(0, "NVIDIA A100-SXM4-40GB", 40960)],
                 id="float-memory"),
    pytest.param("3, Tesla T4, [N/A]\n", [(3, "Tesla T4", 0)], id="memory-not-available"),
    pytest.param("No devices were found\n", [], id="no-devices"),
    pytest.param("\n  0 ,  NVIDIA L4 , 23034  \n\nwarning: something\n",
                 [(0, "NVIDIA L4", 23034)], id="spaces-and-noise"),
    pytest.param("", [], id="empty"),
])
def test_parse_nvidia_smi(output: str, expected: list[tuple[int, str, int]]) -> None:
    assert parse_nvidia_smi(output) == expected


def _fake_nvidia_smi(directory: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable ``nvidia-smi`` first on PATH; it records its arguments."""
    directory.mkdir(exist_ok=True)
    exe = directory / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\necho "$@" > "{directory}/args"\n{script}\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return directory


def test_nvidia_smi_gpus_runs_the_query_and_parses_it(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    d = _fake_nvidia_smi(tmp_path / "bin", f"printf '{H100}'", monkeypatch)
    assert nvidia_smi_gpus() == [(0, "NVIDIA H100 80GB HBM3", 81559),
                                 (1, "NVIDIA H100 80GB HBM3", 81559)]
    assert (d / "args").read_text().split() == [
        "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"]


def test_nvidia_smi_absent_or_failing_is_none(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    assert nvidia_smi_gpus() is None
    _fake_nvidia_smi(tmp_path / "bin", "echo 'NVIDIA-SMI has failed' >&2; exit 9", monkeypatch)
    assert nvidia_smi_gpus() is None


def test_local_executor_takes_its_gpus_from_nvidia_smi(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path / "bin", f"printf '{H100}'", monkeypatch)
    ex = LocalExecutor.from_config({"node": "box"}, tmp_path / "data")
    assert ex.source == "nvidia-smi"
    assert ex.inventory() == [NodeInfo("box", 2, "NVIDIA H100 80GB HBM3", 81559, {},
                                       cpu_milli=MACHINE[0], memory_mib=MACHINE[1])]
    limited = LocalExecutor.from_config({"node": "box", "gpus": 1}, tmp_path / "data")
    assert limited.inventory()[0].gpus == 1  # the configuration may use fewer
    off = LocalExecutor.from_config({"node": "box", "nvidia_smi": False, "gpus": 3},
                                    tmp_path / "data")
    assert off.source == "configuration" and off.inventory()[0].gpus == 3


# -- from_config and the factory -------------------------------------------------------------

def test_local_from_config(tmp_path: Path) -> None:
    ex = LocalExecutor.from_config({"node": "gpu7", "gpus": 2, "gpu_type": "l4",
                                    "gpu_memory_mib": 24000, "labels": {"rack": "r9"},
                                    "nvidia_smi": False}, tmp_path)
    assert ex.inventory() == [NodeInfo("gpu7", 2, "l4", 24000, {"rack": "r9"},
                                       cpu_milli=MACHINE[0], memory_mib=MACHINE[1])]
    assert ex.log_dir(3, 2) == tmp_path / "logs" / "w3" / "a2"


def test_sim_from_config_reads_every_setting() -> None:
    config = {"speed": 4, "start_delay": 2, "default_duration": 40, "stop_delay": 8,
              "failures": [{"name": "flaky-*", "after": 5}],
              "nodes": [{"prefix": "s", "count": 2, "gpus": 8}]}
    ex = SimExecutor.from_config(config)
    assert [n.name for n in ex.inventory()] == ["s1", "s2"]
    assert (ex.speed, ex.start_delay, ex.default_duration, ex.stop_delay) == (4.0, 2.0, 40, 8.0)
    assert ex.failures == [{"name": "flaky-*", "after": 5}]
    faster = SimExecutor.from_config(config, speed=10, nodes=[NodeInfo("z", 1)])
    assert faster.speed == 10.0 and [n.name for n in faster.inventory()] == ["z"]
    assert SimExecutor.from_config({}).speed == 1.0


def test_sim_from_config_failures_fail_matching_runs() -> None:
    now = [1000.0]
    ex = SimExecutor(nodes_from_config({"nodes": [{"name": "box", "gpus": 4}]}),
                     failures=[{"name": "t", "after": 5, "message": "boom"}],
                     clock=lambda: now[0])
    ex.start(replace(_run(["true"]), started_at=now[0]))  # named "t", on node "box"
    assert ex.poll()[0].status is RunStatus.RUNNING
    now[0] += 5
    failed = ex.poll()[0]
    assert failed.status is RunStatus.FAILED and failed.message == "boom"


def test_build_executor_sim_nodes_from_config_or_shape(tmp_path: Path) -> None:
    listed = build_executor("sim", {"nodes": [{"name": "a", "gpus": 2}]}, tmp_path)
    assert isinstance(listed, SimExecutor) and [n.name for n in listed.inventory()] == ["a"]
    default = build_executor("sim", {}, tmp_path)
    assert len(default.inventory()) == 16 and default.inventory()[0].gpus == 8  # 4x4x8
    shaped = build_executor("sim", {"nodes": [{"name": "a", "gpus": 2}], "gpu_type": "l4"},
                            tmp_path, shape="1x2x4", speed=3)
    assert [(n.name, n.gpus, n.gpu_type) for n in shaped.inventory()] == [
        ("r1n1", 4, "l4"), ("r1n2", 4, "l4")]  # a shape given wins over the listed nodes
    assert isinstance(shaped, SimExecutor) and shaped.speed == 3.0


def test_build_executor_local_and_unknown(tmp_path: Path) -> None:
    local = build_executor("local", {"node": "me", "gpus": 1, "nvidia_smi": False}, tmp_path)
    assert isinstance(local, LocalExecutor) and local.inventory()[0].name == "me"
    assert local.log_root == tmp_path / "logs"
    with pytest.raises(ValueError, match="unknown executor 'slurm'; one of sim, local, "
                                         "kubernetes"):
        build_executor("slurm", {}, tmp_path)
