"""Who could be a victim, kept sorted as the cycle goes, and the greedy order
of SPEC 6.5 over it.

:class:`VictimIndex` holds, per pool, the elastic Starting/Running work and the
nominations and holds, grouped by (state rank, leaf team), each group sorted
cheapest first: lowest priority, least work lost, most recently started, id.
It changes only when the cycle commits a decision (and work lost is re-read
when a search first runs at a new time), never during a search, so a search reads it
with cursors and copies nothing.

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
from collections.abc import Callable, Iterable, Mapping

from apportion.domain.lifecycle import WorkloadState

NOMINATION, STARTING, RUNNING = 0, 1, 2

GroupKey = tuple[int, str]
#: (priority, work lost, -started_at, id): cheapest first (SPEC 6.5). Work lost
#: is milli x (now - running_at) for Running work, 0 otherwise.
Item = tuple[int, int, int, int]


class VictimIndex:
    """Candidate victims of one pool, by (rank, team), sorted cheapest first.

    With topology ``levels`` it also keeps one sub-index per domain (a workload
    with pods in two racks is in both), so a per-domain search reads only the
    domain's candidates.
    """

    __slots__ = (
        "_labels", "_running_at", "domains", "groups", "levels", "max_milli", "milli", "now",
        "team_keys", "where",
    )

    def __init__(
        self, levels: tuple[str, ...] = (), node_labels: Mapping[str, Mapping[str, str]] = {},
        now: int = 0,
    ) -> None:
        self.groups: dict[GroupKey, list[Item]] = {}
        self.where: dict[int, tuple[GroupKey, Item, tuple[tuple[str, str], ...]]] = {}
        self.milli: dict[int, int] = {}
        #: At least the largest ``milli`` ever indexed (an upper bound for searches).
        self.max_milli = 0
        self.levels = levels
        self._labels = node_labels
        self.domains: dict[tuple[str, str], VictimIndex] = {}
        #: Per team, the keys of its non-empty groups in rank order.
        self.team_keys: dict[str, list[GroupKey]] = {}
        #: The time work lost is read at (see :meth:`set_now`).
        self.now = now
        #: running_at of the indexed Running work, by id.
        self._running_at: dict[int, int] = {}

    def _group_on(self, key: GroupKey) -> None:
        """``key``'s group just became non-empty."""
        keys = self.team_keys.setdefault(key[1], [])
        bisect.insort(keys, key)

    def _group_off(self, key: GroupKey) -> None:
        """``key``'s group just became empty."""
        keys = self.team_keys[key[1]]
        keys.remove(key)
        if not keys:
            del self.team_keys[key[1]]

    def add(self, w: WorkloadState, rank: int, milli: int) -> None:
        """Index ``w`` (replacing any earlier entry) with the milli it would free."""
        self.discard(w.id)
        key = (rank, w.team)
        item = self._item(w, rank, milli)
        group = self.groups.setdefault(key, [])
        bisect.insort(group, item)
        if len(group) == 1:
            self._group_on(key)
        for dom in self._record(w, key, item, milli):
            self._sub(dom).add(w, rank, milli)

    def add_many(self, entries: Iterable[tuple[WorkloadState, int, int]]) -> None:
        """:meth:`add` for many (workload, rank, milli) at once, for workloads
        not indexed yet: each group is sorted once instead of per insert."""
        touched: set[GroupKey] = set()
        by_domain: dict[tuple[str, str], list[tuple[WorkloadState, int, int]]] = {}
        for w, rank, milli in entries:
            if w.id in self.where:
                raise ValueError(f"workload {w.id} is indexed already")
            key = (rank, w.team)
            item = self._item(w, rank, milli)
            group = self.groups.setdefault(key, [])
            if not group:
                self._group_on(key)
            group.append(item)
            touched.add(key)
            for dom in self._record(w, key, item, milli):
                by_domain.setdefault(dom, []).append((w, rank, milli))
        for key in touched:
            self.groups[key].sort()
        for dom, items in by_domain.items():
            self._sub(dom).add_many(items)

    def _item(self, w: WorkloadState, rank: int, milli: int) -> Item:
        """``w``'s place in its group; remembers running_at for :meth:`set_now`."""
        lost = 0
        if rank == RUNNING and w.running_at is not None:
            self._running_at[w.id] = w.running_at
            lost = milli * max(0, self.now - w.running_at)
        return (w.spec.priority, lost, -(w.started_at or 0), w.id)

    def set_now(self, now: int) -> None:
        """Read work lost at ``now``: Running items are re-keyed and their
        groups re-sorted (the order between two of them can change with
        time when their sizes differ). Done when a search first needs it in
        a cycle, so a kept index costs nothing in cycles without searches."""
        if now == self.now:
            return
        self.now = now
        for key, group in self.groups.items():
            if key[0] != RUNNING:
                continue
            for i, (prio, _lost, started, wid) in enumerate(group):
                at = self._running_at.get(wid)
                lost = self.milli[wid] * max(0, now - at) if at is not None else 0
                item = (prio, lost, started, wid)
                group[i] = item
                old = self.where[wid]
                self.where[wid] = (old[0], item, old[2])
            group.sort()
        for sub in self.domains.values():
            sub.set_now(now)

    def _record(
        self, w: WorkloadState, key: GroupKey, item: Item, milli: int
    ) -> tuple[tuple[str, str], ...]:
        """Remember where ``w`` is indexed and what it frees; returns its domains."""
        doms = self._domains_of(w)
        self.where[w.id] = (key, item, doms)
        self.milli[w.id] = milli
        self.max_milli = max(self.max_milli, milli)
        return doms

    def _sub(self, dom: tuple[str, str]) -> VictimIndex:
        """The sub-index of ``dom``, made when first needed."""
        sub = self.domains.get(dom)
        if sub is None:
            sub = self.domains[dom] = VictimIndex(now=self.now)
        return sub

    def _domains_of(self, w: WorkloadState) -> tuple[tuple[str, str], ...]:
        if not self.levels:
            return ()
        pods = w.placement if w.status.is_placed else w.nomination
        found = set()
        for pod in pods:
            labels = self._labels.get(pod.node, {})
            for level in self.levels:
                value = labels.get(level)
                if value is not None:
                    found.add((level, value))
        return tuple(sorted(found))

    def discard(self, wid: int) -> None:
        got = self.where.pop(wid, None)
        if got is None:
            return
        key, item, doms = got
        group = self.groups[key]
        del group[bisect.bisect_left(group, item)]
        if not group:
            self._group_off(key)
        del self.milli[wid]
        self._running_at.pop(wid, None)
        for dom in doms:
            self.domains[dom].discard(wid)

    def domain(self, dom: tuple[str, str]) -> VictimIndex | None:
        """The sub-index of one domain; None if ``dom``'s level is not indexed."""
        if dom[0] not in self.levels:
            return None
        return self.domains.get(dom) or VictimIndex(now=self.now)

    def teams(self) -> list[str]:
        return sorted(self.team_keys)


