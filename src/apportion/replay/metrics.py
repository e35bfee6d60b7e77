"""The measures of one policy's run, from its final states (docs/replay.md,
"Measures" defines each one; this module is the definition in code).

Everything is computed from the attempts the simulator kept (when each
started, on which devices, when it let them go), the preemptions it
recorded and the cycle times it reported, over ``[start, end)``. Teams are
the org's teams (``team_by_name``), whatever the policy ran with; Jain's
index is taken over the org's top-level teams.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from apportion.domain.cluster import Node, NodeState
from apportion.domain.lifecycle import Status, WorkloadState, all_attempts
from apportion.domain.org import OrgTree
from apportion.sim.runner import SimResult

SAMPLES = 4000  # point samples over the window (saturation, Jain, fragmentation)
BINS = 400  # time bins of the series in results.json and the charts
PERCENTILES = (50, 95, 99)


@dataclass(frozen=True, slots=True)
class Span:
    """One attempt's hold on devices: [start, end) with ``milli`` GPUs."""

    start: int
    end: int
    milli: int
    team: str
    reserved: bool
    priority: int = 0


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50/p95/p99 (linear interpolation), None when there are no values."""
    if not values:
        return {f"p{p}": None for p in PERCENTILES}
    arr = np.asarray(values, dtype=float)
    return {f"p{p}": float(np.percentile(arr, p)) for p in PERCENTILES}


def size_of(w: WorkloadState) -> int:
    """Milli-GPU the workload needs to start (min_pods x per-pod charge)."""
    return w.spec.min_pods * w.spec.request.charge(81920)


def compute(
    result: SimResult,
    team_by_name: Mapping[str, str],
    tree: OrgTree,
    pool: str,
    start: int,
    end: int,
    cycle_seconds: Sequence[float] = (),
) -> dict[str, Any]:
    """Every measure of one run (see the module doc)."""
    end = max(end, start + 1)
    capacity = sum(n.gpus for n in result.nodes if n.pool == pool) * 1000
    states = sorted(result.states.values(), key=lambda w: w.id)
    teams = tree.leaves()
    spans: list[Span] = []
    for w in states:
        team = team_by_name.get(w.name, w.team)
        for a in all_attempts(w):
            if a.started_at is None or not a.placement or a.started_at >= end:
                continue
            stop = end if a.ended_at is None else min(a.ended_at, end)
            spans.append(Span(max(a.started_at, start), stop, sum(p.milli for p in a.placement),
                              team, w.spec.is_reserved, w.spec.priority))
    edges = np.linspace(start, end, BINS + 1)
    points = np.linspace(start, end, SAMPLES, endpoint=False)
    used_total = _integral([(s.start, s.end, s.milli) for s in spans], edges)
    by_team: dict[str, np.ndarray] = {}
    for team in teams:
        by_team[team] = _integral([(s.start, s.end, s.milli) for s in spans if s.team == team],
                                  edges)
    width = edges[1] - edges[0]
    util_series = used_total / width / capacity if capacity else used_total * 0
    average_util = float(used_total.sum() / ((end - start) * capacity)) if capacity else 0.0

    delays, never, jct = _delays(states, end)
    pre = _preemptions(result, states, team_by_name, edges)
    pool_nodes = [n for n in result.nodes if n.pool == pool and n.state is NodeState.READY]
    waits = _waiting_spans(states, team_by_name, end, pool_nodes)
    waiting = _waiting(waits, points)
    used_points = {team: _at([(s.start, s.end, s.milli) for s in spans if s.team == team], points)
                   for team in teams}
    fairness = _jain(tree, pool, used_points, waiting, capacity, points)
    fairness.update(_jain_spec(tree, pool, spans, waits, capacity, points,
                               fairness.pop("_saturated")))
    frag = _fragmentation(result, pool, points, end)
    idle = _idle(result, states, pool, points, end)
    balance = _work_balance(states, capacity, start, end)
    reserved = _reserved_starts(states, team_by_name, tree, pool, end, pool_nodes)
    cycles = [s * 1000 for s in cycle_seconds]

    per_team = {}
    for team in teams:
        mine = [w for w in states if team_by_name.get(w.name, w.team) == team]
        team_delays = [_delay(w, end) for w in mine]
        per_team[team] = {
            "workloads": len(mine),
            "gpus_average": float(by_team[team].sum() / (end - start) / 1000),
            "queueing_delay_s": percentiles([d for d in team_delays if d is not None]),
            "completed": sum(1 for w in mine if w.status is Status.COMPLETED),
            "preempted": pre["victims_by_team"].get(team, 0),
            "reservation_gpus": tree.reservation(team, pool) / 1000,
        }
    return {
        "window": {"start": start, "end": end},
        "capacity_gpus": capacity / 1000,
        "workloads": len(states),
        "utilization": {"average": average_util,
                        "series": [float(x) for x in util_series]},
        "series_edges": [float(x) for x in edges],
        "usage_by_team_gpus": {t: [float(x) for x in v / width / 1000]
                               for t, v in by_team.items()},
        "queueing_delay_s": {k: percentiles(v) for k, v in delays.items()},
        "delays_s": {k: sorted(v) for k, v in delays.items()},
        "never_started": never,
        "completion_time_s": {**percentiles(jct), "count": len(jct),
                              "mean": float(np.mean(jct)) if jct else None},
        "preemptions": {k: v for k, v in pre.items() if k != "victims_by_team"},
        "reserved_start": reserved,
        "fairness": fairness,
        "fragmentation": frag,
        "idle": idle,
        "work_balance": balance,
        "cycles": {"count": len(cycles), **{f"{k}_ms": v for k, v in percentiles(cycles).items()},
                   "max_ms": max(cycles) if cycles else None},
        "teams": per_team,
        "sim": {"instants": result.instants, "cycles": result.cycles},
    }


def _integral(spans: Sequence[tuple[int, int, int]], edges: np.ndarray) -> np.ndarray:
    """Milli-GPU-seconds of ``spans`` inside each bin of ``edges``."""
    if not spans:
        return np.zeros(len(edges) - 1)
    starts = np.array([s for s, _e, _m in spans], dtype=float)
    ends = np.array([e for _s, e, _m in spans], dtype=float)
    milli = np.array([m for _s, _e, m in spans], dtype=float)
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([milli, -milli])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    level = np.cumsum(deltas)  # usage just after each event
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])  # F at event k
    k = np.searchsorted(times, edges, side="right") - 1
    f_edges = np.where(k >= 0, area[np.maximum(k, 0)] + level[np.maximum(k, 0)]
                       * (edges - times[np.maximum(k, 0)]), 0.0)
    return np.diff(f_edges)


def _at(spans: Sequence[tuple[int, int, int]], points: np.ndarray) -> np.ndarray:
    """The summed milli of ``spans`` holding at each point (start <= t < end)."""
    if not spans:
        return np.zeros(len(points))
    out = np.zeros(len(points))
    arr = np.array(spans, dtype=float)
    for col, sign in ((0, 1.0), (1, -1.0)):
        order = np.argsort(arr[:, col], kind="stable")
        t = arr[order, col]
        cum = np.concatenate([[0.0], np.cumsum(arr[order, 2])])
        out += sign * cum[np.searchsorted(t, points, side="right")]
    return out


def _first_start(w: WorkloadState) -> int | None:
    starts = [a.started_at for a in all_attempts(w) if a.started_at is not None]
    return min(starts) if starts else None


def _delay(w: WorkloadState, end: int) -> int | None:
    first = _first_start(w)
    if first is None:
        return None if w.submitted_at >= end else end - w.submitted_at
    return first - w.submitted_at


def _delays(states: Sequence[WorkloadState], end: int
            ) -> tuple[dict[str, list[float]], dict[str, int], list[float]]:
    """Queueing delay by class (work never started counts with its wait so
    far), work never started by class, and completion times."""
    delays: dict[str, list[float]] = {"reserved": [], "elastic": []}
    never = {"reserved": 0, "elastic": 0}
    jct: list[float] = []
    for w in states:
        klass = w.spec.wclass.value
        d = _delay(w, end)
        if d is not None:
            delays[klass].append(float(d))
        if _first_start(w) is None:
            never[klass] += 1
        if w.status is Status.COMPLETED and w.ended_at is not None and w.ended_at <= end:
            jct.append(float(w.ended_at - w.submitted_at))
    return delays, never, jct


def _preemptions(result: SimResult, states: Sequence[WorkloadState],
                 team_by_name: Mapping[str, str], edges: np.ndarray) -> dict[str, Any]:
    by_id = {w.id: w for w in states}
    freed_by: dict[tuple[int, int], int] = defaultdict(int)
    lost = 0.0
    reserved_victims = 0
    victims_by_team: dict[str, int] = defaultdict(int)
    times = []
    by_kind = {k: {"count": 0, "gpu_hours_lost": 0.0} for k in PREEMPTION_KINDS}
    for p in result.preemptions:
        victim = by_id.get(p.victim)
        freed_by[(p.by, p.at)] += p.milli
        times.append(p.at)
        if victim is None:
            continue
        victims_by_team[team_by_name.get(victim.name, victim.team)] += 1
        if victim.spec.is_reserved:
            reserved_victims += 1
        running_at = next((a.running_at for a in all_attempts(victim)
                           if a.attempt == p.attempt), None)
        hours = 0.0
        if running_at is not None:
            hours = p.milli * max(0, p.at - running_at) / 1000 / 3600
            lost += hours
        preemptor = by_id.get(p.by)
        if preemptor is not None:
            kind = by_kind[_preemption_kind(preemptor, victim, team_by_name)]
            kind["count"] += 1
            kind["gpu_hours_lost"] += hours
    needed = sum(size_of(by_id[by]) for (by, _at) in freed_by if by in by_id)
    freed = sum(freed_by.values())
    counts, _ = np.histogram(times, bins=edges) if times else (np.zeros(len(edges) - 1), None)
    return {
        "count": len(result.preemptions),
        "preemptors": len(freed_by),
        "gpus_freed": freed / 1000,
        "gpus_needed": needed / 1000,
        "over_preemption_ratio": freed / needed if needed else None,
        "gpu_hours_lost": lost,
        "reserved_preempted": reserved_victims,
        "series": [int(c) for c in counts],
        "by_kind": by_kind,
        "victims_by_team": dict(victims_by_team),
    }


#: Why work was preempted, by what took it (``preemptions.by_kind``): a
#: reserved workload taking back its reservation (SPEC 6.4, any elastic
#: victim); elastic work of a higher priority; elastic work of the same
#: priority, another team (SPEC 6.4's fair share: the victim's team over its
#: entitlement); elastic work of a lower priority, another team (the same
#: rule: entitlements, not priorities, decide across teams); and elastic work
#: of the victim's own team (6.4's same-team rule, higher priority only).
PREEMPTION_KINDS = ("reserved", "higher_priority", "fair_share_same_priority",
                    "fair_share_lower_priority", "same_team")


def _preemption_kind(preemptor: WorkloadState, victim: WorkloadState,
                     team_by_name: Mapping[str, str]) -> str:
    if preemptor.spec.is_reserved:
        return "reserved"
    if team_by_name.get(preemptor.name, preemptor.team) == team_by_name.get(victim.name,
                                                                            victim.team):
        return "same_team"
    if preemptor.spec.priority > victim.spec.priority:
        return "higher_priority"
    if preemptor.spec.priority == victim.spec.priority:
        return "fair_share_same_priority"
    return "fair_share_lower_priority"


def _waits(w: WorkloadState, end: int) -> list[tuple[int, int]]:
    """When ``w`` waited, as [from, to) spans before ``end``: from submission
    to its first start, and from each preempted attempt's end to the next
    attempt's start (a requeued victim waits again)."""
    out: list[tuple[int, int]] = []
    since: int | None = w.submitted_at
    for a in all_attempts(w):
        if a.started_at is None:
            continue
        if since is not None and a.started_at > since:
            out.append((since, a.started_at))
        since = None
        if a.status is Status.PREEMPTED and a.ended_at is not None:
            since = a.ended_at
    if since is not None and since < end:
        out.append((since, end))
    return [(a, min(b, end)) for a, b in out if a < end]


