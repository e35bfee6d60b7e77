"""Host CPU/memory and packing as a user sees them in ``pools list/show`` and
``nodes list`` (SPEC rev 3, sections 1 and 5), and a pool's typical pods in ``pools show``."""

from __future__ import annotations

from apportion.client import ApportionClient
from tests.cli.conftest import Org


def test_pools_and_nodes_show_packing_and_host_resources(org: Org) -> None:
    org.admin.create_pool("gpu", packing="best_fit")
    agent = ApportionClient(org.url, org.token("agent-gpu", "agent", pool="gpu"))
    agent.agent_heartbeat("gpu", [
        {"name": "g1", "gpus": 2, "cpu": 96, "memory_mib": 786432, "health": "ready"},
        {"name": "g2", "gpus": 2, "health": "ready"}], agent_version="test")
    pools = org.ok("pools", "list").splitlines()
    assert pools[0].split()[-1] == "PACKING" and pools[1].split()[-1] == "best_fit"
    show = org.ok("pools", "show", "gpu").splitlines()
    assert "packing best_fit" in show[0]
    assert show[1].split() == ["NODE", "STATE", "CPU", "CPU-USED", "MEMORY-MIB",
                               "MEMORY-MIB-USED", "GPU0", "GPU1"]
    assert show[2].split()[:6] == ["g1", "ready", "96", "0", "786432", "0"]
    assert show[3].split()[:6] == ["g2", "ready", "-", "0", "-", "0"]  # not stated: not limited
    nodes = org.ok("nodes", "list", "-o", "wide").splitlines()
    head = nodes[0].split()
    g1 = dict(zip(head, nodes[1].split(), strict=False))
    assert (g1["CPU"], g1["MEMORY-MIB"]) == ("96", "786432")


def test_pools_show_names_the_typical_pods_a_pool_was_given(org: Org) -> None:
    org.admin.create_pool("told", typical_pods=[
        {"gpus": 0.5, "count": 4, "cpu": 2, "memory_mib": 65536}, {"gpus": 4}])
    org.admin.create_pool("plain")
    show = org.ok("pools", "show", "told").splitlines()
    assert "packing fragmentation" in show[0]
    assert show[1] == "typical pods: 0.5 GPUs x 4 (2 CPUs, 64Gi), 4 GPUs x 1"
    assert not any(line.startswith("typical pods") for line in
                   org.ok("pools", "show", "plain").splitlines())  # the default prior
