"""The order of waiting workloads in a pool (SPEC 6 step 2, revision 3).

Reserved before elastic; priority descending; the team's share deficit
**after admitting W** (entitlement - usage - W's size) descending, read at
the moment the workload is considered; submission time; id. Deficits move as
the cycle admits and preempts, so the queue re-reads a team's deficit
whenever it is told the team's usage changed.

Within one team and level the deficit is common, so the team's own work is
in (size, submission time, id) order, its smallest first, and the team
competes with the deficit after admitting that one: the same order as
sorting every workload by its own key, without re-keying a team's whole
queue when its deficit moves (docs/scheduling.md, "Order").
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction

from apportion.domain.lifecycle import WorkloadState


def static_key(w: WorkloadState) -> tuple[int, int]:
    """(class, -priority): the part of the order that never changes."""
    return (0 if w.spec.is_reserved else 1, -w.spec.priority)


def routing_key(w: WorkloadState) -> tuple[int, int, int, int]:
    """Order for Pending workloads (no pool yet, so no deficit): class, priority, time, id."""
    return (*static_key(w), w.submitted_at, w.id)


class WaitingQueue:
    """Yields waiting workloads in step 2's order, with live deficits.

    ``deficit(team)`` is called whenever a team's entry is (re)queued and
    ``size(w)`` gives W's size on the same scale (both exact). After the
    caller changes usage, it calls :meth:`touch` with the teams affected.
    """

    def __init__(
        self, workloads: Iterable[WorkloadState], deficit: Callable[[str], Fraction | int],
        size: Callable[[WorkloadState], Fraction | int],
    ) -> None:
        self._deficit = deficit
        self._size: dict[int, Fraction | int] = {}
        levels: dict[tuple[int, int], dict[str, list[WorkloadState]]] = {}
        for w in workloads:
            self._size[w.id] = size(w)
            levels.setdefault(static_key(w), {}).setdefault(w.team, []).append(w)
        self._levels = []
        for key in sorted(levels):
            teams = levels[key]
            for queue in teams.values():  # popped from the end: oldest first
                queue.sort(key=lambda w: (self._size[w.id], w.submitted_at, w.id), reverse=True)
            self._levels.append(teams)
        self._teams: dict[str, list[WorkloadState]] = {}
        self._heap: list[tuple[Fraction | int, int, int, str, int]] = []
        self._version: dict[str, int] = {}

    def _push(self, team: str) -> None:
        queue = self._teams.get(team)
        if not queue:
            return
        version = self._version.get(team, 0) + 1
        self._version[team] = version
        head = queue[-1]
        after = self._deficit(team) - self._size[head.id]
        heapq.heappush(self._heap, (-after, head.submitted_at, head.id, team, version))
    def touch(self, teams: Iterable[str]) -> None:
        """Re-read the deficits of ``teams`` (their usage changed)."""
        for team in teams:
            if team in self._teams:
                self._push(team)

    def __iter__(self) -> Iterator[WorkloadState]:
        for teams in self._levels:
            self._teams = teams
            self._heap = []
            for team in sorted(teams):
                self._push(team)
            while self._heap:
                _d, _t, _id, team, version = heapq.heappop(self._heap)
                if version != self._version.get(team):
                    continue
                w = self._teams[team].pop()
                yield w
                self._push(team)
