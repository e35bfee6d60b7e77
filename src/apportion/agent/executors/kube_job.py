"""The Job one attempt runs as (pure: builds lightkube objects, no API call).

See ``executors/kubernetes.py`` and docs/kubernetes.md for what each field is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from lightkube.models.batch_v1 import JobSpec
from lightkube.models.core_v1 import (
    Affinity,
    Container,
    EnvVar,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSpec,
    PodTemplateSpec,
    ResourceRequirements,
)
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job

from apportion.agent.inventory import DEFAULT_MEMORY
from apportion.agent.model import Run, placement_to_json

GPU = "nvidia.com/gpu"
MANAGED = "apportion.io/managed-by"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
SCHEDULER_NAME = "apportion"
DEFAULT_TOPOLOGY = {"zone": "topology.kubernetes.io/zone",
                    "region": "topology.kubernetes.io/region"}


@dataclass(frozen=True, slots=True)
class KubeSettings:
    namespace: str = "apportion"
    pool: str = "default"
    default_image: str | None = None
    #: pool topology label → node label key it is read from
    topology_labels: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_TOPOLOGY))
    gpu_type_label: str = "nvidia.com/gpu.product"
    gpu_memory_label: str = "nvidia.com/gpu.memory"
    gpu_memory_mib: int = DEFAULT_MEMORY
    ttl_seconds_after_finished: int = 3600
    service_account: str | None = None


def job_name(run: Run) -> str:
    return f"apportion-w{run.workload_id}-a{run.attempt}"


def run_labels(run: Run, pool: str) -> dict[str, str]:
    return {MANAGED: "apportion", "apportion.io/pool": pool, "apportion.io/team": run.exec.team,
            "apportion.io/workload-id": str(run.workload_id),
            "apportion.io/attempt": str(run.attempt), "apportion.io/run-id": run.run_id}


def cpu_quantity_text(milli: int) -> str:
    """Milli-CPU as Kubernetes writes it: ``8`` for whole cores, else ``500m``."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def host_resources(cpu_milli: int, memory_mib: int) -> dict[str, str]:
    """A pod's ``cpu`` and ``memory`` (requests = limits: the pod gets what the
    scheduler counted for it, and no more); nothing for what was not asked."""
    out: dict[str, str] = {}
    if cpu_milli:
        out["cpu"] = cpu_quantity_text(cpu_milli)
    if memory_mib:
        out["memory"] = f"{memory_mib}Mi"
    return out


def gpu_type_affinity(types: tuple[str, ...], label: str) -> Affinity | None:
    """Required node affinity ``label In types`` for a workload that names GPU
    types (one or several acceptable ones); None for any type. The pods are
    placed on such nodes already: this makes the kubelet refuse a pod that
    would land on another type."""
    if not types:
        return None
    term = NodeSelectorTerm(matchExpressions=[
        NodeSelectorRequirement(key=label, operator="In", values=list(types))])
    return Affinity(nodeAffinity=NodeAffinity(
        requiredDuringSchedulingIgnoredDuringExecution=NodeSelector(
            nodeSelectorTerms=[term])))


def build_job(run: Run, s: KubeSettings) -> Job:
    """The Job for one attempt (pure: no API call)."""
    image = run.exec.image or s.default_image
    if not image:
        raise ValueError("the workload has no image (and the executor no default_image)")
    command = list(run.exec.command) if run.exec.command else (
        ["sleep", f"{run.exec.duration:g}"] if run.exec.duration is not None else None)
    first = run.placement[0]
    whole = sum(1 for d in first.devices if d.milli == 1000)
    is_fraction = len(first.devices) == 1 and first.devices[0].milli < 1000
    annotations = {"apportion.io/placement": json.dumps(placement_to_json(run.placement))}
    env = {**run.exec.env, "APPORTION_WORKLOAD_ID": str(run.workload_id),
           "APPORTION_ATTEMPT": str(run.attempt), "APPORTION_RUN_ID": run.run_id,
           "APPORTION_PODS": str(run.pods), "APPORTION_WORKLOAD_NAME": run.exec.name,
           "APPORTION_TEAM": run.exec.team,
           "APPORTION_PLACEMENT": annotations["apportion.io/placement"]}
    limits: dict[str, str] = host_resources(run.exec.cpu_milli, run.exec.memory_mib)
    requests = dict(limits)
    if is_fraction:
        milli = first.devices[0].milli
        memory = milli * s.gpu_memory_mib // 1000
        env.update(APPORTION_GPU_FRACTION=f"{milli / 1000:g}",
                   APPORTION_GPU_MEMORY_LIMIT_MIB=str(memory))
        annotations.update({"apportion.io/gpu-fraction": f"{milli / 1000:g}",
                            "apportion.io/gpu-memory-mib": str(memory)})
        indices = {p.devices[0].index for p in run.placement}
        if len(indices) == 1:
            env["NVIDIA_VISIBLE_DEVICES"] = str(indices.pop())
    elif whole:
        limits[GPU] = str(whole)
    nodes = run.nodes
    labels = run_labels(run, s.pool)
    pod_spec = PodSpec(
        restartPolicy="Never",
        containers=[Container(
            name="workload", image=image, command=command,
            env=[EnvVar(name=k, value=v) for k, v in sorted(env.items())],
            resources=ResourceRequirements(limits=limits or None, requests=requests or None),
        )],
        affinity=gpu_type_affinity(run.exec.gpu_types, s.gpu_type_label),
        nodeName=nodes[0] if len(nodes) == 1 else None,
        schedulerName=None if len(nodes) == 1 else SCHEDULER_NAME,
        serviceAccountName=s.service_account,
    )
    return Job(
        metadata=ObjectMeta(name=job_name(run), namespace=s.namespace, labels=labels,
                            annotations=annotations),
        spec=JobSpec(
            completionMode="Indexed", completions=run.pods_running,
            parallelism=run.pods_running,
            backoffLimit=0, ttlSecondsAfterFinished=s.ttl_seconds_after_finished,
            template=PodTemplateSpec(metadata=ObjectMeta(labels=labels,
                                                         annotations=annotations),
                                     spec=pod_spec),
        ),
    )
