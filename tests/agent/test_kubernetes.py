"""The kubernetes executor: generated objects checked against lightkube's models,
reconcile logic run with the real lightkube client over a fake API server
(tests/agent/kubefake.py). Nothing here has run against a real cluster."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# lightkube is the 'kubernetes' extra: without it (a plain `pip install -e .[dev]`)
# these tests are skipped with a reason instead of stopping the whole run at
# collection. scripts/_env.sh and CI install the extra, so they run there.
pytest.importorskip("lightkube", reason="the 'kubernetes' extra (lightkube) is not installed")

from lightkube import codecs
from lightkube.resources.batch_v1 import Job

from apportion.agent.executors.kubernetes import (
    KubernetesExecutor,
    KubeSettings,
    build_job,
)
from apportion.agent.model import ExecSpec, Run, RunStatus, exec_to_json, instruction_from_json
from apportion.domain.host import cpu_quantity, memory_quantity
from apportion.domain.workload import DeviceShare, PodPlacement
from tests.agent.kubefake import FakeKube

DOCS = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"
SETTINGS = KubeSettings(namespace="apportion", pool="gpu-a",
                        topology_labels={"zone": "topology.kubernetes.io/zone",
                                         "rack": "example.com/rack"})


def _run(*pods: tuple[str, tuple[tuple[int, int], ...]], wid: int = 7, attempt: int = 1,
         image: str | None = "ghcr.io/acme/train:1", cpu_milli: int = 0, memory_mib: int = 0,
         gpu_types: tuple[str, ...] = ()) -> Run:
    placement = tuple(PodPlacement(n, tuple(DeviceShare(i, m) for i, m in d)) for n, d in pods)
    return Run(f"w{wid}-a{attempt}", wid, attempt, placement,
               ExecSpec(name="train", team="nlp", image=image,
                        command=("python", "train.py"), env={"EPOCHS": "3"},
                        cpu_milli=cpu_milli, memory_mib=memory_mib, gpu_types=gpu_types))


def _env(job: Job) -> dict[str, str]:
    container = job.spec.template.spec.containers[0]
    return {e.name: e.value for e in container.env}


# -- generated objects ---------------------------------------------------------------------


def test_whole_gpu_job_on_one_node_is_pinned_and_labelled() -> None:
    job = build_job(_run(("a1", ((0, 1000), (1, 1000)))), SETTINGS)
    raw = job.to_dict()
    assert codecs.from_dict(raw) == job  # round trip through lightkube's models
    assert raw["apiVersion"] == "batch/v1" and raw["kind"] == "Job"
    assert raw["metadata"]["name"] == "apportion-w7-a1"
    labels = raw["spec"]["template"]["metadata"]["labels"]
    assert labels["apportion.io/team"] == "nlp"
    assert labels["apportion.io/workload-id"] == "7"
    assert labels["apportion.io/attempt"] == "1"
    pod = raw["spec"]["template"]["spec"]
    assert pod["nodeName"] == "a1" and "schedulerName" not in pod
    assert pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert raw["spec"]["backoffLimit"] == 0 and raw["spec"]["completionMode"] == "Indexed"
    assert _env(job)["EPOCHS"] == "3" and _env(job)["APPORTION_RUN_ID"] == "w7-a1"


def test_fraction_is_handed_over_as_env_and_annotations() -> None:
    job = build_job(_run(("a1", ((3, 500),))), KubeSettings(gpu_memory_mib=81920))
    env = _env(job)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "3"
    assert env["APPORTION_GPU_FRACTION"] == "0.5"
    assert env["APPORTION_GPU_MEMORY_LIMIT_MIB"] == "40960"
    annotations = job.spec.template.metadata.annotations
    assert annotations["apportion.io/gpu-fraction"] == "0.5"
    assert job.spec.template.spec.containers[0].resources.limits is None  # no nvidia.com/gpu


def test_multi_node_gang_uses_the_apportion_scheduler_name() -> None:
    job = build_job(_run(("a1", ((0, 1000),)), ("b1", ((0, 1000),))), SETTINGS)
    assert job.spec.template.spec.nodeName is None
    assert job.spec.template.spec.schedulerName == "apportion"
    assert job.spec.completions == job.spec.parallelism == 2
    placement = json.loads(job.metadata.annotations["apportion.io/placement"])
    assert [p["node"] for p in placement] == ["a1", "b1"]


@pytest.mark.parametrize(("cpu_milli", "cpu"), [(8000, "8"), (500, "500m"), (2250, "2250m")])
def test_host_cpu_and_memory_are_each_pods_requests_and_limits(cpu_milli: int, cpu: str
                                                               ) -> None:
    job = build_job(_run(("a1", ((0, 1000), (1, 1000))), cpu_milli=cpu_milli,
                         memory_mib=65536), SETTINGS)
    raw = job.to_dict()
    assert codecs.from_dict(raw) == job
    resources = raw["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": cpu, "memory": "65536Mi"}
    assert resources["limits"] == {"cpu": cpu, "memory": "65536Mi", "nvidia.com/gpu": "2"}
    # Kubernetes reads them back as the same amounts
    assert cpu_quantity(resources["requests"]["cpu"]) == cpu_milli
    assert memory_quantity(resources["limits"]["memory"]) == 65536


def test_a_fraction_with_host_resources_requests_them_and_no_gpu() -> None:
    job = build_job(_run(("a1", ((3, 250),)), memory_mib=512), SETTINGS)
    resources = job.to_dict()["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"memory": "512Mi"}, "limits": {"memory": "512Mi"}}


def test_no_host_resources_no_requests() -> None:
    job = build_job(_run(("a1", ((0, 1000),))), SETTINGS)
    resources = job.to_dict()["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert "requests" not in resources and "affinity" not in job.to_dict()["spec"]["template"][
        "spec"]


@pytest.mark.parametrize("types", [("v100-16g", "v100-32g"), ("H100",)])
def test_gpu_types_become_a_required_node_affinity_in_over_the_gpu_type_label(
    types: tuple[str, ...]
) -> None:
    job = build_job(_run(("a1", ((0, 1000),)), ("b1", ((0, 1000),)), gpu_types=types),
                    KubeSettings(gpu_type_label="example.com/gpu-model"))
    raw = job.to_dict()
    assert codecs.from_dict(raw) == job
    required = raw["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert required == {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "example.com/gpu-model", "operator": "In", "values": list(types)}]}]}
    assert "nodeSelector" not in raw["spec"]["template"]["spec"]


def test_a_start_decision_carries_host_resources_and_gpu_types_to_the_job() -> None:
    decision = instruction_from_json({
        "id": 1, "kind": "start", "workload_id": 7, "attempt": 1, "run_id": "w7-a1",
        "placement": [{"node": "a1", "devices": [{"index": 0, "milli": 1000}]}],
        "exec": {"name": "train", "team": "nlp", "image": "img", "command": ["true"],
                 "cpu": 0.5, "memory_mib": 1024, "gpu_type": ["v100-32g", "v100-16g"]}})
    assert (decision.exec.cpu_milli, decision.exec.memory_mib) == (500, 1024)
    assert decision.exec.gpu_types == ("v100-16g", "v100-32g")
    assert exec_to_json(decision.exec)["gpu_type"] == ["v100-16g", "v100-32g"]
    pod = build_job(decision.to_run(0.0), SETTINGS).to_dict()["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1024Mi"}
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["v100-16g", "v100-32g"]
    # a decision of an older server carries none of them
    old = instruction_from_json({"id": 2, "kind": "start", "workload_id": 8, "attempt": 1,
                              "run_id": "w8-a1", "exec": {"name": "x"}})
    assert (old.exec.cpu_milli, old.exec.memory_mib, old.exec.gpu_types) == (0, 0, ())


def test_a_workload_without_an_image_is_refused() -> None:
    with pytest.raises(ValueError, match="no image"):
        build_job(_run(("a1", ((0, 1000),)), image=None), SETTINGS)


def test_the_manifests_in_the_docs_load_as_kubernetes_objects() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S)
    objects = [o for block in blocks for o in codecs.load_all_yaml(block)]
    kinds = sorted(type(o).__name__ for o in objects)
    assert {"ClusterRole", "ClusterRoleBinding", "Deployment", "Namespace", "Role",
            "RoleBinding", "ServiceAccount"} <= set(kinds)


# -- reconcile against the fake API server ---------------------------------------------------


@pytest.fixture
def kube() -> FakeKube:
    fake = FakeKube()
    fake.add_node("a1", 8, labels={"nvidia.com/gpu.product": "H100", "example.com/rack": "r1",
                                   "nvidia.com/gpu.memory": "81559",
                                   "topology.kubernetes.io/zone": "z1"},
                  cpu="63770m", memory="528280740Ki")
    fake.add_node("b1", 8, labels={"example.com/rack": "r2"}, ready=False, cpu=None)
    fake.add_node("cpu1", 0)
    return fake


def test_inventory_reads_nodes_topology_and_unmanaged_gpu_pods(kube: FakeKube) -> None:
    kube.add_pod("someone-elses", "a1", 2)
    kube.add_pod("finished", "a1", 4, phase="Succeeded")
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    nodes = {n.name: n for n in ex.inventory()}
    assert sorted(nodes) == ["a1", "b1"]  # no GPUs, not in the pool
    a1 = nodes["a1"]
    assert (a1.gpus, a1.gpu_type, a1.gpu_memory_mib) == (8, "H100", 81559)
    assert dict(a1.labels) == {"zone": "z1", "rack": "r1"}
    assert a1.unavailable == ((7, 1000), (6, 1000))
    assert (a1.cpu_milli, a1.memory_mib) == (63770, 515899)  # allocatable, MiB rounded down
    assert (nodes["b1"].cpu_milli, nodes["b1"].memory_mib) == (None, None)  # not limited
    assert a1.to_json()["cpu"] == 63.77 and "cpu" not in nodes["b1"].to_json()
    assert nodes["b1"].health == "down"


def test_start_is_idempotent_and_pod_phases_map_to_statuses(kube: FakeKube) -> None:
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    run = _run(("a1", ((0, 1000),)))
    ex.start(run)
    ex.forget(run.run_id)
    ex.start(run)  # the Job exists: 409 is taken as "already started"
    assert len(kube.objects["jobs"]) == 1
    assert ex.poll()[0].status is RunStatus.STARTING
    kube.job_controller()
    kube.set_phase("apportion-w7-a1", "Running")
    assert ex.poll()[0].status is RunStatus.RUNNING
    kube.set_condition("apportion-w7-a1", "Complete")
    assert ex.poll()[0].status is RunStatus.COMPLETED


def test_failed_job_reports_the_exit_code(kube: FakeKube) -> None:
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    ex.start(_run(("a1", ((0, 1000),))))
    kube.job_controller()
    kube.set_phase("apportion-w7-a1", "Failed", exit_code=3)
    kube.set_condition("apportion-w7-a1", "Failed", "BackoffLimitExceeded")
    obs = ex.poll()[0]
    assert (obs.status, obs.exit_code) == (RunStatus.FAILED, 3)
    assert "exit code 3" in obs.message


def test_pods_created_through_the_api_keep_their_requests_limits_and_affinity(
    kube: FakeKube
) -> None:
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    ex.start(_run(("a1", ((0, 1000),)), cpu_milli=8000, memory_mib=65536,
                  gpu_types=("H100", "H200")))
    kube.job_controller()
    (pod,) = kube.pods_of("apportion-w7-a1")
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "8", "memory": "65536Mi"}
    assert resources["limits"]["memory"] == "65536Mi"
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["H100", "H200"]


def test_multi_node_pods_are_bound_to_their_placed_nodes(kube: FakeKube) -> None:
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    ex.start(_run(("b1", ((0, 1000),)), ("a1", ((0, 1000),))))
    kube.job_controller()
    ex.poll()
    assert [p["spec"]["nodeName"] for p in kube.pods_of("apportion-w7-a1")] == ["b1", "a1"]
    ex.poll()  # already bound: nothing more to do
    assert sum(1 for m, p in kube.requests if p.endswith("/binding")) == 2


def test_stop_deletes_pods_with_the_grace_then_the_job(kube: FakeKube) -> None:
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    ex.start(_run(("a1", ((0, 1000),))))
    kube.job_controller()
    kube.set_phase("apportion-w7-a1", "Running")
    ex.stop("w7-a1", 30)
    pods = [d for d in kube.deleted if d[0] == "pods"]
    assert pods and pods[0][2].get("gracePeriodSeconds") == "30"
    assert [d[0] for d in kube.deleted][-1] == "jobs"
    assert ex.poll()[0].status is RunStatus.STOPPED


def test_jobs_nobody_asked_for_show_up_in_poll(kube: FakeKube) -> None:
    """After a restart with a lost state file the agent sees orphan Jobs (and stops them
    once it has caught up with its decisions)."""
    KubernetesExecutor(kube.client(), SETTINGS).start(_run(("a1", ((0, 1000),)), wid=9))
    fresh = KubernetesExecutor(kube.client(), SETTINGS)
    assert [o.run_id for o in fresh.poll()] == ["w9-a1"]
    fresh.stop("w9-a1", 0)
    assert kube.objects["jobs"] == {}


def test_from_config_takes_the_settings_it_knows_and_the_current_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://kube.example:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    ex = KubernetesExecutor.from_config({
        "pool": "gpu-b", "namespace": "batch", "default_image": "python:3.11",
        "gpu_memory_mib": 24000, "topology_labels": {"rack": "example.com/rack"},
        "speed": 10, "nodes": [],  # settings of other executors are ignored
    })
    assert ex.s == KubeSettings(namespace="batch", pool="gpu-b", default_image="python:3.11",
                                gpu_memory_mib=24000,
                                topology_labels={"rack": "example.com/rack"})
    assert ex.client.namespace == "batch"  # no request made: the client is only configured
    default = KubernetesExecutor.from_config({"pool": "p"})
    assert default.s.namespace == "apportion" and default.s.pool == "p"
    from apportion.agent.factory import build_executor

    built = build_executor("kubernetes", {"namespace": "x", "pool": "ignored"}, tmp_path,
                           pool="gpu-c")
    assert isinstance(built, KubernetesExecutor)
    assert (built.s.namespace, built.s.pool) == ("x", "gpu-c")  # the agent's --pool wins


# -- shrink (SPEC 6.5) -------------------------------------------------------------------------


def _four_pods() -> Run:
    return _run(*(("a1", ((i, 1000),)) for i in range(4)))


def test_shrink_scales_the_indexed_job_down_and_deletes_the_taken_pods(kube: FakeKube) -> None:
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    ex.start(_four_pods())
    kube.job_controller()
    kube.set_phase("apportion-w7-a1", "Running")
    assert ex.poll()[0].status is RunStatus.RUNNING
    ex.shrink("w7-a1", (2, 3), 20)
    assert kube.patches == [("apportion-w7-a1", {"completions": 2, "parallelism": 2})]
    deleted = {name: params for kind, name, params in kube.deleted if kind == "pods"}
    assert sorted(deleted) == ["apportion-w7-a1-2-abcde", "apportion-w7-a1-3-abcde"]
    assert all(p.get("gracePeriodSeconds") == "20" for p in deleted.values())
    kube.job_controller()  # the Job controller does not bring the highest indexes back
    names = [p["metadata"]["name"] for p in kube.pods_of("apportion-w7-a1")]
    assert names == ["apportion-w7-a1-0-abcde", "apportion-w7-a1-1-abcde"]
    obs = ex.poll()[0]
    assert obs.status is RunStatus.RUNNING and obs.message == "2 pod(s) running"
    kube.set_condition("apportion-w7-a1", "Complete")
    assert ex.poll()[0].status is RunStatus.COMPLETED


def test_a_taken_pod_that_ends_failed_is_not_a_failure_of_the_run(kube: FakeKube) -> None:
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    ex.start(_four_pods())
    kube.job_controller()
    kube.set_phase("apportion-w7-a1", "Running")
    pod3 = kube.pods_of("apportion-w7-a1")[3]
    ex.shrink("w7-a1", (3,), 0)
    pod3["status"] = {"phase": "Failed"}  # SIGTERM: exit 143, still listed a moment
    kube.objects["pods"][("apportion", pod3["metadata"]["name"])] = pod3
    assert ex.poll()[0].status is RunStatus.RUNNING


def test_a_fake_api_server_refuses_a_completions_patch_without_parallelism(
    kube: FakeKube,
) -> None:
    """The fake checks what the real API server checks (elastic Indexed Jobs)."""
    from lightkube import ApiError

    ex = KubernetesExecutor(kube.client(), SETTINGS)
    ex.start(_four_pods())
    with pytest.raises(ApiError, match="parallelism"):
        kube.client().patch(Job, "apportion-w7-a1", {"spec": {"completions": 2}},
                            namespace="apportion")


def test_a_shrunk_run_adopted_after_a_restart_starts_only_its_remaining_pods(
    kube: FakeKube,
) -> None:
    run = _four_pods()
    shrunk = Run(run.run_id, run.workload_id, run.attempt, run.placement, run.exec,
                 stopped=(3,))
    job = build_job(shrunk, SETTINGS)
    assert job.spec.completions == job.spec.parallelism == 3
    ex = KubernetesExecutor(kube.client(), SETTINGS)
    ex.start(run)  # the Job exists with 4 completions (the patch was lost in a crash)
    fresh = KubernetesExecutor(kube.client(), SETTINGS)
    fresh.adopt([shrunk])
    assert kube.patches == [("apportion-w7-a1", {"completions": 3, "parallelism": 3})]
