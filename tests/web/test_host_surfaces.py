"""GPU type lists and host CPU/memory on the dashboard (SPEC 1, 3, 5): the
Submit form takes ``v100-16g, v100-32g`` and ``64Gi``, the workload page shows
them back, the pool map shows each node's CPU and memory in use against what
it can give, and a bad value is a field error that stores nothing. Page-level
(TestClient); the browser flow is in test_browser_flows.py."""

from __future__ import annotations

import html
from typing import Any

import pytest

from tests.web.conftest import Site, csrf_of
from tests.web.demo import ADMIN_TOKEN, bearer


def _workload(site: Site, wid: int) -> dict[str, Any]:
    data: dict[str, Any] = site.api.get(f"/v1/workloads/{wid}",
                                        headers=bearer(ADMIN_TOKEN)).json()["data"]
    return data


def _submit(site: Site, **fields: str) -> Any:
    client = site.as_admin()
    data = {"csrf": csrf_of(client.get("/submit").text), "name": "typed", "team": "nlp",
            "gpus": "1", **fields}
    return client, client.post("/submit", data=data, follow_redirects=False)


def test_the_form_takes_a_list_of_types_cpu_and_memory_with_a_unit(site: Site) -> None:
    client, r = _submit(site, gpu_type="v100-32g, v100-16g", cpu="8", memory_mib="64Gi")
    assert r.status_code == 303, r.text
    wid = int(r.headers["location"].rsplit("/", 1)[1])
    spec = _workload(site, wid)["spec"]
    assert spec["gpu_type"] == ["v100-16g", "v100-32g"]
    assert (spec["cpu"], spec["memory_mib"]) == (8, 65536)
    page = html.unescape(client.get(f"/workloads/{wid}").text)
    assert '<dd data-k="gpu-type">v100-16g or v100-32g</dd>' in page
    assert '<dd data-k="host">8 CPU / 64Gi</dd>' in page
    _client, r = _submit(site, name="one", gpu_type="h100", memory_mib="1536")
    one = _workload(site, int(r.headers["location"].rsplit("/", 1)[1]))
    assert (one["spec"]["gpu_type"], one["spec"]["memory_mib"]) == ("h100", 1536)
    page = html.unescape(client.get(f"/workloads/{one['id']}").text)
    assert '<dd data-k="gpu-type">h100</dd>' in page
    assert '<dd data-k="host">- CPU / 1536Mi</dd>' in page


@pytest.mark.parametrize(("field", "value", "text"), [
    pytest.param("gpu_type", "a,,b", "gpu_type: an empty type name", id="empty-type"),
    pytest.param("gpu_type", ",".join(f"t{i}" for i in range(17)),
                 "gpu_type: must list 1-16 types, got 17", id="17-types"),
    pytest.param("memory_mib", "64Qi", "memory_mib: '64Qi': unknown unit", id="bad-unit"),
    pytest.param("memory_mib", "lots", "memory_mib: must be MiB or a size such as 64Gi",
                 id="not-a-size"),
])
def test_a_bad_type_or_memory_is_a_field_error_and_stores_nothing(
    site: Site, field: str, value: str, text: str
) -> None:
    before = site.api.get("/v1/workloads", headers=bearer(ADMIN_TOKEN)).json()["metadata"]
    _client, r = _submit(site, **{field: value})
    assert r.status_code == 422
    error = html.unescape(r.text.split(f'id="err-{field}">', 1)[1].split("</span>", 1)[0])
    assert text in error, error
    assert "Traceback" not in r.text
    after = site.api.get("/v1/workloads", headers=bearer(ADMIN_TOKEN)).json()["metadata"]
    assert after["total_count"] == before["total_count"]


def test_the_pool_map_shows_host_cpu_and_memory_in_use_per_node(any_site: Site) -> None:
    site = any_site  # a fresh site: its scheduler runs cycles
    site.demo.heartbeat([
        {"name": "n1", "gpus": 8, "labels": {"rack": "r1"}, "cpu": 32, "memory_mib": 262144},
        {"name": "n2", "gpus": 8, "labels": {"rack": "r1"}},
        {"name": "n3", "gpus": 8, "labels": {"rack": "r2"}}])
    site.demo.submit("hosty", team="nlp", gpus=1, pods=2, cpu=4, memory_mib=16384)
    site.cycle()
    hosty = next(w for w in site.api.get("/v1/workloads", headers=bearer(ADMIN_TOKEN)).json()[
        "data"] if w["name"] == "hosty")
    assert hosty["status"] in ("Starting", "Running"), (hosty["status"], hosty["reason"])
    per_node: dict[str, int] = {}
    for pod in hosty["placement"]:
        per_node[pod["node"]] = per_node.get(pod["node"], 0) + 1
    page = html.unescape(site.as_admin().get("/pools/main").text)
    for node in ("n1", "n2"):
        pods = per_node.get(node, 0)
        block = page.split(f'data-node="{node}"', 1)[1].split('<div class="devs">', 1)[0]
        allocatable = "32" if node == "n1" else "-"
        memory_all = "256Gi" if node == "n1" else "-"
        used_memory = f"{16 * pods}Gi" if pods else "0"
        if node == "n2" and not pods:  # states nothing, runs no such pod: no host line
            assert 'data-k="host"' not in block
            continue
        assert f"CPU {4 * pods}/{allocatable} · memory {used_memory}/{memory_all}" in block
    n3 = page.split('data-node="n3"', 1)[1].split('<div class="devs">', 1)[0]
    assert 'data-k="host"' not in n3


def test_the_pool_map_says_how_the_pool_packs(site: Site) -> None:
    def packing_line() -> str:
        page = html.unescape(site.as_admin().get("/pools/main").text)
        return page.split('data-k="packing">', 1)[1].split("</p>", 1)[0]

    assert "<b>fragmentation</b>" in packing_line()
    assert "a pod taking a whole node" in packing_line()  # the default prior
    site.api.patch("/v1/pools/main", headers=bearer(ADMIN_TOKEN), json={
        "typical_pods": [{"gpus": 8}, {"gpus": 0.5, "count": 4}]}).raise_for_status()
    assert "its typical pods (8 GPUs × 1, 0.5 GPUs × 4)" in packing_line()
    site.api.patch("/v1/pools/main", headers=bearer(ADMIN_TOKEN),
                   json={"packing": "best_fit"}).raise_for_status()
    assert packing_line() == ("Packing <b>best_fit</b>: the node with the least room that "
                              "still fits.")
