"""The CLI bugs of issue 20, each as a user meets it."""

from __future__ import annotations

from pathlib import Path

from apportion.cli.workloads_cmd import fold_event
from tests.cli.conftest import Org, seed_org, submit, wait_for
from tests.cli.test_workloads import Lines, spawn


def test_watch_rows_come_from_the_stream_once_each_and_under_the_header(org: Org) -> None:
    agent = seed_org(org)
    watch = Lines(spawn(org, "workloads", "list", "-w", "--timeout", "120"))
    try:
        wait_for(lambda: len(watch.lines) >= 1, 60, "the header")
        header = watch.lines[0]
        job = submit(org, "job-one", "nlp", 1)
        org.run(agent, job)

        def statuses() -> list[str]:
            return [r[6] for r in watch.rows()[1:] if len(r) > 6 and r[1] == "job-one"]

        wait_for(lambda: "Running" in statuses(), 60, "the job running in the watch")
        # every state the stream went through, each once, in order
        assert statuses() == ["Pending", "Queued", "Starting", "Running"]
        at = header.index("STATUS")
        for line in watch.lines[1:]:
            if "job-one" in line:
                assert line[at:].split()[0] in {"Pending", "Queued", "Starting", "Running"}
                assert line.index(" nlp ") == header.index("TEAM") - 1
    finally:
        if watch.proc.poll() is None:
            watch.proc.terminate()
        watch.finish()


def test_fold_event_shows_what_the_event_says_not_the_current_state() -> None:
    row = {"id": 7, "name": "x", "status": "Running", "pool": "main", "reason": None,
           "pods": 4, "pods_running": 4}
    queued = fold_event(row, {"type": "workload.status", "status": "Queued", "attempt": 2,
                              "data": {"name": "x", "pool": "main"}})
    assert (queued["status"], queued["pods_running"], queued["attempt"]) == ("Queued", 0, 2)
    why = fold_event(queued, {"type": "workload.reason", "status": "Queued",
                              "message": "needs 4 GPUs", "data": {"code": "FRAGMENTED"}})
    assert why["reason"] == {"code": "FRAGMENTED", "message": "needs 4 GPUs"}
    shrunk = fold_event(why, {"type": "workload.status", "status": "Running",
                              "data": {"pool": "main", "pods_running": 3}})
    assert (shrunk["pods_running"], shrunk["reason"]) == (3, None)


def test_a_permission_error_explains_itself_once(org: Org) -> None:
    seed_org(org)
    viewer = org.token("vera", "viewer")
    result = org.cli("tokens", "list", token=viewer)
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert line.count("viewer") == 1 and line.count("org_admin") == 1, line


def test_logs_help_keeps_pod_prefix_and_an_empty_log_says_why(org: Org) -> None:
    help_text = org.ok("workloads", "logs", "--help")
    assert "[pod i]" in " ".join(help_text.split())
    agent = seed_org(org)
    job = submit(org, "quiet", "nlp", 1)
    org.run(agent, job)
    result = org.cli("workloads", "logs", "quiet")
    assert result.exit_code == 0 and result.stdout == ""
    assert "no output yet" in result.stderr and "sim executor" in result.stderr
    waiting = submit(org, "later", "production", 4, priority=1)
    wait_for(lambda: org.admin.get_workload(waiting)["status"] in ("Pending", "Queued"), 10,
             "it waits")
    result = org.cli("workloads", "logs", "later")
    assert "has not started yet" in result.stderr


def test_pools_list_shows_the_nodes_gpu_type(org: Org) -> None:
    org.add_pool("main", nodes=2, gpus=4)  # the agent's heartbeat made the pool: no type
    rows = [line.split() for line in org.ok("pools", "list").splitlines()]
    assert rows[0][:2] == ["NAME", "GPU-TYPE"] and rows[1][:2] == ["main", "h100"]


def test_submit_file_with_a_typo_says_did_you_mean(org: Org, tmp_path: Path) -> None:
    seed_org(org)
    spec = tmp_path / "w.yaml"
    spec.write_text("name: x\nteam: nlp\ngpus: 1\npriorty: 40\n")
    result = org.cli("submit", "-f", str(spec))
    assert result.exit_code == 2
    assert "priorty: unknown key; did you mean 'priority'?" in result.stderr
    assert "Extra inputs" not in result.stderr


def test_reservation_of_one_gpu_is_singular(org: Org) -> None:
    seed_org(org)
    out = org.ok("reservations", "set", "vision", "main", "1")
    assert out.strip().endswith(": 1 GPU")


def test_pools_show_says_one_node_not_one_nodes(org: Org) -> None:
    org.add_pool("solo", nodes=1, gpus=4)
    first = org.ok("pools", "show", "solo").splitlines()[0]
    assert first.startswith("pool solo: 4 GPUs on 1 node, 0 in use"), first


def test_nodes_list_with_an_unknown_state_or_pool_fails_and_names_it(org: Org) -> None:
    org.add_pool("main", nodes=1, gpus=4)
    result = org.cli("nodes", "list", "--state", "Ready")
    assert result.exit_code == 1 and result.stdout == ""
    line = result.stderr.strip()
    assert "state: 'Ready' is not allowed; did you mean 'ready'?" in line, line
    assert "ready, cordoned, down, unknown" in line
    result = org.cli("nodes", "list", "--pool", "mian")
    assert result.exit_code == 1
    assert "pool 'mian' not found; did you mean 'main'?" in result.stderr
    result = org.cli("workloads", "list", "--team", "nobody-here")
    assert result.exit_code == 1 and "team 'nobody-here' not found" in result.stderr


def test_infinite_or_nan_gpus_are_a_usage_error_not_a_traceback(org: Org,
                                                                 tmp_path: Path) -> None:
    seed_org(org)
    for value in ("inf", "nan", "1e400"):
        result = org.cli("submit", "x", "--team", "nlp", "--gpus", value, "--", "true")
        assert result.exit_code == 2, result.stderr
        assert result.stderr.startswith("error: gpus: must be a finite number"), result.stderr
        assert "Traceback" not in result.stderr
    spec = tmp_path / "w.yaml"
    spec.write_text("name: x\nteam: nlp\ngpus: 1\ncpu: .inf\n")
    result = org.cli("submit", "-f", str(spec))
    assert result.exit_code == 2 and "cpu: must be a finite number, got inf" in result.stderr
    assert org.admin.list_workloads(limit=1).total_count == 0  # nothing was sent
