"""The local executor: a workload's command as processes on this machine.

One process per pod, each in its own session (process group), started through
a tiny ``sh`` wrapper that records its pid and, when the command ends, its exit
code next to the log. That is what lets a restarted agent re-adopt processes
it did not spawn itself. Per attempt, in ``<data dir>/logs/w<id>/a<attempt>/``:

- ``pod-<i>.log``  stdout and stderr of pod i (what ``.../logs`` streams),
- ``pod-<i>.pid``  the wrapper's pid (= its process group),
- ``pod-<i>.exit`` the command's exit code, once it has ended.

Environment of each pod (on top of the agent's own environment and the
workload's ``env``): ``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES``
(the placed device indices), ``APPORTION_WORKLOAD_ID``, ``APPORTION_ATTEMPT``,
``APPORTION_RUN_ID``, ``APPORTION_POD_INDEX``, ``APPORTION_PODS``,
``APPORTION_NODE``, ``APPORTION_WORKLOAD_NAME``, ``APPORTION_TEAM``; for a
fraction of a GPU also ``APPORTION_GPU_FRACTION`` (e.g. ``0.25``),
``APPORTION_GPU_MEMORY_LIMIT_MIB`` (the fraction of the device's memory) and
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (``0=<MiB>M``, enforced only when an MPS
daemon runs; otherwise the limit is advisory).

Stopping sends SIGTERM to the pod's process group, then SIGKILL when the grace
period has passed (checked at every poll). A shrink (SPEC 6.5) does the same to
the taken pods only; the run goes on with the others, the taken pods' exit is
neither its failure nor its completion, and their logs stay where they are.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from apportion.agent.inventory import DEFAULT_MEMORY, host_resources, nvidia_smi_gpus
from apportion.agent.model import NodeInfo, Observed, Run, RunStatus
from apportion.domain.workload import PodPlacement

#: ``$0`` is the pod's base path. The command runs as a child of the wrapper, which
#: forwards SIGTERM to it and waits for it, so the exit code is written even when
#: the pod is stopped. The executor writes ``$0.stop`` before it signals the group:
#: a stop that arrived before the child existed is caught by the check after the
#: spawn (and a SIGTERM caught before ``$c`` was set by the ``stop`` flag). Every
#: forwarded SIGTERM waits 0.1 s: one that lands between the child's fork and its
#: exec hits the shell's inherited trap and is lost. SIGKILL at the end of the
#: grace (to the whole group) is the backstop.
WRAPPER = (
    'trap \'stop=1; [ -n "$c" ] && { sleep 0.1; kill -TERM "$c" 2>/dev/null; }\' TERM; '
    'echo $$ > "$0.pid.tmp" && mv "$0.pid.tmp" "$0.pid"; "$@" & c=$!; '
    'if [ -n "$stop" ] || [ -e "$0.stop" ]; then sleep 0.1; kill -TERM "$c" 2>/dev/null; fi; '
    'wait "$c"; rc=$?; while kill -0 "$c" 2>/dev/null; do wait "$c"; rc=$?; done; '
    'echo $rc > "$0.exit.tmp"; mv "$0.exit.tmp" "$0.exit"; exit $rc'
)
#: seconds the other pods of a gang get after one of them failed
FAILURE_GRACE = 5.0


@dataclass(slots=True)
class _Pod:
    index: int
    base: Path  # .../pod-<i> (the .log, .pid and .exit files share it)
    pid: int
    proc: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None
    is_gone: bool = False  # process ended (exit code known or not)

    def refresh(self) -> None:
        """Gone = the wrapper has ended and no process of its group is left."""
        if self.is_gone:
            return
        if self.proc is not None:
            rc = self.proc.poll()  # also reaps the wrapper
            if rc is None:
                return
            if self.exit_code is None:
                self.exit_code = rc if rc >= 0 else 128 - rc
        elif _alive(self.pid, self.base):
            return
        if _group_alive(self.pid):
            return
        self.is_gone = True
        exit_file = self.base.with_suffix(".exit")
        if exit_file.exists():
            with contextlib.suppress(ValueError, OSError):
                self.exit_code = int(exit_file.read_text().strip())

    def signal(self, sig: int) -> None:
        if not self.is_gone:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)


@dataclass(slots=True)
class _LocalRun:
    run: Run
    pods: list[_Pod] = field(default_factory=list)
    kill_at: float | None = None  # SIGKILL deadline once stopping
    is_stopping: bool = False  # stopped by the agent (not a failure)
    failure: str | None = None
    failed_pod: _Pod | None = None
    #: pods a shrink took: pod index -> SIGKILL deadline
    shrunk: dict[int, float] = field(default_factory=dict)

    def active_pods(self) -> list[_Pod]:
        """The pods that shrinks have not taken."""
        return [p for p in self.pods if p.index not in self.shrunk]


class LocalExecutor:
    name = "local"

    def __init__(
        self, data_dir: Path, *, node: str | None = None, gpus: int | None = None,
        gpu_type: str | None = None, gpu_memory_mib: int | None = None,
        labels: Mapping[str, str] | None = None, use_nvidia_smi: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_root = data_dir / "logs"
        self.node = node or socket.gethostname().split(".")[0]
        self.labels = dict(labels or {})
        self.clock = clock
        self.runs: dict[str, _LocalRun] = {}
        #: (milli-CPU, MiB) of this machine, reported as the node's allocatable
        self.host = host_resources()
        detected = nvidia_smi_gpus() if use_nvidia_smi else None
        if detected:
            self.gpus = gpus if gpus is not None else len(detected)
            self.gpu_type = gpu_type or detected[0][1]
            self.gpu_memory_mib = gpu_memory_mib or detected[0][2] or DEFAULT_MEMORY
            self.source = "nvidia-smi"
        else:
            self.gpus = gpus if gpus is not None else 0
            self.gpu_type = gpu_type
            self.gpu_memory_mib = gpu_memory_mib or DEFAULT_MEMORY
            self.source = "configuration"

    @classmethod
    def from_config(cls, config: Mapping[str, Any], data_dir: Path) -> LocalExecutor:
        return cls(data_dir, node=config.get("node"), gpus=config.get("gpus"),
                   gpu_type=config.get("gpu_type"), gpu_memory_mib=config.get("gpu_memory_mib"),
                   labels=config.get("labels"),
                   use_nvidia_smi=bool(config.get("nvidia_smi", True)))

    # -- Executor ---------------------------------------------------------------------------

    def inventory(self) -> list[NodeInfo]:
        """This machine: its GPUs, CPUs and memory."""
        cpu, memory = self.host
        return [NodeInfo(self.node, self.gpus, self.gpu_type, self.gpu_memory_mib,
                         self.labels, cpu_milli=cpu, memory_mib=memory)]

    def start(self, run: Run) -> None:
        """Spawn every pod that has no trace yet (a pid or exit file): idempotent."""
        if run.run_id in self.runs:
            return
        wrong = sorted(set(run.nodes) - {self.node})
        if wrong:
            raise ValueError(f"placed on node(s) {', '.join(wrong)}; this agent runs "
                             f"node {self.node}")
        command = self._command(run)
        local = _LocalRun(run)
        self.runs[run.run_id] = local
        for i, pod in enumerate(run.placement):
            base = self.log_dir(run.workload_id, run.attempt) / f"pod-{i}"
            adopted = _find(i, base)
            if i in run.stopped and adopted is None:
                continue  # taken by a shrink before it ever ran here
            local.pods.append(adopted or self._spawn(run, i, pod, base, command))
        if run.stopped:  # adopted after a restart: the grace deadline is lost; kill now
            self._stop_pods(local, run.stopped, 0.0)

    def adopt(self, runs: Sequence[Run],
              stopping: Mapping[str, float] | None = None) -> None:
        stopping = stopping or {}
        for run in runs:
            if run.run_id in stopping:
                self._adopt_stopping(run, max(0.0, stopping[run.run_id]))
                continue
            try:
                self.start(run)
            except (OSError, ValueError) as err:
                self.runs[run.run_id] = _LocalRun(run, failure=f"cannot adopt: {err}")

    def _adopt_stopping(self, run: Run, grace_left: float) -> None:
        """A run a previous agent was stopping: re-attach to the pods it finds
        (spawning none), keep the SIGKILL deadline (``grace_left`` from now) and
        send SIGTERM only to pods that never got one (no ``.stop`` file: the
        agent died between deciding the stop and signalling)."""
        local = _LocalRun(run, is_stopping=True, kill_at=self.clock() + grace_left)
        self.runs[run.run_id] = local
        for i in range(run.pods):
            pod = _find(i, self.log_dir(run.workload_id, run.attempt) / f"pod-{i}")
            if pod is None:
                continue
            local.pods.append(pod)
            stop_file = pod.base.with_suffix(".stop")
            if not stop_file.exists():
                with contextlib.suppress(OSError):
                    stop_file.touch()
                pod.signal(signal.SIGTERM)

    def stop(self, run_id: str, grace_seconds: float) -> None:
        local = self.runs.get(run_id)
        if local is None or local.is_stopping:
            return
        local.is_stopping = True
        local.kill_at = self.clock() + max(0.0, grace_seconds)
        for pod in local.pods:
            with contextlib.suppress(OSError):
                pod.base.with_suffix(".stop").touch()  # before the signal: see WRAPPER
            pod.signal(signal.SIGTERM)

    def shrink(self, run_id: str, pods: tuple[int, ...], grace_seconds: float) -> None:
        """SIGTERM exactly the taken pods, SIGKILL after ``grace_seconds``."""
        local = self.runs.get(run_id)
        if local is None or local.is_stopping:
            return
        local.run = replace(local.run, stopped=tuple(sorted({*local.run.stopped, *pods})))
        self._stop_pods(local, pods, grace_seconds)

    def _stop_pods(self, local: _LocalRun, pods: Sequence[int], grace_seconds: float) -> None:
        deadline = self.clock() + max(0.0, grace_seconds)
        for pod in local.pods:
            if pod.index not in pods or pod.index in local.shrunk:
                continue
            local.shrunk[pod.index] = deadline
            with contextlib.suppress(OSError):
                pod.base.with_suffix(".stop").touch()  # before the signal: see WRAPPER
            pod.signal(signal.SIGTERM)

    def poll(self) -> list[Observed]:
        return [self._observe(local) for _rid, local in sorted(self.runs.items())]

    def forget(self, run_id: str) -> None:
        self.runs.pop(run_id, None)

    def close(self) -> None:
        """Processes keep running; the next agent adopts them."""

    def log_files(self, run: Run) -> dict[int, Path]:
        base = self.log_dir(run.workload_id, run.attempt)
        return {i: base / f"pod-{i}.log" for i in range(run.pods)}

    def log_dir(self, workload_id: int, attempt: int) -> Path:
        return self.log_root / f"w{workload_id}" / f"a{attempt}"

    # -- internals --------------------------------------------------------------------------

    def _command(self, run: Run) -> list[str]:
        if run.exec.command:
            return list(run.exec.command)
        if run.exec.duration is not None:
            return ["sleep", f"{run.exec.duration:g}"]
        raise ValueError("the workload has no command (and no duration to sleep for)")

    def _spawn(self, run: Run, index: int, pod: PodPlacement, base: Path,
               command: list[str]) -> _Pod:
        base.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **run.exec.env, **self.pod_env(run, index, pod)}
        with open(base.with_suffix(".log"), "ab") as log:
            if run.exec.image:
                log.write(f"apportion: image {run.exec.image} ignored by the local "
                          "executor\n".encode())
                log.flush()
            proc = subprocess.Popen(
                ["/bin/sh", "-c", WRAPPER, str(base), *command], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        base.with_suffix(".pid").write_text(f"{proc.pid}\n")
        return _Pod(index, base, proc.pid, proc)

    def pod_env(self, run: Run, index: int, pod: PodPlacement) -> dict[str, str]:
        devices = ",".join(str(d.index) for d in pod.devices)
        env = {
            "CUDA_VISIBLE_DEVICES": devices, "NVIDIA_VISIBLE_DEVICES": devices or "void",
            "APPORTION_WORKLOAD_ID": str(run.workload_id), "APPORTION_ATTEMPT": str(run.attempt),
            "APPORTION_RUN_ID": run.run_id, "APPORTION_POD_INDEX": str(index),
            "APPORTION_PODS": str(run.pods), "APPORTION_NODE": pod.node,
            "APPORTION_WORKLOAD_NAME": run.exec.name, "APPORTION_TEAM": run.exec.team,
        }
        if len(pod.devices) == 1 and pod.devices[0].milli < 1000:
            milli = pod.devices[0].milli
            limit = milli * self.gpu_memory_mib // 1000
            env["APPORTION_GPU_FRACTION"] = f"{milli / 1000:g}"
            env["APPORTION_GPU_MEMORY_LIMIT_MIB"] = str(limit)
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={limit}M"
        return env

    def _observe(self, local: _LocalRun) -> Observed:
        rid = local.run.run_id
        if local.failure is not None and not local.pods:
            return Observed(rid, RunStatus.FAILED, local.failure)
        now = self.clock()
        for pod in local.pods:
            pod.refresh()
            if now >= local.shrunk.get(pod.index, float("inf")):
                pod.signal(signal.SIGKILL)
        if local.kill_at is not None and now >= local.kill_at:
            for pod in local.pods:
                pod.signal(signal.SIGKILL)
        if all(p.is_gone for p in local.pods):
            return self._ended(local)
        active = local.active_pods()
        if local.failure is None and not local.is_stopping:
            bad = next((p for p in active if p.is_gone and p.exit_code != 0), None)
            if bad is not None:  # one pod of the gang failed: stop the others
                local.failure, local.failed_pod = _exit_text(bad), bad
                local.kill_at = now + FAILURE_GRACE
                for pod in local.pods:
                    pod.signal(signal.SIGTERM)
        return Observed(rid, RunStatus.RUNNING, f"{len(active)} process(es)")

    def _ended(self, local: _LocalRun) -> Observed:
        rid = local.run.run_id
        if local.is_stopping:
            return Observed(rid, RunStatus.STOPPED, "stopped")
        if local.failure is not None:
            code = local.failed_pod.exit_code if local.failed_pod is not None else None
            return Observed(rid, RunStatus.FAILED, local.failure, code)
        bad = next((p for p in local.active_pods() if p.exit_code != 0), None)
        if bad is not None:
            return Observed(rid, RunStatus.FAILED, _exit_text(bad), bad.exit_code)
        return Observed(rid, RunStatus.COMPLETED, "exited 0", 0)


def _exit_text(pod: _Pod) -> str:
    if pod.exit_code is None:
        return f"pod {pod.index} ended without an exit status (killed while the agent was away)"
    if pod.exit_code > 128:
        return f"pod {pod.index} was killed by signal {pod.exit_code - 128}"
    return f"pod {pod.index} exited with code {pod.exit_code}"


def _find(index: int, base: Path) -> _Pod | None:
    """A pod started earlier (by this or a previous agent), from its files."""
    pid_file = base.with_suffix(".pid")
    exit_file = base.with_suffix(".exit")
    if not pid_file.exists() and not exit_file.exists():
        return None
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        pid = 0
    pod = _Pod(index, base, pid)
    pod.refresh()
    return pod


def _group_alive(pgid: int) -> bool:
    if pgid <= 0:
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    # killpg also counts zombies (an unreaped wrapper): look for a live member.
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] not in ("Z", "X") and fields[2] == str(pgid):
            return True
    return False


def _alive(pid: int, base: Path) -> bool:
    """Is ``pid`` still our wrapper for ``base`` (not a reused pid)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            text = cmdline.read_bytes()
        except OSError:
            return False
        return str(base).encode() in text
    return True