def runnable(w: WorkloadState, nodes: Sequence[Node]) -> bool:
    """Could ``w`` ever start on ``nodes`` (all of them empty)? Work that could
    not (a pod asking 120 CPUs where the largest node has 96) is left out of
    demand, as SPEC 4 leaves it out."""
    empty = {n.name: [1000] * n.gpus for n in nodes}
    unused = {n.name: [0, 0] for n in nodes}
    return _pods_fitting(w, nodes, empty, unused, with_host=True) >= w.spec.min_pods


def _waiting_spans(states: Sequence[WorkloadState], team_by_name: Mapping[str, str],
                   end: int, nodes: Sequence[Node]) -> list[tuple[str, int, int, int, int]]:
    """Elastic work waiting that could ever run: (leaf team, priority, from, to, milli)."""
    out = []
    for w in states:
        if w.spec.is_reserved or not runnable(w, nodes):
            continue
        team = team_by_name.get(w.name, w.team)
        out += [(team, w.spec.priority, a, b, size_of(w)) for a, b in _waits(w, end)]
    return out


def _waiting(waits: Sequence[tuple[str, int, int, int, int]], points: np.ndarray
             ) -> dict[str, np.ndarray]:
    """Elastic milli waiting per leaf team at each point."""
    spans: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for team, _prio, a, b, milli in waits:
        spans[team].append((a, b, milli))
    return {team: _at(s, points) for team, s in spans.items()}


