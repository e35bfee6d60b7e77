"""Who could be a victim (SPEC 6.5), kept sorted as the cycle goes.

:class:`VictimIndex` holds, per pool, the elastic Starting/Running work and the
nominations and holds, grouped by (state rank, leaf team), each group sorted
cheapest first: lowest priority, least work lost, most recently started, id.
It changes only when the cycle commits a decision (and work lost is re-read
when a search first runs at a new time), never during a search, so a search
reads it with cursors and copies nothing.

**Shrink before kill.** A Running elastic workload with ``min_pods < pods``
that runs more than ``min_pods`` pods is a candidate pod by pod, newest pod
(highest index) first, down to ``min_pods``; only then is the whole workload a
candidate. Each such pod has an item of its own (part ``-i`` for pod ``i``),
before the workload's whole item (part 0) in its group: a pod loses
``charge x t``, the whole ``min_pods x charge x t``, and ties go to the pod.
A candidate is the workload's state (part 0) or a :class:`PodVictim` (its
state with that one pod placed), see :func:`candidate`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

from apportion.domain.lifecycle import WorkloadState

NOMINATION, STARTING, RUNNING = 0, 1, 2

GroupKey = tuple[int, str]
#: (priority, work lost, -started_at, id, part): cheapest first (SPEC 6.5).
#: Work lost is milli x (now - running_at) for Running work, 0 otherwise;
#: part 0 is the whole workload, -i its pod i (a shrink).
Item = tuple[int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class PodVictim(WorkloadState):
    """Pod ``pod`` of a Running elastically scaled workload as a shrink
    candidate: the workload's state with only that pod in ``placement``."""

    pod: int = 0


_FIELDS = tuple(f.name for f in fields(WorkloadState))


def pod_victim(w: WorkloadState, pod: int) -> PodVictim:
    values = {name: getattr(w, name) for name in _FIELDS}
    values["placement"] = (w.placement[pod],)
    return PodVictim(**values, pod=pod)


def split_pods(w: WorkloadState) -> range:
    """The pods of placed ``w`` held apart from its first ``min_pods`` (each its
    own owner in the device book, so a shrink can take it): empty unless the
    workload scales elastically (``min_pods < pods``)."""
    spec = w.spec
    if spec.min_pods >= spec.pods or not w.status.is_placed:
        return range(0)
    return range(spec.min_pods, len(w.placement))


def shrinkable(w: WorkloadState, rank: int) -> range:
    """The pods a shrink may take from ``w``: its pods beyond ``min_pods``
    while it is Running (Starting work is taken whole)."""
    return split_pods(w) if rank == RUNNING else range(0)


def candidate(lookup: Mapping[int, WorkloadState], item: Item) -> WorkloadState:
    """The candidate an item stands for (a fresh :class:`PodVictim` for a pod)."""
    w = lookup[item[3]]
    return w if not item[4] else pod_victim(w, -item[4])


def candidate_key(v: WorkloadState) -> tuple[int, int]:
    """A candidate's key: (id, 0) for a whole workload, (id, pod + 1) for a pod."""
    return (v.id, v.pod + 1) if isinstance(v, PodVictim) else (v.id, 0)


