"""The greedy order of SPEC 6.5 over a :class:`VictimIndex` (index.py).

:class:`VictimQueue` yields, one pick at a time, the first candidate in 6.5's
order that passes 6.4 right now. Only group heads compete, in a heap. After a
pick only the picked team's excess moved, so only its groups are re-queued. A
team whose ``excess(c_V)`` is no longer positive can never pass again during
the search (the greedy only removes work, so that excess only falls) and is
dropped for good.
"""

from __future__ import annotations

import bisect
import enum
import heapq
from collections.abc import Callable, Iterable

from apportion.domain.lifecycle import WorkloadState
from apportion.engine.preemption.index import (
    NOMINATION,
    RUNNING,
    STARTING,
    GroupKey,
    Item,
    PodVictim,
    VictimIndex,
)

__all__ = [
    "NOMINATION", "RUNNING", "STARTING", "GroupKey", "Item", "PodVictim", "Verdict",
    "VictimIndex", "VictimQueue",
]


class Verdict(enum.Enum):
    PASS = 0
    FAIL_NOW = 1  # may pass after later picks
    FAIL_FOREVER = 2  # cannot pass again in this search


_Entry = tuple[int, int, int, int, int, int, int, int, str, int]


class VictimQueue:
    """The greedy's order over an index, restricted to ``teams``.

    ``eligible`` filters single candidates (static rules, domain); ``test``
    is 6.4's dynamic test; ``excess`` reads a leaf team's excess now (any
    exact, order-preserving form, e.g. scaled to integers).

    Groups of nominations and of the team ``own`` get their rule from
    ``rule(key)``: (every candidate eligible?, priority bound or None), where
    the bound is a priority from which on no candidate of the group is
    eligible (groups are sorted by priority, so the scan stops there). Every
    other group has the rule (``trusted``, None): with ``trusted`` its
    candidates need no per-item check.

    A candidate that fails "for now" can be parked: ``block(v)`` gives a key
    and a threshold, and the candidate comes back once a pick lists the key
    in ``woken(picked)`` and ``level(key)`` is then below the threshold (6.4:
    the test passes once excess(c_W) falls below excess(c_V)). Without
    ``block`` it is tried again after every pick.
    """

    def __init__(
        self,
        index: VictimIndex,
        teams: Iterable[str],
        lookup: Callable[[Item], WorkloadState],
        eligible: Callable[[WorkloadState], bool],
        excess: Callable[[str], int],
        test: Callable[[WorkloadState], Verdict],
        *,
        own: str | None = None,
        rule: Callable[[GroupKey], tuple[bool, int | None]] | None = None,
        trusted: bool = False,
        block: Callable[[WorkloadState], tuple[str, int]] | None = None,
        woken: Callable[[WorkloadState], Iterable[str]] | None = None,
        level: Callable[[str], int] | None = None,
    ) -> None:
        self._index, self._lookup, self._eligible = index, lookup, eligible
        self._excess, self._test = excess, test
        self._block, self._woken, self._level = block, woken, level
        #: key -> heap of (-threshold, entry): the highest threshold wakes first.
        self._blocked: dict[str, list[tuple[int, _Entry]]] = {}
        self._pos: dict[GroupKey, int] = {}  # cursor per group (0 if absent)
        self._default: tuple[bool, int | None] = (trusted, None)
        self._rule: dict[GroupKey, tuple[bool, int | None]] = {}  # special groups
        self._team_keys: dict[str, list[GroupKey]] = {}
        self._version: dict[str, int] = {}  # 1 if absent
        self._last: WorkloadState | None = None  # re-queued at the next pick
        self._dead: set[str] = set()
        self._heap: list[_Entry] = []
        self.examined = 0
        # The first fill: entries appended, then one heapify (O(n)). The order
        # of teams does not matter: heap entries are unique.
        team_keys, groups, heap = index.team_keys, index.groups, self._heap
        for team in dict.fromkeys(teams):
            keys = team_keys.get(team)
            if not keys:
                continue
            self._team_keys[team] = keys  # the index does not change during a search
            ex = excess(team)
            flag = 0 if ex > 0 else 1
            for key in keys:
                rank = key[0]
                if rank == NOMINATION or team == own:
                    self._rule[key] = rule(key) if rule is not None else (False, None)
                    item = self._head(key)
                elif trusted:
                    item = groups[key][0]
                else:
                    item = self._head(key)
                if item is not None:
                    heap.append(
                        (rank, flag, item[0], -ex, item[1], item[2], item[3], rank, team, 1)
                    )
        heapq.heapify(heap)

    def _head(self, key: GroupKey) -> Item | None:
        """The first eligible candidate of a group at its cursor (advancing it)."""
        items = self._index.groups[key]
        pos = self._pos.get(key, 0)
        is_trusted, limit = self._rule.get(key, self._default)
        end = len(items)
        if limit is not None:
            end = bisect.bisect_left(items, (limit,), pos)
        if is_trusted:
            return items[pos] if pos < end else None
        while pos < end:
            item = items[pos]
            if self._eligible(self._lookup(item)):
                self._pos[key] = pos
                return item
            pos += 1
            self.examined += 1
        self._pos[key] = len(items)
        return None

    def _push_team(self, team: str) -> None:
        version = self._version.get(team, 1) + 1
        self._version[team] = version
        ex = self._excess(team)
        flag = 0 if ex > 0 else 1
        for key in self._team_keys[team]:
            item = self._head(key)
            if item is not None:
                rank = key[0]
                heapq.heappush(
                    self._heap,
                    (rank, flag, item[0], -ex, item[1], item[2], item[3], rank, team, version),
                )

    def rescan(self, team: str) -> None:
        """Look at ``team``'s candidates from the start again at the next pick
        (``eligible`` now admits some that it skipped before)."""
        for key in self._team_keys.get(team, ()):
            self._pos[key] = 0
        if self._last is None or self._last.team != team:
            self._push_team(team)

    def pick(self) -> WorkloadState | None:
        """The first candidate, in order, that passes now; None if none does.

        The caller takes the pick out of the working state before it asks for
        the next one: the picked team is re-queued (and parked candidates
        woken) then, with the excess as it is after the removal (SPEC 6.5:
        "excess is recomputed after each pick")."""
        last, self._last = self._last, None
        if last is not None:
            self._push_team(last.team)
            if self._blocked and self._woken is not None and self._level is not None:
                for wake in self._woken(last):
                    parked = self._blocked.get(wake)
                    if parked:
                        now = self._level(wake)
                        while parked and -parked[0][0] > now:
                            heapq.heappush(self._heap, heapq.heappop(parked)[1])
        stash: list[_Entry] = []
        found: WorkloadState | None = None
        while self._heap:
            entry = heapq.heappop(self._heap)
            rank, team, version = entry[7], entry[8], entry[9]
            if version != self._version.get(team, 1) or team in self._dead:
                continue
            key = (rank, team)
            pos = self._pos.get(key, 0)
            v = self._lookup(self._index.groups[key][pos])
            self.examined += 1
            verdict = self._test(v)
            if verdict is Verdict.PASS:
                self._pos[key] = pos + 1
                found = v
                break
            if verdict is Verdict.FAIL_FOREVER:
                self._dead.add(team)
                continue
            if self._block is None:
                stash.append(entry)
            else:
                key_, threshold = self._block(v)
                heapq.heappush(self._blocked.setdefault(key_, []), (-threshold, entry))
        for entry in stash:
            heapq.heappush(self._heap, entry)
        self._last = found
        return found