def water_fill(total: float, wants: Sequence[float], weights: Sequence[float]) -> list[float]:
    """``total`` split in proportion to ``weights``, nobody above its want,
    what one cannot take going to the others (SPEC 4 step 4's water-filling)."""
    share = [0.0] * len(wants)
    active = [i for i, want in enumerate(wants) if want > 0]
    left = total
    while active and left > 1e-9:
        weight = sum(weights[i] for i in active)
        capped = [i for i in active if wants[i] - share[i] <= left * weights[i] / weight]
        if not capped:
            for i in active:
                share[i] += left * weights[i] / weight
            return share
        for i in capped:
            left -= wants[i] - share[i]
            share[i] = wants[i]
        active = [i for i in active if i not in capped]
    return share


def _jain(tree: OrgTree, pool: str, used: Mapping[str, np.ndarray],
          waiting: Mapping[str, np.ndarray], capacity: int, points: np.ndarray
          ) -> dict[str, Any]:
    """Jain's index of top-level teams' burst use while the pool is saturated."""
    tops = tree.top_level()
    zero = np.zeros(len(points))

    def subtree(team: str, data: Mapping[str, np.ndarray]) -> np.ndarray:
        total = zero.copy()
        for leaf in tree.leaves():
            if team in tree.path(leaf):
                total = total + data.get(leaf, zero)
        return total

    use = {t: subtree(t, used) for t in tops}
    want = {t: subtree(t, waiting) for t in tops}
    in_use = sum(use.values(), zero.copy())
    waits = sum(want.values(), zero.copy())
    saturated = (waits > 0) & (capacity - in_use < waits)
    plain: list[float] = []
    aware: list[float] = []
    for k in np.nonzero(saturated)[0]:
        burst = [max(0.0, use[t][k] - tree.reservation(t, pool)) for t in tops]
        wanting = [want[t][k] for t in tops]
        weights = [float(tree.team(t).bursting_priority) for t in tops]
        idx = [i for i in range(len(tops)) if burst[i] > 0 or wanting[i] > 0]
        if len(idx) < 2:
            continue
        plain.append(_index([burst[i] / weights[i] for i in idx]))
        fair = water_fill(sum(burst[i] for i in idx), [burst[i] + wanting[i] for i in idx],
                          [weights[i] for i in idx])
        ratios = [burst[i] / fair[j] for j, i in enumerate(idx) if fair[j] > 0]
        if len(ratios) >= 2:
            aware.append(_index(ratios))
        elif ratios:
            aware.append(1.0)
    return {
        "_saturated": saturated,
        "saturated_fraction": float(saturated.mean()) if len(points) else 0.0,
        "samples": int(saturated.sum()),
        "samples_compared": len(plain),
        "jain_weighted": float(np.mean(plain)) if plain else None,
        "jain_demand_aware": float(np.mean(aware)) if aware else None,
    }


