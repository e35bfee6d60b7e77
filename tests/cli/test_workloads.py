"""submit, workloads list/get/cancel/events/why/logs and -w, against the live server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from tests.cli.conftest import Org, seed_org, submit, wait_for


def test_submit_flags_build_the_api_body(org: Org) -> None:
    seed_org(org)
    out = org.ok("submit", "train", "--team", "nlp", "--gpus", "0.5", "--pods", "4",
                 "--min-pods", "2", "--priority", "75", "--topology", "rack",
                 "--topology-mode", "preferred", "--gpu-type", "h100", "--requeue",
                 "--duration", "1h", "-e", "A=1", "-l", "exp=7", "--", "python", "train.py",
                 "--lr", "3")
    assert "submitted to team nlp: Pending" in out
    w = org.admin.list_workloads(name="train").items[0]
    spec = w["spec"]
    assert (spec["gpus"], spec["pods"], spec["min_pods"], spec["priority"]) == (0.5, 4, 2, 75)
    assert spec["topology"] == {"level": "rack", "mode": "preferred"}
    assert spec["requeue_on_preemption"] is True and spec["duration"] == 3600
    assert spec["command"] == ["python", "train.py", "--lr", "3"]
    assert spec["env"] == {"A": "1"} and spec["labels"] == {"exp": "7"}
    assert w["submitted_by"].endswith("-admin")


def test_submit_gpu_memory_file_and_default_team(org: Org, tmp_path: Path) -> None:
    seed_org(org)
    org.ok("config", "set", "default_team", "vision")
    out = json.loads(org.ok("submit", "mem", "--gpu-memory", "20Gi", "-o", "json"))
    assert out["spec"]["gpu_memory_mib"] == 20480 and out["team"] == "vision"
    spec_file = tmp_path / "w.yaml"
    spec_file.write_text(yaml.safe_dump({"name": "from-file", "team": "nlp", "gpus": 1,
                                         "class": "reserved", "priority": 200}))
    out = yaml.safe_load(org.ok("submit", "-f", str(spec_file), "--priority", "300",
                                "-o", "yaml"))
    assert (out["name"], out["class"], out["priority"]) == ("from-file", "reserved", 300)


def test_submit_refused_by_server_is_one_line_exit_1(org: Org) -> None:
    seed_org(org)
    bad = org.cli("submit", "x", "--team", "nlp", "--gpus", "0.3")
    assert bad.exit_code == 1
    assert bad.stderr.count("\n") == 1 and "0.25, 0.5, 0.75" in bad.stderr
    parent = org.cli("submit", "x", "--team", "research", "--gpus", "1")
    assert parent.exit_code == 1 and "leaf teams only" in parent.stderr


def test_dry_run_names_pool_start_and_victims(org: Org) -> None:
    agent = seed_org(org)
    sweep = submit(org, "sweep", "vision", 4, priority=10)
    org.run(agent, sweep)
    fill = submit(org, "fill", "nlp", 4, priority=10)
    org.run(agent, fill)
    out = org.ok("submit", "urgent", "--team", "production", "--gpus", "2", "--class",
                 "reserved", "--dry-run")
    assert "pool:       main" in out and "victims:    1" in out
    assert "sweep (team vision, elastic, priority 10, Running): 4 GPUs" in out
    dry = json.loads(org.ok("submit", "urgent", "--team", "production", "--gpus", "2",
                            "--class", "reserved", "--dry-run", "-o", "json"))
    assert dry["victims"][0]["workload_id"] == sweep
    assert org.admin.list_workloads(name="urgent").items == []  # nothing submitted


def test_list_defaults_filters_and_formats(org: Org) -> None:
    agent = seed_org(org)
    a = submit(org, "a", "nlp", 1)
    b = submit(org, "b", "vision", 0.5, pods=2)
    c = submit(org, "c", "production", 1)
    org.run(agent, a)
    org.admin.cancel_workload(c)
    member = org.token("nina", "member", teams=["vision"])

    rows = org.ok("workloads", "list").splitlines()
    assert rows[0].split() == ["ID", "NAME", "TEAM", "CLASS", "PRIORITY", "GPUS", "STATUS",
                               "POOL", "PODS", "REASON"]
    assert [r.split()[1] for r in rows[1:]] == ["a", "b"]  # c finished
    assert [r.split()[1] for r in org.ok("workloads", "list", "-A").splitlines()[1:]] == \
        ["a", "b", "c"]
    assert org.ok("workloads", "list", "--team", "research", "--no-headers").split("\n")[0] \
        .split()[1] == "a"
    assert [r.split()[1] for r in org.ok("workloads", "list", "-A", "--status",
                                         "Cancelled").splitlines()[1:]] == ["c"]
    assert len(org.ok("workloads", "list", "-A", "--limit", "1").splitlines()) == 2
    wide = org.ok("workloads", "list", "-o", "wide").splitlines()[0].split()
    assert wide[-10:] == ["PODS", "ATTEMPT", "NODES", "GPU-TYPE", "CPU", "MEMORY",
                          "SUBMITTED-BY", "SUBMITTED", "ETA", "REASON"]
    assert wide.index("PODS") == wide.index("POOL") + 1
    mine = org.ok("workloads", "list", token=member).splitlines()
    assert [r.split()[1] for r in mine[1:]] == ["b"]  # a member's default: its teams
    as_json = json.loads(org.ok("workloads", "list", "-A", "-o", "json"))
    assert as_json == [org.admin.get_workload(i) for i in (a, b, c)]  # objects unchanged
    assert yaml.safe_load(org.ok("workloads", "get", str(b), "-o", "yaml")) == \
        org.admin.get_workload(b)


def test_get_cancel_events_why_logs(org: Org) -> None:
    agent = seed_org(org)
    job = submit(org, "job", "nlp", 1)
    org.run(agent, job)
    assert org.ok("workloads", "get", "job").splitlines()[1].split()[6] == "Running"
    why = org.ok("workloads", "why", "job")
    assert "Running in pool main" in why and "fair share" in why
    assert "nlp        main   3" in why and "research" in why
    events = org.ok("workloads", "events", str(job)).splitlines()
    assert [line.split()[4] for line in events[1:]] == ["Pending", "Queued", "Starting",
                                                        "Running"]
    assert "admitted in pool main on free GPUs" in org.ok("workloads", "logs", "job", "--events")
    assert "cancelled" in org.ok("workloads", "cancel", "job", "-m", "done with it")
    again = org.cli("workloads", "cancel", str(job))
    assert again.exit_code == 1 and "already" in again.stderr
    missing = org.cli("workloads", "get", "nope")
    assert missing.exit_code == 1 and "no workload named 'nope'" in missing.stderr


def test_why_a_workload_waits(org: Org) -> None:
    agent = seed_org(org)
    big = submit(org, "big", "nlp", 4, **{"class": "reserved"})
    org.run(agent, big)
    waiting = submit(org, "toolarge", "production", 4, priority=10)
    reason = wait_for(lambda: org.admin.get_workload(waiting)["reason"], 10, "a reason")
    why = org.ok("workloads", "why", "toolarge")
    assert f"reason: {reason['code']}: {reason['message']}" in why
    as_json = json.loads(org.ok("workloads", "why", "toolarge", "-o", "json"))
    assert as_json["why"]["reason"]["code"] == reason["code"]
    assert {r["team"] for r in as_json["fair_share"]} == {"production"}


def spawn(org: Org, *args: str) -> subprocess.Popen[str]:
    """``apportion ARGS`` in a separate process, as a user runs it."""
    code = "from apportion.cli.main import main; main()"
    return subprocess.Popen([sys.executable, "-c", code, *args], env={**os.environ, **org.env()},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Lines:
    """The stdout of a spawned command, read line by line in a thread, so a test can
    wait (bounded) for a line without blocking on a pipe."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def rows(self) -> list[list[str]]:
        return [line.split() for line in list(self.lines)]

    def finish(self, timeout: float = 30) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return code


