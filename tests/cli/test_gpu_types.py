"""GPU type lists and host CPU/memory as a CLI user meets them: ``submit
--gpu-type a,b`` (or the flag repeated), ``--cpu``/``--memory``, and what
``workloads list -o wide``, ``workloads show``, ``pools show`` and ``nodes
list -o wide`` print back (SPEC 1, 3, 5)."""

from __future__ import annotations

from typing import Any

from apportion.client import ApportionClient
from tests.cli.conftest import Org, wait_for


def _gpu_pool(org: Org) -> ApportionClient:
    """Pool ``gpu``: node v1 (4 x v100-32g, 32 cores, 256 GiB), node h1 (4 x h100,
    no host figures stated); leaf team ``nlp``."""
    org.admin.create_pool("gpu")
    agent = ApportionClient(org.url, org.token("agent-gpu", "agent", pool="gpu"))
    agent.agent_heartbeat("gpu", [
        {"name": "v1", "gpus": 4, "gpu_type": "v100-32g", "cpu": 32, "memory_mib": 262144,
         "health": "ready"},
        {"name": "h1", "gpus": 4, "gpu_type": "h100", "health": "ready"}],
        agent_version="test")
    org.admin.create_team("nlp")
    return agent


def _row(table: str, name: str) -> dict[str, str]:
    lines = table.splitlines()
    head = lines[0].split()
    for line in lines[1:]:
        cells = line.split()
        if name in cells:
            return dict(zip(head, cells, strict=False))
    raise AssertionError(f"no row {name!r} in\n{table}")


def _workload(org: Org, name: str) -> dict[str, Any]:
    (w,) = [w for w in org.admin.list_workloads().items if w["name"] == name]
    return w


def test_submit_takes_a_comma_list_or_a_repeated_gpu_type_and_cpu_memory(org: Org) -> None:
    _gpu_pool(org)
    org.ok("submit", "a", "--team", "nlp", "--gpus", "1", "--gpu-type", "v100-32g,v100-16g",
           "--cpu", "8", "--memory", "64Gi")
    org.ok("submit", "b", "--team", "nlp", "--gpus", "1", "--gpu-type", "v100-16g",
           "--gpu-type", "v100-32g", "--cpu", "500m", "--memory", "1536Mi")
    org.ok("submit", "c", "--team", "nlp", "--gpus", "1", "--gpu-type", "h100")
    a, b, c = (_workload(org, n)["spec"] for n in "abc")
    assert a["gpu_type"] == b["gpu_type"] == ["v100-16g", "v100-32g"]
    assert (a["cpu"], a["memory_mib"]) == (8, 65536)
    assert (b["cpu"], b["memory_mib"]) == (0.5, 1536)
    assert c["gpu_type"] == "h100"
    wide = org.ok("workloads", "list", "-o", "wide")
    assert _row(wide, "a")["GPU-TYPE"] == "v100-16g,v100-32g"
    assert (_row(wide, "a")["CPU"], _row(wide, "a")["MEMORY"]) == ("8", "64Gi")
    assert (_row(wide, "b")["CPU"], _row(wide, "b")["MEMORY"]) == ("0.5", "1536Mi")
    assert (_row(wide, "c")["GPU-TYPE"], _row(wide, "c")["CPU"],
            _row(wide, "c")["MEMORY"]) == ("h100", "-", "-")
    narrow = org.ok("workloads", "list").splitlines()[0].split()
    assert "GPU-TYPE" not in narrow and "MEMORY" not in narrow


def test_workloads_show_reads_back_types_cpu_and_memory(org: Org) -> None:
    _gpu_pool(org)
    org.ok("submit", "train", "--team", "nlp", "--gpus", "2", "--pods", "2",
           "--gpu-type", "v100-16g,v100-32g", "--cpu", "8", "--memory", "64Gi")
    org.wait_status(_workload(org, "train")["id"], "Starting", "Running")
    lines = org.ok("workloads", "show", "train").splitlines()
    facts = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines[1:]}
    assert facts["per pod"] == "2 GPUs, 8 CPU, 64Gi memory"
    assert facts["gpu type"] == "v100-16g or v100-32g"
    assert facts["nodes"] == "v1" and facts["pool"] == "gpu"
    assert lines[0].startswith(f"workload {_workload(org, 'train')['id']} 'train': ")
    plain = org.ok("workloads", "show", str(_workload(org, "train")["id"]), "-o", "json")
    assert '"gpu_type": [\n' in plain
    org.ok("submit", "any", "--team", "nlp", "--gpus", "1")
    facts_any = org.ok("workloads", "show", "any")
    assert "gpu type:   any" in facts_any
    assert "1 GPU, no CPU asked for, no memory asked for" in facts_any