def _index(x: Sequence[float]) -> float:
    """Jain's index (sum x)^2 / (n sum x^2); 1 when every x is 0."""
    sq = sum(v * v for v in x)
    return (sum(x) ** 2) / (len(x) * sq) if sq else 1.0


@dataclass(frozen=True, slots=True)
class TopDemand:
    """One top-level team's demand at one instant (milli-GPU), as SPEC 4
    reads it: reserved work in use, and per elastic priority the work in
    use plus the work waiting; its reservation, cap (None: unlimited) and
    bursting priority."""

    reservation: float
    cap: float | None
    weight: float
    reserved: float
    elastic: Mapping[int, float]  # priority -> in use + waiting

    @property
    def usage_cap(self) -> float:
        return float("inf") if self.cap is None else self.cap


def burst_entitlements(capacity: float, teams: Sequence[TopDemand]) -> list[float]:
    """Each top-level team's SPEC 4 burst entitlement (step 4's grant), computed
    here on its own, not by the engine's fairshare code, so the measure can
    catch the engine being wrong.

    Steps 1-2: reserved work in use is granted from the team's reservation;
    what is left of it backs the team's elastic demand, highest priority
    first, within its cap. Step 3: surplus = capacity - those grants.
    Step 4: the rest is bursting demand, served level by level in descending
    workload priority; at each level the surplus left is water-filled by
    bursting priority, nobody above its want (its demand at that level,
    within its cap's headroom)."""
    headroom = [t.usage_cap for t in teams]
    rest: list[dict[int, float]] = []
    granted = 0.0
    for i, t in enumerate(teams):
        grant = min(t.reserved, t.reservation, headroom[i])
        backing = t.reservation - grant
        headroom[i] -= grant
        left: dict[int, float] = {}
        for prio in sorted(t.elastic, reverse=True):
            take = min(t.elastic[prio], backing, headroom[i])
            backing -= take
            headroom[i] -= take
            grant += take
            left[prio] = t.elastic[prio] - take
        rest.append(left)
        granted += grant
    surplus = max(0.0, capacity - granted)
    burst = [0.0] * len(teams)
    for prio in sorted({p for left in rest for p in left}, reverse=True):
        wants = [max(0.0, min(headroom[i], rest[i].get(prio, 0.0))) for i in range(len(teams))]
        share = water_fill(surplus, wants, [t.weight for t in teams])
        for i, got in enumerate(share):
            burst[i] += got
            headroom[i] -= got
        surplus -= sum(share)
    return burst


def jain_of_burst(used: Sequence[float], entitled: Sequence[float]) -> float | None:
    """Jain's index of burst used / burst entitled over the teams entitled to
    some burst; None when fewer than two are."""
    x = [u / e for u, e in zip(used, entitled, strict=True) if e > 1e-9]
    return _index(x) if len(x) >= 2 else None


