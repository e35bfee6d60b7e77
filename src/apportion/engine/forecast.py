"""Start-time estimates: the live snapshot run forward in virtual time.

There is no second scheduler: :func:`forecast` runs the engine's own cycle
(``CycleCache``, which makes ``run_cycle``'s plans) over the snapshot, applies
each plan with ``apply_plan`` as the simulator and the service do, and moves
virtual time to the next moment something ends. Nothing new is submitted and
nothing fails; each placed workload ends at a time that is an assumption,
stated with every estimate (:func:`expected_end`):

1. ``time_limit``: the workload has one; it ends at ``started_at + time_limit``;
2. ``team_median``: the median runtime of its team's finished work that ran
   longer than this one has run so far (for work not started yet: of all of it);
3. ``pool_median``: the same over the pool's finished work;
4. ``default``: ``History.default`` seconds (one hour) after it started, or, if
   it has already run that long, that much longer from now.

Victims preempted during the run leave when their grace ends (``grace``: no
assumption). The run stops when every target has started, at the horizon
(``horizon`` seconds of virtual time or ``max_cycles`` cycles: the targets
left are "beyond the horizon"), or when nothing is left to end (they would
wait forever in this state). One run answers for all its targets.

Pure and deterministic, like the cycle: same snapshot and history, same
estimates.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from apportion.domain.lifecycle import Exiting, Status, WorkloadState, transition
from apportion.engine.apply import apply_plan
from apportion.engine.kept_state import CycleCache
from apportion.engine.snapshot import CycleConfig, Snapshot

DEFAULT_RUNTIME = 3600
HORIZON = 7 * 86400
MAX_CYCLES = 400
MAX_CYCLES_PER_INSTANT = 100
CAUSE = "forecast"

#: How much an end rests on a guess, least first; an estimate states the most.
BASES = ("grace", "time_limit", "team_median", "pool_median", "default")
BASIS_TEXT = {
    "grace": "a preempted workload's grace period ends",
    "time_limit": "running work ends at its time limit",
    "team_median": "running work ends at its team's median runtime of finished work",
    "pool_median": "running work ends at its pool's median runtime of finished work",
    "default": "running work ends after the default runtime",
}


@dataclass(frozen=True, slots=True)
class History:
    """Runtimes in seconds of finished work, each tuple sorted ascending."""

    by_team: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    by_pool: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    default: int = DEFAULT_RUNTIME


@dataclass(frozen=True, slots=True)
class Ending:
    """When ``workload_id`` is assumed to free its devices, and on what basis."""

    workload_id: int
    at: int
    basis: str


@dataclass(frozen=True, slots=True)
class Estimate:
    """One waiting workload's estimated start (None: unknown, ``note`` says why).

    ``waits_for``: the endings that last freed each device it starts on (or,
    when none of them held those devices, the ones at the instant it starts);
    ``basis``: the most assumed of their bases (``BASES``), "" for none.
    """

    workload_id: int
    pool: str | None
    start: int | None
    waits_for: tuple[Ending, ...] = ()
    basis: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class Forecast:
    """The estimates of one run, and the work it took."""

    now: int
    estimates: Mapping[int, Estimate]
    cycles: int
    instants: int
    is_horizon_reached: bool


def median_after(runs: tuple[int, ...], elapsed: int) -> int | None:
    """The median (the lower middle value) of ``runs`` above ``elapsed``, or None."""
    first = bisect_right(runs, elapsed)
    n = len(runs) - first
    return runs[first + (n - 1) // 2] if n else None


def expected_end(w: WorkloadState, now: int, history: History) -> Ending:
    """When placed (or just started) ``w`` is assumed to end; see the module doc."""
    started = w.started_at if w.started_at is not None else now
    if w.spec.time_limit is not None:
        return Ending(w.id, max(started + w.spec.time_limit, now), "time_limit")
    elapsed = now - started
    for basis, runs in (("team_median", history.by_team.get(w.spec.team, ())),
                        ("pool_median", history.by_pool.get(w.pool or "", ()))):
        runtime = median_after(runs, elapsed)
        if runtime is not None:
            return Ending(w.id, started + runtime, basis)
    end = started + history.default
    return Ending(w.id, end if end > now else now + history.default, "default")


def forecast(
    snapshot: Snapshot, history: History, targets: Collection[int] | None = None, *,
    horizon: int = HORIZON, max_cycles: int = MAX_CYCLES,
) -> Forecast:
    """Estimate the start of every waiting workload in ``targets`` (default:
    all waiting work of the snapshot) from one forward run."""
    return _Run(snapshot, history, targets, horizon, max_cycles).run()


class _Run:
    def __init__(self, snapshot: Snapshot, history: History, targets: Collection[int] | None,
                 horizon: int, max_cycles: int) -> None:
        self.base = snapshot
        self.history = history
        self.now = snapshot.now
        self.until = snapshot.now + horizon
        self.max_cycles = max_cycles
        self.active: dict[int, WorkloadState] = {w.id: w for w in snapshot.workloads}
        self.exiting: tuple[Exiting, ...] = snapshot.exiting
        waiting = {w.id for w in snapshot.workloads if w.status.is_waiting}
        self.targets = waiting if targets is None else waiting & set(targets)
        self.left = set(self.targets)
        self.found: dict[int, Estimate] = {}
        self.ends: list[tuple[int, int, int]] = []  # (at, id, attempt)
        self.endings: dict[tuple[int, int], Ending] = {}  # (id, attempt) -> its ending
        #: (node, device) -> endings that freed it, in time order
        self.freed: dict[tuple[str, int], list[Ending]] = {}
        self.at_instant: list[Ending] = []  # the endings of the current instant
        self.cache = CycleCache()
        self.changed: set[int] = set()
        self.cycles = 0
        self.instants = 0
        self.holds = any(p.starvation_hold_after is not None for p in snapshot.pools.values())

    def run(self) -> Forecast:
        for w in list(self.active.values()):
            if w.status.is_placed:
                self._started(w, expected_end(w, self.now, self.history))
        is_cut = False
        self._converge()
        while self.left:
            at = self._next_instant()
            if at is None:
                break
            if at > self.until or self.cycles >= self.max_cycles:
                is_cut = True
                break
            self._instant(at)
        for wid in sorted(self.left):
            left = self.active.get(wid)
            note = ("unknown (beyond horizon)" if is_cut else
                    "unknown (nothing left to end would let it start)")
            if left is not None and left.reason is not None:
                note += f"; waiting: {left.reason.code.value}"
            self.found[wid] = Estimate(wid, left.pool if left else None, None, (), "", note)
        return Forecast(self.base.now, dict(sorted(self.found.items())), self.cycles,
                        self.instants, is_cut)

    # -- time ----------------------------------------------------------------
    def _next_instant(self) -> int | None:
        while self.ends and not self._is_live(self.ends[0]):
            heapq.heappop(self.ends)
        times = [self.ends[0][0]] if self.ends else []
        times += [e.exits_at for e in self.exiting]
        if self.holds:
            times += self._hold_times()
        later = [t for t in times if t > self.now]
        return min(later) if later else None

    def _hold_times(self) -> list[int]:
        out = []
        for w in self.active.values():
            pool = self.base.pools.get(w.pool or "")
            hold = pool.starvation_hold_after if pool is not None else None
            if w.status.is_waiting and not w.is_hold and w.head_since is not None and hold:
                out.append(w.head_since + hold)
        return out

    def _is_live(self, entry: tuple[int, int, int]) -> bool:
        _at, wid, attempt = entry
        w = self.active.get(wid)
        return w is not None and w.attempt == attempt and w.status.is_placed

    def _instant(self, at: int) -> None:
        """Work due at ``at`` ends, exiting victims leave, then cycles run."""
        self.now = at
        self.instants += 1
        self.at_instant = []
        while self.ends and self.ends[0][0] <= at:
            entry = heapq.heappop(self.ends)
            if self._is_live(entry):
                self._complete(self.active[entry[1]])
        for e in self.exiting:
            if e.exits_at <= at:
                self._free(Ending(e.workload_id, e.exits_at, "grace"), e)
        self.exiting = tuple(e for e in self.exiting if e.exits_at > at)
        self._converge()

    def _complete(self, w: WorkloadState) -> None:
        ending = self.endings[(w.id, w.attempt)]
        done = transition(w, Status.COMPLETED, self.now, CAUSE, "assumed to end")
        self._free(ending, w)
        self._put(done)

    def _free(self, ending: Ending, holder: WorkloadState | Exiting) -> None:
        self.at_instant.append(ending)
        for pod in holder.placement:
            for d in pod.devices:
                self.freed.setdefault((pod.node, d.index), []).append(ending)

    # -- cycles --------------------------------------------------------------
    def _converge(self) -> None:
        """Cycles until a plan changes nothing (or the caps are reached)."""
        for _ in range(MAX_CYCLES_PER_INSTANT):
            if self.cycles >= self.max_cycles or not any(
                    w.status.is_waiting for w in self.active.values()):
                return
            self.cycles += 1
            snap = replace(self.base, now=self.now, workloads=tuple(self.active.values()),
                           exiting=self.exiting, version=self.cycles)
            plan = self.cache.run(snap, CycleConfig(cycle_id=self.cycles), self.active,
                                  self.changed)
            self.changed = set()
            applied = apply_plan(self.active, self.exiting, plan)
            self.exiting = applied.exiting
            for wid in applied.changed:
                new = applied.states[wid]
                self._put(new)
                if new.status is Status.STARTING:
                    self._started(new, expected_end(new, self.now, self.history))
            if not plan.changes_anything:
                return

    def _put(self, w: WorkloadState) -> None:
        self.changed.add(w.id)
        if w.status.is_terminal:
            self.active.pop(w.id, None)
        else:
            self.active[w.id] = w

    def _started(self, w: WorkloadState, ending: Ending) -> None:
        """``w`` holds devices from now on: it runs at once and ends at ``ending``."""
        if w.status is Status.STARTING:
            w = transition(w, Status.RUNNING, self.now, CAUSE, "assumed to run at once")
            self._put(w)
        self.endings[(w.id, w.attempt)] = ending
        heapq.heappush(self.ends, (ending.at, w.id, w.attempt))
        if w.id in self.left:
            self.left.discard(w.id)
            self.found[w.id] = self._estimate(w)

    def _estimate(self, w: WorkloadState) -> Estimate:
        """The estimate of ``w``, which starts now on ``w.placement``."""
        if self.now == self.base.now:
            return Estimate(w.id, w.pool, self.now, (), "", "starts at the next cycle")
        seen: dict[int, Ending] = {}
        for pod in w.placement:
            for d in pod.devices:
                freed = self.freed.get((pod.node, d.index))
                if freed:  # the last to leave the device is the one it waited for
                    seen.setdefault(freed[-1].workload_id, freed[-1])
        if not seen:
            seen = {e.workload_id: e for e in self.at_instant}
        waits = tuple(sorted(seen.values(), key=lambda e: (e.at, e.workload_id)))
        basis = max((e.basis for e in waits), key=BASES.index, default="")
        return Estimate(w.id, w.pool, self.now, waits, basis, BASIS_TEXT.get(basis, ""))
