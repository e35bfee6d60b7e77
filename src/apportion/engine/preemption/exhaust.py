"""Would a victim search for elastic W ever succeed? (SPEC 6.5, answered
without running the greedy.)

The greedy takes, one at a time, the first candidate in 6.5's order that
passes 6.4, until W fits or no candidate passes; if W never fits it preempts
nothing. Most searches of a crowded cycle end that way, after dozens of
picks. Their outcome can be known for less:

- Fit (devices, gangs, topology within one domain) and quota (burst caps on
  W's path) only improve as victims go, and the greedy only removes. So W
  fits at some moment of the greedy exactly when it fits once the greedy has
  taken everything it ever would (its *final set*).
- That final set does not depend on how picks from different subtrees
  interleave. For elastic W, a candidate V of W's own team passes while W
  outranks it and the team, W added and V removed, is no further over its
  share than before (rev 3). Only own picks move the team's usage, so once
  one own candidate is taken all the others pass: every eligible one ends up
  taken if any one of them frees enough on its own, else none is. A candidate under a sibling
  subtree c_V of W's path passes while ``excess(c_V) > max(0, excess(c_W))``
  (W counted, the victims so far removed). Only picks inside c_V move
  ``excess(c_V)`` and the order among c_V's candidates (6.5's order reads
  their teams' excess), and ``excess(c_W)`` only falls. So c_V gives up the
  shortest prefix of its own order after which ``excess(c_V)`` is at most the
  level ``excess(c_W)`` reaches once everything below c_W is taken; levels
  are therefore final bottom-up along W's path.

:func:`exhaustion_fits` walks W's path bottom-up, simulates each subtree's
own order on plain integers (no 6.4 tests, no parking, no ledger), takes each
victim out of a private fit probe, and stops with True as soon as W fits
(a subset of the final set that fits means the final set fits). False means
the greedy would take its whole final set and still not fit: the search
preempts nothing, exactly as the greedy would have decided.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping

from apportion.domain.lifecycle import WorkloadState
from apportion.engine.owners import freed_by
from apportion.engine.placement.fit_probe import FitProbe
from apportion.engine.pool_state import PoolState
from apportion.engine.preemption.index import PodVictim, candidate
from apportion.engine.preemption.order import NOMINATION, VictimIndex
from apportion.engine.working_state import WorkingState


class _Taking:
    """The victims taken so far: devices out of the probe, milli freed, and
    usage removed under each team of W's path (for the caps)."""

    __slots__ = (
        "caps", "examined", "free", "need", "path_usage", "pods_out", "probe", "ps", "removed",
    )

    def __init__(self, ps: PoolState, path: tuple[str, ...], probe: FitProbe,
                 free: int, need: int) -> None:
        led = ps.ledger
        self.ps, self.probe, self.free, self.need = ps, probe, free, need
        self.pods_out: dict[int, set[int]] = {}  # pods taken as shrinks, by id
        #: (index on W's path, cap) for each capped team of the path.
        self.caps = [(i, cap) for i, a in enumerate(path) if (cap := led.cap(a)) is not None]
        self.path_usage = [led.usage(a) for a in path]  # W already counted
        #: Usage taken out: [0] from W's own team, [i + 1] from the sibling
        #: subtrees of path[i] (under path[i + 1], or the root for the top).
        self.removed = [0] * (len(path) + 1)
        self.examined = 0

    def take(self, v: WorkloadState, slot: int) -> int:
        """Take ``v`` out; returns the milli it frees."""
        self.examined += 1
        owners, milli = freed_by(self.ps, v, self.pods_out)
        if isinstance(v, PodVictim):
            self.pods_out.setdefault(v.id, set()).add(v.pod)
        for owner in owners:
            self.probe.take_out(owner)
        self.free += milli
        if not v.is_hold:  # holds are claims, not usage
            self.removed[slot] += milli
        return milli

    def under(self, i: int) -> int:
        """Usage taken out under path[i]: W's team and the siblings below path[i]."""
        return sum(self.removed[:i + 1])

    def fits(self) -> bool:
        if self.free < self.need or not self.probe.fits():
            return False
        return all(self.path_usage[i] - self.under(i) <= cap for i, cap in self.caps)