def _min_at(spans: Sequence[tuple[int, int, int]], points: np.ndarray) -> np.ndarray:
    """The smallest milli among ``spans`` holding at each point (start <= t
    < end); 0 where none holds."""
    out = np.full(len(points), np.inf)
    for a, b, milli in spans:
        i0, i1 = np.searchsorted(points, (a, b), side="left")
        if i1 > i0:
            np.minimum(out[i0:i1], milli, out=out[i0:i1])
    out[np.isinf(out)] = 0.0
    return out


def whole_workload_shares(used: Sequence[float], entitled: Sequence[float],
                          step_up: Sequence[float], step_down: Sequence[float]
                          ) -> list[float]:
    """Each team's burst as ``jain_spec_workloads`` reads it: its entitlement
    when it is less than one of its workloads away from it (below: less than
    its smallest waiting elastic workload, ``step_up``; above: less than its
    smallest running elastic workload, ``step_down``), since no whole
    workload started or taken could bring it closer; else what it uses."""
    out = []
    for u, e, up, down in zip(used, entitled, step_up, step_down, strict=True):
        close = (e - u < up) if u < e else (u - e < down) if u > e else True
        out.append(e if close else u)
    return out


def _jain_spec(tree: OrgTree, pool: str, spans: Sequence[Span],
               waits: Sequence[tuple[str, int, int, int, int]], capacity: int,
               points: np.ndarray, saturated: np.ndarray) -> dict[str, Any]:
    """``jain_spec``: at each saturated instant, each top-level team's burst
    in use against its SPEC 4 burst entitlement from that instant's demand."""
    tops = tree.top_level()
    top_of = {leaf: tree.path(leaf)[-1] for leaf in tree.leaves()}
    idx = np.nonzero(saturated)[0]
    at = points[idx]
    reserved_spans: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    elastic_spans: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for sp in spans:
        top = top_of.get(sp.team)
        if top is None:
            continue
        if sp.reserved:
            reserved_spans[top].append((sp.start, sp.end, sp.milli))
        else:
            elastic_spans[(top, sp.priority)].append((sp.start, sp.end, sp.milli))
    for team, prio, a, b, milli in waits:
        if team in top_of:
            elastic_spans[(top_of[team], prio)].append((a, b, milli))
    used_spans: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for sp in spans:
        if sp.team in top_of:
            used_spans[top_of[sp.team]].append((sp.start, sp.end, sp.milli))
    reserved = {t: _at(reserved_spans[t], at) for t in tops}
    used = {t: _at(used_spans[t], at) for t in tops}
    elastic = {key: _at(v, at) for key, v in elastic_spans.items()}
    # the smallest elastic workload each team runs, and waits with, per instant
    running: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    queued: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for sp in spans:
        if sp.team in top_of and not sp.reserved:
            running[top_of[sp.team]].append((sp.start, sp.end, sp.milli))
    for team, _prio, a, b, milli in waits:
        if team in top_of:
            queued[top_of[team]].append((a, b, milli))
    step_down = {t: _min_at(running[t], at) for t in tops}
    step_up = {t: _min_at(queued[t], at) for t in tops}
    indices: list[float] = []
    whole: list[float] = []
    unentitled: list[float] = []
    for k in range(len(at)):
        demands = []
        for t in tops:
            levels = {prio: float(v[k]) for (top, prio), v in elastic.items()
                      if top == t and v[k] > 0}
            cap = tree.cap(t, pool)
            demands.append(TopDemand(reservation=float(tree.reservation(t, pool)),
                                     cap=None if cap is None else float(cap),
                                     weight=float(tree.team(t).bursting_priority),
                                     reserved=float(reserved[t][k]), elastic=levels))
        entitled = burst_entitlements(float(capacity), demands)
        burst = [max(0.0, float(used[t][k]) - tree.reservation(t, pool)) for t in tops]
        unentitled.append(sum(b for b, e in zip(burst, entitled, strict=True) if e <= 1e-9))
        value = jain_of_burst(burst, entitled)
        if value is not None:
            indices.append(value)
            near = whole_workload_shares(burst, entitled, [float(step_up[t][k]) for t in tops],
                                         [float(step_down[t][k]) for t in tops])
            near_value = jain_of_burst(near, entitled)  # the same teams: never None here
            whole.append(value if near_value is None else near_value)
    return {
        "samples_compared_spec": len(indices),
        "jain_spec": float(np.mean(indices)) if indices else None,
        "jain_spec_workloads": float(np.mean(whole)) if whole else None,
        "jain_spec_workloads_at_least_099": float(np.mean([v >= 0.99 for v in whole]))
        if whole else None,
        "jain_spec_percentiles": {f"p{q}": float(np.percentile(indices, q)) if indices else None
                                  for q in (10, 50, 90)},
        "jain_spec_at_least_099": float(np.mean([v >= 0.99 for v in indices]))
        if indices else None,
        "burst_unentitled_gpus": float(np.mean(unentitled)) / 1000 if unentitled else None,
    }