class VictimIndex:
    """Candidate victims of one pool, by (rank, team), sorted cheapest first.

    With topology ``levels`` it also keeps one sub-index per domain (a workload
    with pods in two racks is in both, pod items included), so a per-domain
    search reads only the domain's candidates.
    """

    __slots__ = (
        "_labels", "_lost_milli", "_running_at", "domains", "groups", "levels", "max_milli",
        "milli", "now", "pod_milli", "team_keys", "where",
    )

    def __init__(
        self, levels: tuple[str, ...] = (), node_labels: Mapping[str, Mapping[str, str]] = {},
        now: int = 0,
    ) -> None:
        self.groups: dict[GroupKey, list[Item]] = {}
        self.where: dict[int, tuple[GroupKey, tuple[Item, ...], tuple[tuple[str, str], ...]]] = {}
        #: What taking the whole workload frees (all its pods), by id.
        self.milli: dict[int, int] = {}
        #: What one pod frees, for workloads with shrink candidates.
        self.pod_milli: dict[int, int] = {}
        #: At least the largest ``milli`` ever indexed (an upper bound for searches).
        self.max_milli = 0
        self.levels = levels
        self._labels = node_labels
        self.domains: dict[tuple[str, str], VictimIndex] = {}
        #: Per team, the keys of its non-empty groups in rank order.
        self.team_keys: dict[str, list[GroupKey]] = {}
        #: The time work lost is read at (see :meth:`set_now`).
        self.now = now
        #: running_at of the indexed Running work, and the milli its whole and
        #: pod items lose per second, by id.
        self._running_at: dict[int, int] = {}
        self._lost_milli: dict[int, tuple[int, int]] = {}

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
        items = self._items(w, rank, milli)
        group = self.groups.setdefault(key, [])
        was_empty = not group
        for item in items:
            bisect.insort(group, item)
        if was_empty:
            self._group_on(key)
        for dom in self._record(w, key, items, milli):
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
            items = self._items(w, rank, milli)
            group = self.groups.setdefault(key, [])
            if not group:
                self._group_on(key)
            group.extend(items)
            touched.add(key)
            for dom in self._record(w, key, items, milli):
                by_domain.setdefault(dom, []).append((w, rank, milli))
        for key in touched:
            self.groups[key].sort()
        for dom, got in by_domain.items():
            self._sub(dom).add_many(got)

    def _items(self, w: WorkloadState, rank: int, milli: int) -> tuple[Item, ...]:
        """``w``'s items: its pods a shrink may take (newest first), then the
        whole; remembers what :meth:`set_now` needs to re-read work lost."""
        prio, started = w.spec.priority, -(w.started_at or 0)
        pods = shrinkable(w, rank)
        if rank != RUNNING or w.running_at is None:
            return ((prio, 0, started, w.id, 0),)
        self._running_at[w.id] = w.running_at
        t = max(0, self.now - w.running_at)
        if not pods:
            self._lost_milli[w.id] = (milli, 0)
            return ((prio, milli * t, started, w.id, 0),)
        pod = w.placement[pods.start].milli
        base = milli - pod * len(pods)  # its first min_pods pods
        self.pod_milli[w.id] = pod
        self._lost_milli[w.id] = (base, pod)
        out = [(prio, pod * t, started, w.id, -i) for i in reversed(pods)]
        out.append((prio, base * t, started, w.id, 0))
        return tuple(out)

    def item_milli(self, item: Item) -> int:
        """What taking the item's candidate frees (a whole workload: all of
        it, even if some of its pods were taken before)."""
        return self.pod_milli[item[3]] if item[4] else self.milli[item[3]]

    def set_now(self, now: int) -> None:
        """Read work lost at ``now``: Running items are re-keyed and their
        groups re-sorted (the order between two of them can change with
        time when their sizes differ). Done when a search first needs it in
        a cycle, so a kept index costs nothing in cycles without searches."""
        if now == self.now:
            return
        self.now = now
        changed: dict[int, list[Item]] = {}
        for key, group in self.groups.items():
            if key[0] != RUNNING:
                continue
            for i, (prio, _lost, started, wid, part) in enumerate(group):
                at = self._running_at.get(wid)
                base, pod = self._lost_milli.get(wid, (0, 0))
                lost = (pod if part else base) * max(0, now - at) if at is not None else 0
                group[i] = (prio, lost, started, wid, part)
                changed.setdefault(wid, []).append(group[i])
            group.sort()
        for wid, items in changed.items():
            key, _old, doms = self.where[wid]
            self.where[wid] = (key, tuple(sorted(items)), doms)
        for sub in self.domains.values():
            sub.set_now(now)

    def _record(
        self, w: WorkloadState, key: GroupKey, items: tuple[Item, ...], milli: int
    ) -> tuple[tuple[str, str], ...]:
        """Remember where ``w`` is indexed and what it frees; returns its domains."""
        doms = self._domains_of(w)
        self.where[w.id] = (key, items, doms)
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
        key, items, doms = got
        group = self.groups[key]
        for item in items:
            del group[bisect.bisect_left(group, item)]
        if not group:
            self._group_off(key)
        del self.milli[wid]
        self.pod_milli.pop(wid, None)
        self._running_at.pop(wid, None)
        self._lost_milli.pop(wid, None)
        for dom in doms:
            self.domains[dom].discard(wid)

    def domain(self, dom: tuple[str, str]) -> VictimIndex | None:
        """The sub-index of one domain; None if ``dom``'s level is not indexed."""
        if dom[0] not in self.levels:
            return None
        return self.domains.get(dom) or VictimIndex(now=self.now)

    def teams(self) -> list[str]:
        return sorted(self.team_keys)