def exhaustion_fits(
    ws: WorkingState, ps: PoolState, w: WorkloadState, index: VictimIndex,
    eligible: Callable[[WorkloadState], bool], probe: FitProbe, free: int, need: int,
    own_debt: int = 0,
) -> tuple[bool, int]:
    """(does W fit on the greedy's final set, candidates looked at).

    Call with W's demand counted on the ledger (as the search does) and
    nothing removed yet; ``index`` is the search's index (the pool's or a
    domain's), ``eligible`` 6.4's static rules and ``own_debt`` how much (x
    scale) a same-team victim must free (``VictimSearch.own_debt``). Changes nothing but
    ``probe`` (a fresh one, for this call alone).
    """
    tree = ws.tree
    own = w.team
    path = tree.path(own)
    taking = _Taking(ps, path, probe, free, need)
    if taking.fits():
        return True, 0
    groups, lookup = index.groups, ws.workloads
    prio = w.spec.priority
    # W's own team: every candidate W outranks, or none (see above).
    own_items = [
        (candidate(lookup, item), item) for key in index.team_keys.get(own, ())
        for item in groups[key][:bisect.bisect_left(groups[key], (prio,))]
    ]
    own_items = [(v, item) for v, item in own_items if eligible(v)]
    if own_debt > 0 and not any(
        not v.is_hold and index.item_milli(item) * ps.scale >= own_debt for v, item in own_items
    ):
        own_items = []
    for v, _item in own_items:
        taking.take(v, 0)
        if taking.fits():
            return True, taking.examined
    scale = ps.scale
    c_w = own
    for level, parent in enumerate((*path[1:], None)):
        siblings = tree.children(parent) if parent is not None else tree.top_level()
        # excess(c_W) once everything below it is taken: final for this level.
        floor = max(0, ps.excess_key(c_w) - taking.under(level) * scale)
        for sib in siblings:
            if sib != c_w and ps.excess_key(sib) > floor and _drain(
                ws, ps, index, eligible, sib, floor, prio, taking, level + 1
            ):
                return True, taking.examined
        if parent is None:
            break
        c_w = parent
    return False, taking.examined


class _Heads:
    """The first item still to take of each group: placed work in order; of a
    nomination group only those W outranks (``prio``) that pass ``eligible``."""

    def __init__(
        self, index: VictimIndex, lookup: Mapping[int, WorkloadState],
        eligible: Callable[[WorkloadState], bool], prio: int,
    ) -> None:
        self.groups, self.lookup, self.eligible, self.prio = index.groups, lookup, eligible, prio
        self.pos: dict[tuple[int, str], int] = {}

    def head(self, key: tuple[int, str]) -> tuple[int, int, int, int, int] | None:
        items = self.groups[key]
        at = self.pos.get(key, 0)
        if key[0] != NOMINATION:
            return items[at] if at < len(items) else None
        end = bisect.bisect_left(items, (self.prio,), at)
        while at < end:
            item = items[at]
            if self.eligible(candidate(self.lookup, item)):
                self.pos[key] = at
                return item
            at += 1
        self.pos[key] = len(items)
        return None

    def take(self, key: tuple[int, str]) -> WorkloadState:
        """The head of ``key``, which is then taken (the next one is its head)."""
        at = self.pos.get(key, 0)
        self.pos[key] = at + 1
        return candidate(self.lookup, self.groups[key][at])


_Entry = tuple[int, int, int, int, int, int, int, str, int]


def _entries(
    heads: _Heads, keys: Iterable[tuple[int, str]], team: str, ex: int, ver: int
) -> Iterator[_Entry]:
    """Heap entries of ``team``'s groups: 6.5's order, with its excess ``ex``."""
    flag = 0 if ex > 0 else 1
    for key in keys:
        item = heads.head(key)
        if item is not None:
            yield (key[0], flag, item[0], -ex, item[1], item[2], item[3], team, ver)


def _drain(
    ws: WorkingState, ps: PoolState, index: VictimIndex,
    eligible: Callable[[WorkloadState], bool], sib: str, floor: int, prio: int,
    taking: _Taking, slot: int,
) -> bool:
    """Take from subtree ``sib`` in 6.5's order while ``excess(sib) > floor``;
    True as soon as W fits.

    The order is :class:`VictimQueue`'s: (rank, over entitlement first,
    priority, largest team excess, least work lost, most recently started, id), with a team's
    excess recomputed after each of its picks. Groups of placed work hold
    only eligible candidates; nominations only while W outranks them."""
    team_keys = index.team_keys
    scale, usage, scaled = ps.scale, ps.ledger.usage_by_team, ps.scaled
    excess = ps.excess_key(sib)
    heads = _Heads(index, ws.workloads, eligible, prio)
    team_ex: dict[str, int] = {}
    version: dict[str, int] = {}
    heap: list[_Entry] = []  # the first fill: appended, then one heapify
    for team in ws.leaves_under(sib):
        keys = team_keys.get(team)
        if keys is not None:
            ex = team_ex[team] = usage[team] * scale - scaled.get(team, 0)
            version[team] = 0
            heap.extend(_entries(heads, keys, team, ex, 0))
    heapq.heapify(heap)
    while excess > floor and heap:
        rank, _f, _p, _e, _lost, _s, _vid, team, ver = heapq.heappop(heap)
        if ver != version[team]:
            continue
        v = heads.take((rank, team))
        milli = taking.take(v, slot)
        if taking.fits():
            return True
        if not v.is_hold:
            excess -= milli * scale
            team_ex[team] -= milli * scale
        version[team] = ver = ver + 1
        for entry in _entries(heads, team_keys[team], team, team_ex[team], ver):
            heapq.heappush(heap, entry)
    return False