def _fragmentation(result: SimResult, pool: str, points: np.ndarray, end: int
                   ) -> dict[str, Any]:
    """Unallocated capacity stranded on partly used devices, at each point."""
    events: list[tuple[int, int, tuple[str, int], int]] = []
    for w in result.states.values():
        for a in all_attempts(w):
            if a.started_at is None or a.pool != pool:
                continue
            stop = end if a.ended_at is None else a.ended_at
            for p in a.placement:
                for d in p.devices:
                    if d.milli < 1000:
                        events.append((a.started_at, 1, (p.node, d.index), d.milli))
                        events.append((stop, 0, (p.node, d.index), -d.milli))
    events.sort(key=lambda e: (e[0], e[1]))
    used: dict[tuple[str, int], int] = defaultdict(int)
    stranded = 0
    out = np.zeros(len(points))
    k = 0
    for i, t in enumerate(points):
        while k < len(events) and events[k][0] <= t:
            _t, _o, dev, delta = events[k]
            before = used[dev]
            after = before + delta
            stranded -= (1000 - before) if 0 < before < 1000 else 0
            stranded += (1000 - after) if 0 < after < 1000 else 0
            used[dev] = after
            k += 1
        out[i] = stranded
    edges_idx = np.linspace(0, len(points), BINS + 1).astype(int)
    series = [float(out[a:b].mean() / 1000) if b > a else 0.0
              for a, b in itertools.pairwise(edges_idx)]
    return {"average_gpus": float(out.mean() / 1000) if len(points) else 0.0,
            "max_gpus": float(out.max() / 1000) if len(points) else 0.0,
            "series_gpus": series}


#: Why GPUs were idle at an instant, most telling first: the first of these
#: that holds for some waiting workload names the instant (docs/replay.md,
#: "Idle GPUs"). ``nothing_waits`` when no work waits.
IDLE_REASONS = ("fits", "reserved_outside_buckets", "burst_cap", "gang", "host_resources",
                "fragmented", "too_few_free", "nothing_waits")


