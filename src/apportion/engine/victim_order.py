"""The greedy pass of SPEC 6.5: candidates cheapest first, re-ordered as
excess changes, skipping those that fail 6.4 at that moment.

Candidates are grouped by (state, team): within a group the order never
changes (priority, most recently started, id), so only group heads compete,
in a heap. After a pick only the picked team's excess moved, so only its
groups are re-queued. A team whose ``excess(c_V)`` is no longer positive can
never pass again during this search (the greedy only removes work, so that
excess only falls) and is dropped for good.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Callable, Iterable
from fractions import Fraction

from apportion.domain.lifecycle import WorkloadState


class Verdict(enum.Enum):
    PASS = 0
    FAIL_NOW = 1  # may pass after later picks
    FAIL_FOREVER = 2  # cannot pass again in this search


Entry = tuple[int, int, int, Fraction, int, int, int, str, int]


class VictimQueue:
    """Yields victims one pick at a time (see module docstring)."""

    def __init__(
        self,
        candidates: Iterable[WorkloadState],
        rank: Callable[[WorkloadState], int],
        excess: Callable[[str], Fraction],
        test: Callable[[WorkloadState], Verdict],
    ) -> None:
        self._rank, self._excess, self._test = rank, excess, test
        self._groups: dict[tuple[int, str], list[WorkloadState]] = {}
        for v in candidates:
            self._groups.setdefault((rank(v), v.team), []).append(v)
        self._team_groups: dict[str, list[tuple[int, str]]] = {}
        for key, queue in self._groups.items():
            # Popped from the end, so the cheapest sits last.
            queue.sort(key=lambda v: (v.spec.priority, -(v.started_at or 0), v.id), reverse=True)
            self._team_groups.setdefault(key[1], []).append(key)
        self._version: dict[str, int] = {}
        self._dead: set[str] = set()
        self._heap: list[Entry] = []
        self.examined = 0
        for team in sorted(self._team_groups):
            self._push_team(team)

    def _push_team(self, team: str) -> None:
        version = self._version.get(team, 0) + 1
        self._version[team] = version
        ex = self._excess(team)
        flag = 0 if ex > 0 else 1
        for key in self._team_groups[team]:
            queue = self._groups[key]
            if queue:
                v = queue[-1]
                heapq.heappush(self._heap, (
                    key[0], flag, v.spec.priority, -ex, -(v.started_at or 0), v.id,
                    key[0], team, version,
                ))

    def pick(self) -> WorkloadState | None:
        """The first candidate, in order, that passes now; None if none does."""
        stash: list[Entry] = []
        found: WorkloadState | None = None
        while self._heap:
            entry = heapq.heappop(self._heap)
            rank, team, version = entry[6], entry[7], entry[8]
            if version != self._version[team] or team in self._dead:
                continue
            queue = self._groups[(rank, team)]
            self.examined += 1
            verdict = self._test(queue[-1])
            if verdict is Verdict.PASS:
                found = queue.pop()
                break
            if verdict is Verdict.FAIL_FOREVER:
                self._dead.add(team)
                continue
            stash.append(entry)
        for entry in stash:
            heapq.heappush(self._heap, entry)
        if found is not None:
            self._push_team(found.team)
        return found
