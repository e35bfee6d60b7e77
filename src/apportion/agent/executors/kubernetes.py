"""The kubernetes executor: one ``batch/v1`` Job per workload attempt (lightkube).

- Job ``apportion-w<id>-a<attempt>`` in the configured namespace, Indexed, one
  completion per pod, ``backoffLimit: 0`` (retries are the scheduler's business),
  labelled ``apportion.io/managed-by=apportion``, ``apportion.io/pool``,
  ``apportion.io/team``, ``apportion.io/workload-id``, ``apportion.io/attempt``,
  ``apportion.io/run-id``.
- Pinning: when every pod is placed on one node the template sets ``nodeName``;
  otherwise it names ``schedulerName: apportion`` and the agent binds pod index i
  to the node of placement i (``pods/binding``), so no other scheduler moves it.
- GPUs: whole GPUs as ``limits: {nvidia.com/gpu: N}``; a fraction requests no
  ``nvidia.com/gpu`` and is handed over as env ``NVIDIA_VISIBLE_DEVICES`` (when all
  pods share the same device index), ``APPORTION_GPU_FRACTION``,
  ``APPORTION_GPU_MEMORY_LIMIT_MIB`` and annotations ``apportion.io/gpu-fraction``,
  ``apportion.io/gpu-memory-mib``; every pod gets ``APPORTION_PLACEMENT`` (JSON,
  one entry per completion index) and the annotation ``apportion.io/placement``.
- Status: Job ``Complete`` → completed; ``Failed`` or a failed pod → failed;
  all pods Running → running; else starting. A Job deleted by a stop → stopped.
- Shrink (SPEC 6.5): the Job is an elastic Indexed Job (Kubernetes ≥ 1.27):
  ``spec.completions`` and ``spec.parallelism`` are patched down together to
  the pods that stay, so the Job controller removes the highest indexes and
  never recreates them; then the taken pods are deleted with the grace period.
  Pods of indexes ≥ ``completions`` count for nothing in the run's status.
- Inventory: Nodes with allocatable ``nvidia.com/gpu``; their allocatable
  ``cpu`` and ``memory`` (host resources; absent = not limited); type and memory from the
  GPU feature discovery labels; topology from configured label keys; Ready
  condition → health. GPU pods without the managed-by label are unmanaged usage.

The Kubernetes client is any object with lightkube's ``list``/``create``/``delete``
signatures (tests use a fake: no API server runs here; see docs/kubernetes.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lightkube import ApiError
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import CascadeType

from apportion.agent.executors.kube_job import (
    GPU,
    INDEX_ANNOTATION,
    MANAGED,
    SCHEDULER_NAME,
    KubeSettings,
    build_job,
    job_name,
    run_labels,
)
from apportion.agent.model import NodeInfo, Observed, Run, RunStatus
from apportion.domain.errors import ValidationError
from apportion.domain.host import cpu_quantity, memory_quantity

__all__ = ["KubeSettings", "KubernetesExecutor", "build_job", "job_name", "run_labels"]


@dataclass(slots=True)
class _KubeRun:
    run: Run
    is_stopping: bool = False


class KubernetesExecutor:
    name = "kubernetes"

    def __init__(self, client: Any, settings: KubeSettings) -> None:
        self.client = client
        self.s = settings
        self.runs: dict[str, _KubeRun] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> KubernetesExecutor:
        from lightkube import Client

        fields = {k: v for k, v in config.items() if k in KubeSettings.__dataclass_fields__}
        settings = KubeSettings(**fields)
        return cls(Client(namespace=settings.namespace, field_manager="apportion-agent"),
                   settings)

    # -- Executor ---------------------------------------------------------------------------

    def inventory(self) -> list[NodeInfo]:
        nodes = [n for n in self.client.list(Node) if _allocatable_gpus(n) > 0]
        unmanaged = self._unmanaged_gpus({n.metadata.name for n in nodes})
        out = []
        for n in sorted(nodes, key=lambda n: n.metadata.name):
            labels = n.metadata.labels or {}
            gpus = _allocatable_gpus(n)
            used = min(gpus, unmanaged.get(n.metadata.name, 0))
            memory = labels.get(self.s.gpu_memory_label)
            out.append(NodeInfo(
                name=n.metadata.name, gpus=gpus, gpu_type=labels.get(self.s.gpu_type_label),
                gpu_memory_mib=int(memory) if memory and memory.isdigit()
                else self.s.gpu_memory_mib,
                labels={k: labels[v] for k, v in sorted(self.s.topology_labels.items())
                        if v in labels},
                health="ready" if _is_ready(n) else "down",
                # which physical devices they hold is unknown: count them from the top
                unavailable=tuple((gpus - 1 - i, 1000) for i in range(used)),
                cpu_milli=_allocatable(n, "cpu"), memory_mib=_allocatable(n, "memory"),
            ))
        return out

    def start(self, run: Run) -> None:
        if run.run_id in self.runs:
            return
        job = build_job(run, self.s)
        self.runs[run.run_id] = _KubeRun(run)
        try:
            self.client.create(job, namespace=self.s.namespace)
        except ApiError as err:
            if err.status.code != 409:  # 409: it exists already (idempotent)
                self.runs.pop(run.run_id, None)
                raise
            if run.stopped:  # adopted after a restart: make sure the shrink happened
                self._scale_down(run, run.stopped, 0)

    def adopt(self, runs: Sequence[Run],
              stopping: Mapping[str, float] | None = None) -> None:
        """Re-attach to the runs' Jobs. A run that was being stopped is never
        created again (its Job may be gone already): what is left of it is
        deleted with the grace that is left."""
        stopping = stopping or {}
        for run in runs:
            if run.run_id in stopping:
                self.runs[run.run_id] = _KubeRun(run)
                self.stop(run.run_id, max(0.0, stopping[run.run_id]))
            else:
                self.start(run)

    def stop(self, run_id: str, grace_seconds: float) -> None:
        known = self.runs.get(run_id)
        if known is not None:
            known.is_stopping = True
        selector = {MANAGED: "apportion", "apportion.io/run-id": run_id}
        for pod in self.client.list(Pod, namespace=self.s.namespace, labels=selector):
            self._delete(Pod, pod.metadata.name, grace_period=int(grace_seconds))
        for job in self.client.list(Job, namespace=self.s.namespace, labels=selector):
            self._delete(Job, job.metadata.name, cascade=CascadeType.BACKGROUND)

    def shrink(self, run_id: str, pods: tuple[int, ...], grace_seconds: float) -> None:
        """Patch the Job down to the pods that stay, then delete the taken pods."""
        known = self.runs.get(run_id)
        if known is None or known.is_stopping:
            return
        known.run = replace(known.run, stopped=tuple(sorted({*known.run.stopped, *pods})))
        self._scale_down(known.run, pods, grace_seconds)

    def _scale_down(self, run: Run, pods: tuple[int, ...], grace_seconds: float) -> None:
        keep = run.pods_running
        # Elastic Indexed Job: both fields together, equal (the API refuses otherwise).
        # Patched before the pods are deleted, so the Job never recreates them.
        patch = {"spec": {"completions": keep, "parallelism": keep}}
        try:
            self.client.patch(Job, job_name(run), patch, namespace=self.s.namespace)
        except ApiError as err:
            if err.status.code != 404:
                raise
        selector = {MANAGED: "apportion", "apportion.io/run-id": run.run_id}
        for pod in self.client.list(Pod, namespace=self.s.namespace, labels=selector):
            if _index(pod) in pods:
                self._delete(Pod, pod.metadata.name, grace_period=int(grace_seconds))

    def poll(self) -> list[Observed]:
        selector = {MANAGED: "apportion", "apportion.io/pool": self.s.pool}
        jobs = {j.metadata.labels["apportion.io/run-id"]: j
                for j in self.client.list(Job, namespace=self.s.namespace, labels=selector)}
        pods: dict[str, list[Any]] = {}
        for p in self.client.list(Pod, namespace=self.s.namespace, labels=selector):
            pods.setdefault(p.metadata.labels["apportion.io/run-id"], []).append(p)
        out = []
        for rid in sorted(set(jobs) | set(self.runs)):
            known = self.runs.get(rid)
            job, mine = jobs.get(rid), pods.get(rid, [])
            if known is not None and known.is_stopping:
                done = job is None and not any(_is_active(p) for p in mine)
                status = RunStatus.STOPPED if done else RunStatus.RUNNING
                out.append(Observed(rid, status, "stopped" if done else "stopping"))
            elif job is None:
                out.append(Observed(rid, RunStatus.LOST, "its Job no longer exists"))
            else:
                if known is not None:
                    self._bind(known.run, mine)
                out.append(_job_status(rid, job, mine))
        return out

    def log_files(self, run: Run) -> dict[int, Path]:
        """Pod logs stay with Kubernetes (``kubectl logs``)."""
        return {}

    def forget(self, run_id: str) -> None:
        self.runs.pop(run_id, None)

    def close(self) -> None:
        """Jobs keep running; the next agent adopts them."""

    # -- internals --------------------------------------------------------------------------

    def _bind(self, run: Run, pods: list[Any]) -> None:
        """Bind unscheduled pods of a multi-node run to their placed nodes."""
        for pod in pods:
            if pod.spec.nodeName or pod.spec.schedulerName != SCHEDULER_NAME:
                continue
            index = _index(pod)
            if not 0 <= index < run.pods or index in run.stopped:
                continue
            binding = Pod.Binding(metadata=ObjectMeta(name=pod.metadata.name),
                                  target=ObjectReference(kind="Node", apiVersion="v1",
                                                         name=run.placement[index].node))
            try:
                self.client.create(binding, pod.metadata.name, namespace=self.s.namespace)
            except ApiError as err:
                if err.status.code != 409:
                    raise
            except ValueError:
                # The API server answers a binding with a Status object, which lightkube
                # 1.0 tries to decode as a Binding; the binding itself has succeeded.
                pass

    def _unmanaged_gpus(self, gpu_nodes: set[str]) -> dict[str, int]:
        used: dict[str, int] = {}
        for pod in self.client.list(Pod, namespace="*"):
            node = pod.spec.nodeName if pod.spec else None
            if node not in gpu_nodes or not _is_active(pod):
                continue
            if (pod.metadata.labels or {}).get(MANAGED) == "apportion":
                continue
            gpus = sum(_container_gpus(c) for c in pod.spec.containers or [])
            if gpus:
                used[node] = used.get(node, 0) + gpus
        return used

    def _delete(self, res: Any, name: str, **kwargs: Any) -> None:
        try:
            self.client.delete(res, name, namespace=self.s.namespace, **kwargs)
        except ApiError as err:
            if err.status.code != 404:
                raise


def _index(pod: Any) -> int:
    """The pod's completion index (-1 when it has none)."""
    try:
        return int((pod.metadata.annotations or {}).get(INDEX_ANNOTATION, -1))
    except ValueError:
        return -1


