"""A fake Kubernetes API server at the HTTP boundary of lightkube.

No API server can run on these machines, so the kubernetes executor is tested
with the *real* ``lightkube.Client`` (its URL building, serialisation and model
parsing) over an in-memory ``httpx`` transport that implements the few
endpoints the executor uses, plus a tiny "job controller" the tests drive.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from typing import Any

import httpx2
from lightkube import Client
from lightkube.config.kubeconfig import KubeConfig

ROUTES = [
    ("GET", r"/api/v1/nodes", "nodes", None),
    ("GET", r"/api/v1/pods", "pods", "*"),
    ("GET", r"/api/v1/namespaces/(?P<ns>[^/]+)/pods", "pods", None),
    ("DELETE", r"/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)", "pods", None),
    ("POST", r"/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/binding", "binding", None),
    ("GET", r"/apis/batch/v1/namespaces/(?P<ns>[^/]+)/jobs", "jobs", None),
    ("POST", r"/apis/batch/v1/namespaces/(?P<ns>[^/]+)/jobs", "jobs", None),
    ("DELETE", r"/apis/batch/v1/namespaces/(?P<ns>[^/]+)/jobs/(?P<name>[^/]+)", "jobs", None),
    ("PATCH", r"/apis/batch/v1/namespaces/(?P<ns>[^/]+)/jobs/(?P<name>[^/]+)", "jobs", None),
]
LIST_KIND = {"nodes": "NodeList", "pods": "PodList", "jobs": "JobList"}


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
            "nodes": {}, "pods": {}, "jobs": {}}
        self.requests: list[tuple[str, str]] = []
        self.deleted: list[tuple[str, str, dict[str, str]]] = []
        #: accepted Job patches: (name, body)
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self._uid = itertools.count(1)

    def client(self) -> Client:
        config = KubeConfig.from_dict({
            "clusters": [{"name": "fake", "cluster": {"server": "http://kube.fake"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "fake", "user": "u"}}],
            "current-context": "c",
        })
        return Client(config=config, namespace="apportion",
                      transport=httpx2.MockTransport(self.handle))

    # -- HTTP -------------------------------------------------------------------------------

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append((request.method, request.url.path))
        for method, pattern, kind, ns_default in ROUTES:
            m = re.fullmatch(pattern, request.url.path)
            if m and method == request.method:
                ns = m.groupdict().get("ns") or ns_default
                return self._dispatch(request, kind, ns, m.groupdict().get("name"))
        return _status(404, "NotFound", f"no route {request.method} {request.url.path}")

    def _dispatch(self, request: httpx2.Request, kind: str, ns: str | None,
                  name: str | None) -> httpx2.Response:
        if request.method == "GET":
            selector = _selector(request.url.params.get("labelSelector", ""))
            items = [o for (n, _), o in sorted(self.objects[kind].items())
                     if (ns in (None, "*") or n == ns) and _matches(o, selector)]
            return httpx2.Response(200, json={"apiVersion": "v1", "kind": LIST_KIND[kind],
                                              "metadata": {"resourceVersion": "1"},
                                              "items": items})
        if request.method == "DELETE":
            assert ns is not None and name is not None
            if self.objects[kind].pop((ns, name), None) is None:
                return _status(404, "NotFound", f"{kind} {name} not found")
            self.deleted.append((kind, name, dict(request.url.params)))
            return _status(200, "", "deleted", "Success")
        body = json.loads(request.content)
        if request.method == "PATCH":
            return self._patch_job(ns or "", name or "", body)
        if kind == "binding":
            pod = self.objects["pods"].get((ns or "", name or ""))
            if pod is None:
                return _status(404, "NotFound", f"pod {name} not found")
            if pod["spec"].get("nodeName"):
                return _status(409, "Conflict", f"pod {name} is already assigned")
            pod["spec"]["nodeName"] = body["target"]["name"]
            return _status(201, "", "bound", "Success")
        key = (ns or "", body["metadata"]["name"])
        if key in self.objects[kind]:
            return _status(409, "AlreadyExists", f"{kind} {key[1]} already exists")
        body["metadata"].setdefault("namespace", ns)
        body["metadata"]["uid"] = f"uid-{next(self._uid)}"
        self.objects[kind][key] = body
        return httpx2.Response(201, json=body)

    def _patch_job(self, ns: str, name: str, body: dict[str, Any]) -> httpx2.Response:
        """Only what the API server allows on a running Job's spec: an elastic
        Indexed Job (Kubernetes >= 1.27) may change ``completions`` only together
        with ``parallelism``, to the same value."""
        job = self.objects["jobs"].get((ns, name))
        if job is None:
            return _status(404, "NotFound", f"jobs {name} not found")
        spec = body.get("spec") or {}
        if set(body) != {"spec"} or not set(spec) <= {"completions", "parallelism"}:
            return _status(422, "Invalid", f"only spec.completions/parallelism: {body}")
        if "completions" in spec:
            if job["spec"].get("completionMode") != "Indexed":
                return _status(422, "Invalid", "spec.completions: field is immutable")
            if spec.get("parallelism") != spec["completions"]:
                return _status(422, "Invalid", "spec.completions: must equal spec.parallelism "
                                               "when changed (elastic Indexed Job)")
        job["spec"].update(spec)
        self.patches.append((name, spec))
        return httpx2.Response(200, json=job)

    # -- the cluster, driven by tests ------------------------------------------------------

    def add_node(self, name: str, gpus: int, *, labels: dict[str, str] | None = None,
                 ready: bool = True, cpu: str | None = "64",
                 memory: str | None = None) -> None:
        allocatable = {"nvidia.com/gpu": str(gpus)}
        if cpu is not None:
            allocatable["cpu"] = cpu
        if memory is not None:
            allocatable["memory"] = memory
        self.objects["nodes"][("", name)] = {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
                                                             "labels": labels or {}},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready",
                                       "status": "True" if ready else "False"}]},
        }

    def add_pod(self, name: str, node: str, gpus: int, *, namespace: str = "default",
                labels: dict[str, str] | None = None, phase: str = "Running") -> None:
        self.objects["pods"][(namespace, name)] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{
                "name": "c", "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase},
        }

    def job_controller(self) -> None:
        """Like the Job controller of an Indexed Job: create the pod of every index
        below ``completions`` that has none (Pending, index annotated); delete the
        pods of indexes at or above it (an elastic Job scaled down)."""
        for (ns, name), job in list(self.objects["jobs"].items()):
            rid = job["metadata"]["labels"]["apportion.io/run-id"]
            have: set[int] = set()
            for key, p in list(self.objects["pods"].items()):
                if p["metadata"]["labels"].get("apportion.io/run-id") != rid:
                    continue
                index = int(p["metadata"]["annotations"][
                    "batch.kubernetes.io/job-completion-index"])
                if index >= job["spec"]["completions"]:
                    del self.objects["pods"][key]
                    self.deleted.append(("pods", key[1], {"by": "job-controller"}))
                have.add(index)
            template = job["spec"]["template"]
            for index in range(job["spec"]["completions"]):
                if index in have:
                    continue
                meta = copy.deepcopy(template["metadata"])
                meta["annotations"] = {**meta.get("annotations", {}),
                                       "batch.kubernetes.io/job-completion-index": str(index)}
                meta.update(name=f"{name}-{index}-abcde", namespace=ns)
                self.objects["pods"][(ns, meta["name"])] = {
                    "apiVersion": "v1", "kind": "Pod", "metadata": meta,
                    "spec": copy.deepcopy(template["spec"]), "status": {"phase": "Pending"}}

    def pods_of(self, job: str) -> list[dict[str, Any]]:
        return [p for (_, n), p in sorted(self.objects["pods"].items())
                if n.startswith(job + "-")]

    def set_phase(self, job: str, phase: str, exit_code: int | None = None) -> None:
        for pod in self.pods_of(job):
            pod["status"] = {"phase": phase}
            if exit_code is not None:
                pod["status"]["containerStatuses"] = [{
                    "name": "workload", "ready": False, "restartCount": 0, "image": "x",
                    "imageID": "", "state": {"terminated": {"exitCode": exit_code}}}]

    def set_condition(self, job: str, condition: str, message: str = "") -> None:
        for (_, name), obj in self.objects["jobs"].items():
            if name == job:
                obj["status"] = {"conditions": [{"type": condition, "status": "True",
                                                 "message": message}]}


def _status(code: int, reason: str, message: str, status: str = "Failure") -> httpx2.Response:
    return httpx2.Response(code, json={"apiVersion": "v1", "kind": "Status", "status": status,
                                       "reason": reason, "message": message, "code": code})


def _selector(raw: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in raw.split(",") if "=" in part)


def _matches(obj: dict[str, Any], selector: dict[str, str]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())