def test_a_bad_gpu_type_flag_is_a_usage_error_and_a_bad_list_the_servers_words(
    org: Org
) -> None:
    _gpu_pool(org)
    result = org.cli("submit", "x", "--team", "nlp", "--gpus", "1", "--gpu-type", "a,,b")
    assert result.exit_code == 2
    assert "--gpu-type 'a,,b': an empty type name" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    many = ",".join(f"t{i}" for i in range(17))
    result = org.cli("submit", "x", "--team", "nlp", "--gpus", "1", "--gpu-type", many)
    assert result.exit_code == 1
    assert "gpu_type: must list 1-16 types, got 17" in result.stderr
    assert "allowed: a GPU type name, or a list of 1-16 of them" in result.stderr
    assert org.admin.list_workloads().items == []  # nothing stored


def test_pools_show_and_nodes_list_show_host_resources_in_use_per_node(org: Org) -> None:
    _gpu_pool(org)
    org.ok("submit", "big", "--team", "nlp", "--gpus", "1", "--pods", "2", "--no-gang",
           "--gpu-type", "v100-32g", "--cpu", "4", "--memory", "16Gi")
    org.ok("submit", "small", "--team", "nlp", "--gpus", "1", "--gpu-type", "v100-32g",
           "--cpu", "500m", "--memory", "512Mi")
    for name in ("big", "small"):
        org.wait_status(_workload(org, name)["id"], "Starting", "Running")
    show = org.ok("pools", "show", "gpu").splitlines()
    assert show[1].split()[:6] == ["NODE", "STATE", "CPU", "CPU-USED", "MEMORY-MIB",
                                   "MEMORY-MIB-USED"]
    v1 = _row("\n".join(show[1:]), "v1")
    assert (v1["CPU"], v1["CPU-USED"], v1["MEMORY-MIB"], v1["MEMORY-MIB-USED"]) == \
        ("32", "8.5", "262144", "33280")
    h1 = _row("\n".join(show[1:]), "h1")
    assert (h1["CPU"], h1["CPU-USED"], h1["MEMORY-MIB"], h1["MEMORY-MIB-USED"]) == \
        ("-", "0", "-", "0")
    nodes = org.ok("nodes", "list", "-o", "wide")
    assert (_row(nodes, "v1")["CPU-USED"], _row(nodes, "v1")["MEMORY-MIB-USED"]) == \
        ("8.5", "33280")
    node = org.admin.get_node("v1")
    assert (node["cpu_in_use"], node["memory_mib_in_use"]) == (8.5, 33280)


def test_dry_run_with_a_type_list_says_where_it_would_go(org: Org) -> None:
    _gpu_pool(org)
    out = org.ok("submit", "try", "--team", "nlp", "--gpus", "1", "--gpu-type",
                 "a100,v100-32g", "--cpu", "8", "--memory", "64Gi", "--dry-run")
    assert "pool:       gpu" in out and "starts now: yes" in out
    out = org.ok("submit", "try", "--team", "nlp", "--gpus", "1", "--gpu-type",
                 "a100,b200", "--dry-run")
    assert "starts now: no, NO_ELIGIBLE_POOL" in out
    assert org.admin.list_workloads().items == []  # a dry run stores nothing


def test_work_that_waits_for_cpu_says_host_resources_and_pools_show_says_why(
    org: Org
) -> None:
    _gpu_pool(org)
    org.ok("submit", "hog", "--team", "nlp", "--gpus", "1", "--gpu-type", "v100-32g",
           "--cpu", "32")
    org.wait_status(_workload(org, "hog")["id"], "Starting", "Running")
    org.ok("submit", "next", "--team", "nlp", "--gpus", "1", "--gpu-type", "v100-32g",
           "--cpu", "8")
    wid = _workload(org, "next")["id"]
    waiting = wait_for(lambda: (w := org.admin.get_workload(wid))["reason"] and w, 10,
                       "a reason")
    assert waiting["reason"]["code"] == "HOST_RESOURCES", waiting["reason"]
    assert _row(org.ok("workloads", "list"), "next")["REASON"] == "HOST_RESOURCES"
    assert "reason: HOST_RESOURCES: " in org.ok("workloads", "why", "next")
    assert "reason:     HOST_RESOURCES: " in org.ok("workloads", "show", "next")
    show = org.ok("pools", "show", "gpu").splitlines()
    v1 = _row("\n".join(show[1:]), "v1")
    assert (v1["CPU"], v1["CPU-USED"]) == ("32", "32")