def _job_status(rid: str, job: Any, pods: list[Any]) -> Observed:
    wanted = job.spec.completions or 1
    pods = [p for p in pods if _index(p) < wanted]  # a shrink's pods (gone or going) count not
    for cond in (job.status.conditions if job.status else None) or []:
        if cond.status != "True":
            continue
        if cond.type == "Complete":
            return Observed(rid, RunStatus.COMPLETED, "Job complete", 0)
        if cond.type == "Failed":
            return Observed(rid, RunStatus.FAILED, _failure_text(cond, pods), _exit_code(pods))
    failed = [p for p in pods if p.status and p.status.phase == "Failed"]
    if failed:
        return Observed(rid, RunStatus.FAILED, f"pod {failed[0].metadata.name} failed",
                        _exit_code(failed))
    running = sum(1 for p in pods if p.status and p.status.phase in ("Running", "Succeeded"))
    if running >= wanted:
        return Observed(rid, RunStatus.RUNNING, f"{running} pod(s) running")
    return Observed(rid, RunStatus.STARTING, f"{running}/{wanted} pod(s) running")


def _failure_text(cond: Any, pods: list[Any]) -> str:
    code = _exit_code(pods)
    text = cond.message or cond.reason or "Job failed"
    return f"{text} (exit code {code})" if code is not None else text