def _pods_fitting(w: WorkloadState, nodes: Sequence[Node], devices: Mapping[str, list[int]],
                  host: Mapping[str, list[int]], with_host: bool) -> int:
    """How many of ``w``'s pods fit the free devices (and, ``with_host``, the
    free CPU and memory) of ``nodes`` now, each node filled on its own."""
    spec = w.spec
    count = 0
    for n in nodes:
        if spec.gpu_types and n.gpu_type not in spec.gpu_types:
            continue
        free = devices[n.name]
        if spec.request.is_whole:
            k = sum(1 for d in free if d >= 1000) // spec.request.value
        else:
            m = spec.request.charge(n.gpu_memory_mib)
            k = sum(d // m for d in free)
        if with_host:
            cpu_used, mem_used = host[n.name]
            if spec.cpu_milli and n.cpu_milli is not None:
                k = min(k, max(0, n.cpu_milli - cpu_used) // spec.cpu_milli)
            if spec.memory_mib and n.memory_mib is not None:
                k = min(k, max(0, n.memory_mib - mem_used) // spec.memory_mib)
        count += k
    return count


def _physical(w: WorkloadState, nodes: Sequence[Node], devices: Mapping[str, list[int]],
              host: Mapping[str, list[int]]) -> str:
    """Could ``w`` start on the free capacity now, rules aside? (SPEC 7's
    HOST_RESOURCES, FRAGMENTED, GANG_WAITING, else too few GPUs free.)"""
    fit = _pods_fitting(w, nodes, devices, host, with_host=True)
    if fit >= w.spec.min_pods:
        return "fits"
    if fit >= 1:
        return "gang"
    if _pods_fitting(w, nodes, devices, host, with_host=False) >= 1:
        return "host_resources"
    typed = sum(sum(devices[n.name]) for n in nodes
                if not w.spec.gpu_types or n.gpu_type in w.spec.gpu_types)
    return "fragmented" if typed >= size_of(w) // max(1, w.spec.min_pods) else "too_few_free"


def _rule(w: WorkloadState, tree: OrgTree, pool: str, reserved: Mapping[str, int],
          usage: Mapping[str, int]) -> str:
    """The SPEC rule (section 2, as the policy's org view has it) that keeps
    ``w`` out of free capacity it fits, or ``fits`` when none does."""
    leaf = w.spec.team
    if leaf not in tree.teams:
        return "fits"
    if w.spec.is_reserved:
        return "fits" if _fits_buckets(tree, pool, reserved, leaf, size_of(w)) \
            else "reserved_outside_buckets"
    for team in tree.path(leaf):
        cap = tree.cap(team, pool)
        if cap is None:
            continue
        mine = sum(usage.get(x, 0) for x in tree.leaves() if team in tree.path(x))
        if mine + size_of(w) > cap:
            return "burst_cap"
    return "fits"


def _idle(result: SimResult, states: Sequence[WorkloadState], pool: str,
          points: np.ndarray, end: int) -> dict[str, Any]:
    """GPUs idle while work waits, at each point, split by why the waiting
    work did not use them (IDLE_REASONS; docs/replay.md, "Idle GPUs")."""
    tree = result.scenario.tree
    nodes = [n for n in result.nodes if n.pool == pool and n.state is NodeState.READY]
    devices = {n.name: [1000] * n.gpus for n in nodes}
    host = {n.name: [0, 0] for n in nodes}
    # (time, order, kind, payload): ends (0) before starts (1) at one time
    events: list[tuple[int, int, int, Any]] = []
    for w in states:
        for a in all_attempts(w):
            if a.started_at is None or not a.placement or a.pool not in (pool, None):
                continue
            stop = end if a.ended_at is None else a.ended_at
            events.append((a.started_at, 1, 0, (w, a.placement, 1)))
            events.append((stop, 0, 0, (w, a.placement, -1)))
        if not runnable(w, nodes):
            continue
        for a, b in _waits(w, end):
            events.append((a, 1, 1, (w, 1)))
            events.append((b, 0, 1, (w, -1)))
    events.sort(key=lambda e: (e[0], e[1]))
    waiting: dict[int, WorkloadState] = {}
    reserved: dict[str, int] = defaultdict(int)
    usage: dict[str, int] = defaultdict(int)
    idle_by = dict.fromkeys(IDLE_REASONS, 0.0)
    instants = dict.fromkeys(IDLE_REASONS, 0)
    examples: list[dict[str, Any]] = []
    k = 0
    # (idle, reason, the waiting work that fits) of the last point; reused
    # while no event falls between points (a long quiet stretch, or a list
    # without times, whose whole replay is one state)
    last: tuple[int, str, list[WorkloadState]] | None = None
    for t in points:
        if last is not None and not (k < len(events) and events[k][0] <= t):
            idle, reason, fit_before = last
            if idle > 0:
                _examples(examples, t, fit_before, idle)
                idle_by[reason] += idle
                instants[reason] += 1
            continue
        while k < len(events) and events[k][0] <= t:
            _t, _o, kind, payload = events[k]
            k += 1
            if kind == 1:
                w, sign = payload
                if sign > 0:
                    waiting[w.id] = w
                else:
                    waiting.pop(w.id, None)
                continue
            w, placement, sign = payload
            for p in placement:
                if p.node not in devices:
                    continue
                for d in p.devices:
                    devices[p.node][d.index] -= sign * d.milli
                host[p.node][0] += sign * w.spec.cpu_milli
                host[p.node][1] += sign * w.spec.memory_mib
            milli = sum(p.milli for p in placement)
            usage[w.spec.team] += sign * milli
            if w.spec.is_reserved:
                reserved[w.spec.team] += sign * milli
        idle = sum(sum(free) for free in devices.values())
        fitting: list[WorkloadState] = []
        reason = "nothing_waits"
        if idle > 0 and waiting:
            seen: dict[tuple[Any, ...], str] = {}
            found: set[str] = set()
            for w in waiting.values():
                shape = (w.spec.request, w.spec.min_pods, w.spec.gpu_types, w.spec.cpu_milli,
                         w.spec.memory_mib)
                if shape not in seen:
                    seen[shape] = _physical(w, nodes, devices, host)
                why = seen[shape]
                if why == "fits":
                    why = _rule(w, tree, pool, reserved, usage)
                    if why == "fits":
                        fitting.append(w)
                found.add(why)
            reason = next(r for r in IDLE_REASONS if r in found)
        last = (idle, reason, fitting)
        if idle <= 0:
            continue
        _examples(examples, t, fitting, idle)
        idle_by[reason] += idle
        instants[reason] += 1
    n = max(1, len(points))
    return {"average_gpus": sum(idle_by.values()) / n / 1000,
            "by_reason_gpus": {r: v / n / 1000 for r, v in idle_by.items()},
            "instants": instants, "fits_examples": examples}


def _examples(examples: list[dict[str, Any]], t: Any, fitting: Sequence[WorkloadState],
              idle: int) -> None:
    """Add (instant, workload) of waiting work that fit, up to 20 in all."""
    for w in fitting[:max(0, 20 - len(examples))]:
        examples.append({"at": int(t), "workload": w.name, "team": w.spec.team,
                         "class": w.spec.wclass.value, "priority": w.spec.priority,
                         "gpus": size_of(w) / 1000, "idle_gpus": idle / 1000})


def _work_balance(states: Sequence[WorkloadState], capacity: int, start: int, end: int
                  ) -> dict[str, Any]:
    """Where each policy's allocated GPU-hours come from (GPU-hours):
    allocated = offered - deferred_by_wait - deferred_by_restart + preempted_runs.

    offered: each workload's GPUs x its duration if started at submission,
    cut at the window's end; deferred_by_wait: what its first start's delay
    pushed past the end (all of it if it never started); deferred_by_restart:
    what the restart after preemption pushed past the end; preempted_runs:
    the GPU-time of preempted attempts (work done and thrown away)."""
    offered = done = by_wait = by_restart = thrown = 0.0
    for w in states:
        if w.submitted_at >= end:
            continue
        runs = [a for a in all_attempts(w) if a.started_at is not None and a.placement]
        milli = sum(p.milli for p in runs[-1].placement) if runs else size_of(w)
        duration = w.spec.duration

        def run(at: int, milli: int = milli, duration: int | None = duration) -> float:
            stop = end if duration is None else min(at + duration, end)
            return float(milli * max(0, stop - max(at, start)))

        offered += run(w.submitted_at)
        if not runs:
            by_wait += run(w.submitted_at)
            continue
        first = runs[0].started_at
        assert first is not None
        by_wait += run(w.submitted_at) - run(first)
        last = runs[-1]
        final = 0.0 if last.status is Status.PREEMPTED or last.started_at is None \
            else run(last.started_at)
        by_restart += run(first) - final
        done += final
        for a in runs:
            if a.status is Status.PREEMPTED and a.started_at is not None:
                stop = end if a.ended_at is None else min(a.ended_at, end)
                thrown += sum(p.milli for p in a.placement) * max(0, stop - max(a.started_at,
                                                                                start))
    hours = 1000 * 3600
    span = capacity * max(1, end - start)
    return {"offered_gpu_h": offered / hours, "deferred_by_wait_gpu_h": by_wait / hours,
            "deferred_by_restart_gpu_h": by_restart / hours,
            "preempted_runs_gpu_h": thrown / hours, "done_gpu_h": done / hours,
            "allocated_gpu_h": (done + thrown) / hours,
            "useful_utilization": done / span if capacity else 0.0}


def _reserved_starts(states: Sequence[WorkloadState], team_by_name: Mapping[str, str],
                     tree: OrgTree, pool: str, end: int, nodes: Sequence[Node]
                     ) -> dict[str, Any]:
    """Reserved work whose reservation had room when submitted (SPEC 2's
    buckets, in the org as written, with the reserved work running just
    before): how much of it started at that same instant. Work no node
    could ever hold (``runnable``) is not counted: no reservation makes room
    for it (SPEC 7's NO_ELIGIBLE_POOL)."""
    reserved = [w for w in states if w.spec.is_reserved and w.submitted_at < end]
    never = {w.id for w in reserved if not runnable(w, nodes)}
    events: list[tuple[int, int, str, int]] = []  # (time, order, leaf, delta)
    for w in reserved:
        leaf = team_by_name.get(w.name, w.team)
        for a in all_attempts(w):
            if a.started_at is not None and a.placement:
                milli = sum(p.milli for p in a.placement)
                events.append((a.started_at, 1, leaf, milli))
                if a.ended_at is not None:
                    events.append((a.ended_at, 0, leaf, -milli))
    events.sort(key=lambda e: (e[0], e[1]))
    usage: dict[str, int] = defaultdict(int)
    k = 0
    with_room = started = 0
    late: list[float] = []
    for w in sorted(reserved, key=lambda w: (w.submitted_at, w.id)):
        while k < len(events) and (events[k][0] < w.submitted_at or (
                events[k][0] == w.submitted_at and events[k][1] == 0)):
            usage[events[k][2]] += events[k][3]
            k += 1
        leaf = team_by_name.get(w.name, w.team)
        if w.id in never or leaf not in tree.teams or not _fits_buckets(
                tree, pool, usage, leaf, size_of(w)):
            continue
        with_room += 1
        first = _first_start(w)
        if first == w.submitted_at:
            started += 1
        else:
            late.append(float((end if first is None else first) - w.submitted_at))
    return {"with_room": with_room, "started_at_once": started,
            "fraction": started / with_room if with_room else None,
            "late_delay_s": percentiles(late)}


def _fits_buckets(tree: OrgTree, pool: str, usage: Mapping[str, int], leaf: str,
                  extra: int) -> bool:
    """SPEC 2: overflow out of the leaf's top-level team stays 0 with
    ``extra`` reserved milli added to ``leaf``."""

    def overflow(team: str) -> int:
        if tree.is_leaf(team):
            mine = usage.get(team, 0) + (extra if team == leaf else 0)
            return max(0, mine - tree.bucket(team, pool))
        return max(0, sum(overflow(c) for c in tree.children(team)) - tree.bucket(team, pool))

    return overflow(tree.path(leaf)[-1]) == 0
