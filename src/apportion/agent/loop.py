"""The agent: reconcile desired runs (decisions) with actual runs (the executor).

Outbound only. One loop, one thread; each pass is these steps:

1. **Observe**: poll the executor; status changes become reports in the outbox
   (state file) — this step needs no network and also runs while the control
   plane is unreachable, so outcomes are never lost.
2. **Heartbeat** on (re)connection and every ``heartbeat_interval``: the
   inventory plus every run's last status (the server reconciles from it). The
   runs' new log bytes are shipped just before it, as the statuses it carries
   may end a run.
3. **Logs, then flush**: ship the new bytes of the runs' log files (so a run's
   output is on the server before its outcome), then the outbox in order; a
   report is removed once acknowledged.
4. **Decisions**: long-poll ``/v1/agent/decisions`` from the saved cursor; fold
   the batch (a start followed by its stop is never started), apply it (a
   ``shrink`` stops only the pods it names), save the new cursor.

A failure to reach the control plane switches to back-off (0.5 s doubling to
``max_backoff``, with jitter) during which step 1 keeps running.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from apportion import __version__
from apportion.agent import logship
from apportion.agent.executor import Executor
from apportion.agent.fold import fold
from apportion.agent.model import (
    Instruction,
    Observed,
    Run,
    RunStatus,
    instruction_from_json,
)
from apportion.agent.protocol import AgentApi, AgentOptions, Retry
from apportion.agent.state import AgentState, RunRecord, StateFile
from apportion.client import ApiError, ServerUnreachable
from apportion.clock import SYSTEM_CLOCK, Clock
from apportion.domain.lifecycle import pods_phrase

__all__ = ["Agent", "AgentApi", "AgentOptions", "Retry"]
log = logging.getLogger("apportion.agent")
TERMINAL = frozenset({"Completed", "Failed", "Preempted", "Cancelled"})
PAGE = 100


class Agent:
    """One agent for one pool. ``run`` until ``stop`` is set."""

    def __init__(
        self, api: AgentApi, executor: Executor, state_file: StateFile, pool: str,
        options: AgentOptions | None = None, *, clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.api = api
        self.executor = executor
        self.state_file = state_file
        self.pool = pool
        self.options = options or AgentOptions()
        self._is_shutting_down = False
        #: heartbeat interval, back-off, idle waits, ``until`` and runs' ``started_at``
        self.clock = clock
        self.state: AgentState = state_file.load(pool)
        self.is_connected = False
        self.is_caught_up = False
        self._last_heartbeat = float("-inf")
        self._failures = 0
        self._adopted = False
        #: run ids a heartbeat answer says the control plane has ended (``stop_runs``)
        self._refused: set[str] = set()
        #: run ids the agent stopped at their time limit -> the message to report
        self._timed_out: dict[str, str] = {}

    # -- lifecycle --------------------------------------------------------------------------

    def run(self, stop: threading.Event, until: float | None = None) -> None:
        """Reconcile until ``stop`` is set (or wall-clock ``until`` passes)."""
        self.restore()
        while not stop.is_set() and (until is None or self.clock.now() < until):
            try:
                self.step()
                self._failures = 0
            except (Retry, ApiError) as err:
                if isinstance(err, ApiError):
                    log.error("unexpected answer from the control plane: %s", err)
                if self.is_connected or self._failures == 0:
                    log.warning("control plane unavailable (%s); backing off", err)
                self.is_connected = False
                delay = min(self.options.max_backoff, 0.5 * 2 ** self._failures)
                self._failures += 1
                self.idle(stop, delay * random.uniform(0.8, 1.2))

    def restore(self) -> None:
        """After a restart: hand the runs of the state file back to the executor.

        Runs that were being stopped are handed over as such, with the grace
        that is left of their stop (``stop_at``): the executor stops them again
        and keeps the deadline, so a stop in flight survives the restart."""
        if self._adopted:
            return
        self._adopted = True
        now = self.clock.now()
        records = [r for r in self.state.runs.values() if r.phase != "waiting"]
        runs = [r.run for r in records]
        stopping = {r.run.run_id: max(0.0, (now if r.stop_at is None else r.stop_at) - now)
                    for r in records if r.phase == "stopping"}
        for run in runs:
            logship.track(self.state, run, self.executor.log_files(run))
        if runs:
            log.info("adopting %d run(s) from %s (%d being stopped)", len(runs),
                     self.state_file.path, len(stopping))
            self.executor.adopt(runs, stopping)

    def idle(self, stop: threading.Event, seconds: float) -> None:
        """Wait ``seconds`` while still observing the executor (no network)."""
        end = self.clock.monotonic() + seconds
        while not stop.is_set() and self.clock.monotonic() < end:
            self.observe()
            self.clock.wait(stop, min(self.options.poll_interval,
                                      max(0.0, end - self.clock.monotonic())))

    def shutdown(self, *, stop_runs: bool, timeout: float = 10.0) -> None:
        """Stop the executor's runs (if asked), then release the executor.

        Without ``stop_runs`` workloads keep running and the next agent adopts them.
        """
        if stop_runs:
            self._is_shutting_down = True
            for rid, rec in list(self.state.runs.items()):
                if rec.phase == "waiting":
                    self.state.mark_done(rid)
                    continue
                self.executor.stop(rid, 0)
                rec.phase, rec.stop_at = "stopping", self.clock.now()
            end = self.clock.monotonic() + timeout
            while self.state.runs and self.clock.monotonic() < end:
                self.observe()
                self.clock.sleep(0.05)
            self._save()
        self.executor.close()

    # -- one pass ---------------------------------------------------------------------------

    def step(self) -> None:
        """One reconcile pass (steps 1-4 of the module docstring)."""
        self.observe()
        # Logs first: a heartbeat carries the outbox's statuses (a run that ended
        # during an outage is reported by it), and a run's output must be on the
        # server before its outcome.
        self.ship_logs()
        if not self.is_connected or (
            self.clock.now() - self._last_heartbeat >= self.options.heartbeat_interval
        ):
            self.heartbeat()
        self.ship_logs()
        self.flush()
        wait = 0.0 if self.state.outbox else self.options.poll_interval
        self.apply(*self.fetch(wait))
        self._stop_refused()
        self.observe()
        self.ship_logs()
        self.flush()

    # -- 1. observe -------------------------------------------------------------------------

    def observe(self) -> None:
        seen = {o.run_id: o for o in self.executor.poll()}
        changed = False
        for rid, rec in list(self.state.runs.items()):
            if rec.phase == "waiting":
                continue  # not handed to the executor yet
            obs = seen.get(rid) or Observed(rid, RunStatus.LOST,
                                            "the executor has no trace of this run")
            changed |= self._observe_one(rec, obs)
        for rid, obs in seen.items():
            if rid in self.state.runs:
                continue
            if rid in self.state.done or obs.status.is_final:
                self.executor.forget(rid)
            elif self.is_caught_up:
                log.warning("stopping %s: no decision asks for it", rid)
                self.executor.stop(rid, 0)
        if changed:
            self._save()
        self._enforce_time_limits()
        self._start_waiting()

    def _enforce_time_limits(self) -> None:
        """Stop runs ``time_limit_fallback`` seconds past their time limit: the
        control plane ends them at the limit (issue 16); this is the bound when
        it cannot (unreachable). Reported as failed, with the reason."""
        now = self.clock.now()
        for rid, rec in list(self.state.runs.items()):
            limit = rec.run.exec.time_limit
            if rec.phase != "active" or limit is None:
                continue
            if now < rec.run.started_at + limit + self.options.time_limit_fallback:
                continue
            log.warning("%s: past its time limit of %.0f s; stopping it", rid, limit)
            self._timed_out[rid] = (f"time limit of {limit:g} s reached; stopped by the agent "
                                    "(the control plane had not ended it)")
            rec.phase, rec.stop_at = "stopping", now
            self.state.outbox = [i for i in self.state.outbox
                                 if not (i["run_id"] == rid and i["status"] == "running")]
            self._save()
            self.executor.stop(rid, 0)

    def _start_waiting(self) -> None:
        """Start the held-back starts whose devices no stopping run holds any more."""
        for rec in [r for r in self.state.runs.values() if r.phase == "waiting"]:
            if not self._blockers(rec.run):
                rec.phase = "active"
                self._launch(rec)

    def _blockers(self, run: Run) -> list[str]:
        """Runs being stopped that still hold a device ``run`` needs (the device's
        shares of every started run plus ``run``'s exceed a whole device), and
        older attempts of ``run``'s workload being stopped (wherever they run:
        two attempts of one workload never run side by side)."""
        def shares(r: Run) -> dict[tuple[str, int], int]:
            out: dict[tuple[str, int], int] = {}
            for i, pod in enumerate(r.placement):
                if i in r.stopped:
                    continue
                for d in pod.devices:
                    out[(pod.node, d.index)] = out.get((pod.node, d.index), 0) + d.milli
            return out

        want = shares(run)
        used: dict[tuple[str, int], int] = {}
        stopping: dict[tuple[str, int], set[str]] = {}
        for rid, rec in self.state.runs.items():
            if rid == run.run_id or rec.phase == "waiting":
                continue
            for key, milli in shares(rec.run).items():
                used[key] = used.get(key, 0) + milli
                if rec.phase == "stopping":
                    stopping.setdefault(key, set()).add(rid)
        older = {rid for rid, rec in self.state.runs.items()
                 if rec.phase == "stopping" and rec.run.workload_id == run.workload_id
                 and rec.run.attempt < run.attempt}
        return sorted(older | {rid for key, milli in want.items() if key in stopping
                               and used[key] + milli > 1000 for rid in stopping[key]})

    def _observe_one(self, rec: RunRecord, obs: Observed) -> bool:
        rid = rec.run.run_id
        if rec.phase == "stopping":
            if obs.status.is_final:
                # The control plane ended this attempt already (a stop decision);
                # saying that the run has exited frees its devices there before
                # the grace is over. Runs stopped by our own shutdown are not
                # reported: the next agent adopts or reconciles them.
                if not self._is_shutting_down:
                    message = self._timed_out.pop(rid, None) or obs.message
                    self._queue(rec, "failed", message or "stopped after a stop decision",
                                obs.exit_code)
                self.state.mark_done(rid)
                self.executor.forget(rid)
                return True
            return False
        if obs.status is RunStatus.RUNNING and rec.reported is None:
            self._queue(rec, "running", obs.message or "running", None)
            return True
        if obs.status.is_final:
            status = "completed" if obs.status is RunStatus.COMPLETED else "failed"
            message = obs.message
            if obs.status is RunStatus.STOPPED:
                message = message or "stopped without a stop decision"
            self._queue(rec, status, message or status, obs.exit_code)
            self.state.mark_done(rid)
            self.executor.forget(rid)
            return True
        return False

    def _queue(self, rec: RunRecord, status: str, message: str, exit_code: int | None, *,
               pods_running: int | None = None) -> None:
        run = rec.run
        rec.reported = status
        item: dict[str, Any] = {
            "workload_id": run.workload_id, "attempt": run.attempt, "run_id": run.run_id,
            "status": status, "message": message[:1000], "exit_code": exit_code,
        }
        if pods_running is not None:
            item["pods_running"] = pods_running
        self.state.outbox.append(item)
        log.info("%s: %s (%s)", run.run_id, status, message)

    # -- 2. heartbeat -----------------------------------------------------------------------

    def heartbeat(self) -> None:
        nodes = [n.to_json() for n in self.executor.inventory()]
        answer = self._call(self.api.agent_heartbeat, self.pool, nodes,
                            agent_version=__version__, runs=self._run_statuses())
        self._last_heartbeat = self.clock.now()
        self._refused.update(str(r) for r in answer.get("stop_runs") or ())
        server_cursor = int(answer.get("decisions_cursor") or 0)
        if self.state.cursor is not None and server_cursor < self.state.cursor:
            log.warning("the control plane's last decision is %d but this agent applied %d: "
                        "its database was replaced; replaying its decisions from the start",
                        server_cursor, self.state.cursor)
            self.state.cursor = None
            self.is_caught_up = False
        if not self.is_connected:
            log.info("connected to the control plane: pool %s, %d node(s)", self.pool,
                     len(nodes))
        self.is_connected = True

    def _run_statuses(self) -> list[dict[str, Any]]:
        """Every run's last status: what is queued, else ``running`` if reported so.

        A queued report keeps its message and exit code: the server may apply it
        from the heartbeat, and the later report is then a duplicate. An outcome
        whose logs are still being shipped is left to the outbox flush (after the
        logs), so a run's output is on the server before its outcome, also after
        an outage. Runs being stopped are left out: the control plane has ended
        them already (their ``running`` would only be refused and audited)."""
        latest: dict[str, dict[str, Any]] = {}
        for rid, rec in self.state.runs.items():
            if rec.reported == "running" and rec.phase == "active":
                latest[rid] = {"workload_id": rec.run.workload_id, "attempt": rec.run.attempt,
                               "run_id": rid, "status": "running"}
        for item in self.state.outbox:  # with the message: the heartbeat may apply it first
            if item["status"] != "running" and item["run_id"] in self.state.logs:
                continue  # its output is not all shipped: the flush after the logs says it
            latest[item["run_id"]] = {k: item.get(k) for k in
                                      ("workload_id", "attempt", "run_id", "status", "message",
                                       "exit_code")}
        return [latest[k] for k in sorted(latest)]

    # -- 3. logs and flush ------------------------------------------------------------------

    def ship_logs(self) -> None:
        """New bytes of every tracked log file to the control plane (``logship``)."""
        def send(*args: Any) -> dict[str, Any]:
            answer: dict[str, Any] = self._call(self.api.agent_log, *args)
            return answer

        try:
            changed = logship.ship(self.state, send)
        except Retry:
            self._save()  # keep what was acknowledged before the outage
            raise
        if changed:
            self._save()

    def flush(self) -> None:
        while self.state.outbox:
            item = self.state.outbox[0]
            try:
                answer = self._call(
                    self.api.agent_report, item["workload_id"], item["attempt"],
                    item["run_id"], item["status"], message=item.get("message"),
                    exit_code=item.get("exit_code"), pods_running=item.get("pods_running"))
            except ApiError as err:  # a client error: the report can never be accepted
                log.error("report %s %s refused: %s", item["run_id"], item["status"], err)
                answer = {"accepted": False}
            self.state.outbox.pop(0)
            self._save()
            self._check_answer(item, answer)

    def _check_answer(self, item: dict[str, Any], answer: dict[str, Any]) -> None:
        """A refused ``running`` report for a run that still runs means the control
        plane has ended this attempt (a stop decision we missed): stop it."""
        rid = item["run_id"]
        rec = self.state.runs.get(rid)
        if answer.get("accepted", True) or rec is None or rec.phase != "active":
            return
        ended = answer.get("status") in TERMINAL or int(answer.get("attempt") or 0) > int(
            item["attempt"])
        if ended:
            log.warning("%s: the control plane says %s (attempt %s); stopping it", rid,
                        answer.get("status"), answer.get("attempt"))
            rec.phase, rec.stop_at = "stopping", self.clock.now()
            self._save()
            self.executor.stop(rid, 0)

    def _stop_refused(self) -> None:
        """Stop the runs the last heartbeat's answer refused (``stop_runs``), after
        the decisions were applied: a stop decision among them keeps its grace."""
        for rid in sorted(self._refused):
            rec = self.state.runs.get(rid)
            if rec is None or rec.phase != "active" or rec.reported is None:
                continue
            log.warning("%s: the control plane has ended this attempt; stopping it", rid)
            rec.phase, rec.stop_at = "stopping", self.clock.now()
            self.state.outbox = [i for i in self.state.outbox
                                 if not (i["run_id"] == rid and i["status"] == "running")]
            self._save()
            self.executor.stop(rid, 0)
        self._refused.clear()

    # -- 4. decisions -----------------------------------------------------------------------

    def fetch(self, wait: float) -> tuple[list[Instruction], int]:
        """Every decision after the cursor (all pages), long-polling ``wait`` s if none;
        and the new cursor. Without a cursor (no state file, or the server's
        database was replaced) only live decisions are asked for: starts of
        attempts that already ended are never started again."""
        out: list[Instruction] = []
        is_live = self.state.cursor is None
        cursor = self.state.cursor or 0
        while True:
            page = self._call(self.api.agent_decisions, cursor, limit=PAGE,
                              wait=wait if not out else 0, live=is_live)
            out.extend(instruction_from_json(d) for d in page.items)
            if page.next_token is not None:
                cursor = max(cursor, int(page.next_token))
            elif page.items:
                cursor = max(cursor, out[-1].id)
            if len(page.items) < PAGE:
                break
        return out, cursor

    def apply(self, batch: Sequence[Instruction], cursor: int) -> None:
        """Apply a batch of decisions in order, folded; then save the cursor.

        A start whose shrinks are in the same batch (an agent catching up)
        starts without the pods they took (``fold``)."""
        folded = fold(batch)
        for d in batch:
            if d.kind == "start":
                if d.run_id in folded.superseded and d.run_id not in self.state.runs:
                    self.state.mark_done(d.run_id)  # ended before it could start
                    continue
                self._start(d, folded.taken.get(d.run_id, ()))
            elif d.kind == "stop":
                self._stop(d)
            elif d.kind == "shrink":
                self._shrink(d)
            else:
                log.warning("ignoring decision %d of unknown kind %r", d.id, d.kind)
        if cursor != self.state.cursor or batch:
            self.state.cursor = cursor
            self._save()
        self.is_caught_up = True

    def _start(self, d: Instruction, taken: tuple[int, ...] = ()) -> None:
        if self.state.is_known(d.run_id):
            return
        rec = RunRecord(replace(d.to_run(self.clock.now()), stopped=taken))
        self.state.runs[d.run_id] = rec
        blockers = self._blockers(rec.run)
        if blockers:
            # After an outage a victim's stop and its replacement's start (or the
            # victim's own next attempt) arrive together: the start waits until
            # the victim has exited.
            rec.phase = "waiting"
            self._save()
            log.info("%s: start held back until %s (being stopped on its devices, or an "
                     "older attempt of its workload) has exited", d.run_id, ", ".join(blockers))
            return
        self._launch(rec)

    def _launch(self, rec: RunRecord) -> None:
        """Hand a run to the executor (its start time: now, also after waiting)."""
        rec.run = replace(rec.run, started_at=self.clock.now())
        d = rec.run
        logship.track(self.state, rec.run, self.executor.log_files(rec.run))
        self._save()  # before the executor starts it: see the state file's invariant
        log.info("%s: start %s (%d pod(s) on %s)", d.run_id, d.exec.name, rec.run.pods,
                 ", ".join(rec.run.nodes))
        try:
            self.executor.start(rec.run)
        except Exception as err:  # an executor error fails this attempt, not the agent
            log.exception("%s: the executor could not start it", d.run_id)
            self._queue(rec, "failed", f"executor error: {err}", None)
            self.state.mark_done(d.run_id)
            self._save()

    def _stop(self, d: Instruction) -> None:
        rec = self.state.runs.get(d.run_id)
        if rec is None:
            self.state.mark_done(d.run_id)
            return
        if rec.phase == "stopping":
            return
        if rec.phase == "waiting":  # held back, never started: nothing to stop
            log.info("%s: stop (%s) before it started", d.run_id, d.reason)
            self.state.mark_done(d.run_id)
            self._save()
            return
        grace = max(0.0, d.grace_seconds or 0.0)
        log.info("%s: stop (%s, grace %.0f s)", d.run_id, d.reason, grace)
        # The deadline is saved before the executor is asked: a restarted agent
        # stops the run again with what is left of the grace (``restore``).
        rec.phase, rec.stop_at = "stopping", self.clock.now() + grace
        self.state.outbox = [i for i in self.state.outbox
                             if not (i["run_id"] == d.run_id and i["status"] == "running")]
        self._save()
        self.executor.stop(d.run_id, grace)

    def _shrink(self, d: Instruction) -> None:
        """Stop exactly the pods a shrink took (SPEC 6.5); the run goes on with
        the others. The taken pods are recorded on the run (state file) before
        the executor is asked, and a ``running`` report with ``pods_running``
        tells the control plane the shrink was carried out."""
        rec = self.state.runs.get(d.run_id)
        if rec is None or rec.phase == "stopping":
            return
        if rec.phase == "waiting":  # not started yet: it starts without the taken pods
            rec.run = replace(rec.run, stopped=tuple(sorted({*rec.run.stopped, *d.pods})))
            self._save()
            return
        run = rec.run
        pods = tuple(sorted(set(d.pods) - set(run.stopped)))
        if not pods:
            return  # replayed: already applied
        if not all(0 <= i < run.pods for i in pods):
            log.warning("ignoring shrink %d of %s: pods %s, the run has %d", d.id, d.run_id,
                        list(pods), run.pods)
            return
        grace = max(0.0, d.grace_seconds or 0.0)
        rec.run = replace(run, stopped=tuple(sorted({*run.stopped, *pods})))
        self._save()
        log.info("%s: shrink, stopping %s (%s, grace %.0f s)", d.run_id, pods_phrase(pods),
                 d.reason, grace)
        try:
            self.executor.shrink(d.run_id, pods, grace)
        except Exception as err:  # pods we cannot stop would run on devices given away
            log.exception("%s: the executor could not stop %s", d.run_id, pods_phrase(pods))
            self.executor.stop(d.run_id, grace)
            self._queue(rec, "failed", f"executor error: could not stop {pods_phrase(pods)} "
                        f"for a shrink: {err}", None)
            rec.phase, rec.stop_at = "stopping", self.clock.now() + grace
            self._save()
            return
        left = rec.run.pods_running
        self._queue(rec, "running", f"shrunk: {pods_phrase(pods)} stopped ({d.reason or 'shrink'})"
                    f"; {left} pod(s) running", None, pods_running=left)
        self._save()

    # -- helpers ----------------------------------------------------------------------------

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call the control plane; unreachable, 5xx, 429, 401 and 403 become :class:`Retry`."""
        try:
            return fn(*args, **kwargs)
        except ServerUnreachable as err:
            raise Retry(str(err)) from err
        except ApiError as err:
            if err.status >= 500 or err.status in (401, 403, 408, 429):
                if err.status in (401, 403):
                    log.error("the control plane refuses this agent's token: %s", err)
                raise Retry(str(err)) from err
            raise

    def _save(self) -> None:
        self.state_file.save(self.state)