class Verdict(enum.Enum):
    PASS = 0
    FAIL_NOW = 1  # may pass after later picks
    FAIL_FOREVER = 2  # cannot pass again in this search


Entry = tuple[int, int, int, int, int, int, int, int, str, int]


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
        lookup: Callable[[int], WorkloadState],
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
        self._blocked: dict[str, list[tuple[int, Entry]]] = {}
        self._pos: dict[GroupKey, int] = {}  # cursor per group (0 if absent)
        self._default: tuple[bool, int | None] = (trusted, None)
        self._rule: dict[GroupKey, tuple[bool, int | None]] = {}  # special groups
        self._team_keys: dict[str, list[GroupKey]] = {}
        self._version: dict[str, int] = {}  # 1 if absent
        self._last: WorkloadState | None = None  # re-queued at the next pick
        self._dead: set[str] = set()
        self._heap: list[Entry] = []
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
            if self._eligible(self._lookup(item[3])):
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
        stash: list[Entry] = []
        found: WorkloadState | None = None
        while self._heap:
            entry = heapq.heappop(self._heap)
            rank, team, version = entry[7], entry[8], entry[9]
            if version != self._version.get(team, 1) or team in self._dead:
                continue
            key = (rank, team)
            pos = self._pos.get(key, 0)
            v = self._lookup(self._index.groups[key][pos][3])
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