def test_watch_get_until_finished_and_list_sees_a_preemption(org: Org) -> None:
    agent = seed_org(org)
    victim = submit(org, "victim", "vision", 4, priority=10)
    org.run(agent, victim)
    other = submit(org, "other", "nlp", 4, priority=10)
    org.run(agent, other)
    # Long timeouts: ``get -w`` ends by itself when the workload finishes; ``list -w``
    # is stopped by the test once it has shown what the test waits for.
    watch_list = Lines(spawn(org, "workloads", "list", "-w", "--timeout", "120"))
    watch_get = Lines(spawn(org, "workloads", "get", "victim", "-w", "--timeout", "120"))
    try:
        for lines, count in ((watch_list, 3), (watch_get, 2)):  # first tables are out
            wait_for(lambda lines=lines, count=count: len(lines.lines) >= count, 60,
                     "the first table")
        org.ok("submit", "prod", "--team", "production", "--gpus", "2", "--class", "reserved")
        assert watch_get.finish(timeout=60) == 0
        rows = watch_get.rows()
        assert rows[-1][6] == "Preempted"  # it stops when the workload has finished

        def changes() -> list[tuple[str, str]]:
            return [(r[1], r[6]) for r in watch_list.rows() if len(r) > 6]

        wait_for(lambda: ("victim", "Preempted") in changes(), 60, "the preemption listed")
        wait_for(lambda: {s for n, s in changes() if n == "prod"}
                 & {"Pending", "Queued", "Starting"}, 60, "prod listed")
    finally:
        for watch in (watch_list, watch_get):
            if watch.proc.poll() is None:
                watch.proc.terminate()
            watch.finish()


def test_submit_cpu_and_memory_accept_kubernetes_quantities(org: Org) -> None:
    seed_org(org)
    org.ok("submit", "a", "--team", "nlp", "--gpus", "1", "--cpu", "8", "--memory", "64Gi")
    org.ok("submit", "b", "--team", "nlp", "--gpus", "1", "--cpu", "500m", "--memory", "1G")
    specs = {w["name"]: w["spec"] for w in org.admin.list_workloads().items}
    assert (specs["a"]["cpu"], specs["a"]["memory_mib"]) == (8, 65536)
    assert (specs["b"]["cpu"], specs["b"]["memory_mib"]) == (0.5, 954)  # 10^9 B, rounded up


def test_submit_bad_cpu_or_memory_names_the_flag_and_the_forms(org: Org) -> None:
    seed_org(org)
    cases = [(("--cpu", "lots"), "--cpu 'lots'", "500m"),
             (("--cpu", "0.0001"), "--cpu '0.0001'", "steps of 1m"),
             (("--memory", "64GB"), "--memory '64GB'", "64Gi, 512Mi, 1G"),
             (("--memory", "16384"), "--memory '16384': no unit", "64Gi")]
    for flags, named, form in cases:
        result = org.cli("submit", "x", "--team", "nlp", "--gpus", "1", *flags)
        assert result.exit_code == 2, (flags, result.stdout)
        assert named in result.stderr and form in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert org.admin.list_workloads().items == []