def _exit_code(pods: list[Any]) -> int | None:
    for pod in pods:
        for cs in (pod.status.containerStatuses if pod.status else None) or []:
            term = cs.state.terminated if cs.state else None
            if term is not None and term.exitCode:
                return int(term.exitCode)
    return None


def _allocatable_gpus(node: Any) -> int:
    alloc = (node.status.allocatable if node.status else None) or {}
    try:
        return int(str(alloc.get(GPU, "0")))
    except ValueError:
        return 0


def _allocatable(node: Any, resource: str) -> int | None:
    """A node's allocatable ``cpu`` (milli-CPU) or ``memory`` (MiB, rounded down);
    None when absent or unreadable (then it is not limited)."""
    alloc = (node.status.allocatable if node.status else None) or {}
    raw = alloc.get(resource)
    if raw is None:
        return None
    try:
        if resource == "cpu":
            return cpu_quantity(str(raw), exact=False)
        return memory_quantity(str(raw), round_up=False)
    except ValidationError:
        return None


def _is_ready(node: Any) -> bool:
    for cond in (node.status.conditions if node.status else None) or []:
        if cond.type == "Ready":
            return bool(cond.status == "True")
    return False


def _is_active(pod: Any) -> bool:
    return not (pod.status and pod.status.phase in ("Succeeded", "Failed"))


def _container_gpus(container: Any) -> int:
    res = container.resources
    for table in (res.limits if res else None, res.requests if res else None):
        if table and GPU in table:
            try:
                return int(str(table[GPU]))
            except ValueError:
                return 0
    return 0
