"""Fragmentation-aware packing (SPEC 5, ``packing: fragmentation``).

After "Beware of Fragmentation" (Weng et al., USENIX ATC '23, FGD): the
fragmentation of a node for one pod shape is the free GPU capacity that shape
cannot use there —

* all of the node's free milli-GPU when the shape cannot run on the node at all
  (wrong GPU type, too little free CPU or memory, too few fully free devices
  for a whole-GPU shape, no device with room for a share);
* otherwise the free milli of the devices it cannot use (for a share of c: the
  devices with less than c free; for whole GPUs: the devices not fully free).

A node's fragmentation is the sum over the pool's shape mix, each shape
weighted by its count. A pod goes where the pool's fragmentation grows least:
the node and device with the smallest exact increase ΔF (an integer; FGD
rounds a sigmoid of it to whole points, which makes small differences ties).
Ties break by best fit (least free left on the device, or fewest fully free
devices left on the node), then node name and device index, so placement is
deterministic. A share never opens a fully free device while a shared device of
the same node fits it.

Nodes in the same state (GPU type, free milli per device, free CPU and
memory) score the same, so each scope keeps its nodes grouped by state and a
pick scores each state once (cached per state and request shape), not each
node.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from apportion.engine.placement.device_book import Constraints, DeviceBook, FilterKey
from apportion.engine.placement.host_book import UNLIMITED
from apportion.engine.placement.scope_index import FULL, ScopeIndex
from apportion.engine.placement.shapes import ShapeMix
from apportion.engine.placement.types import PlacementRequest

#: A node state: (gpu type, free milli per device sorted high to low, free
#: CPU, free memory).
State = tuple[str | None, tuple[int, ...], int, int]
#: A scored option on one state: (ΔF, free left (best fit), device free before
#: for a share / 0 for whole GPUs). None: the request does not fit.
Option = tuple[int, int, int]


class Fragmentation:
    """Scores and picks for one pool's book against a shape mix."""

    def __init__(self, book: DeviceBook, mix: ShapeMix) -> None:
        self.book = book
        self.mix = mix
        self.shapes = _shapes(mix)
        self.state_id: dict[State, int] = {}
        self.states: list[State] = []
        self.frag_of: list[int] = []
        self.node_state: list[int] = [-1] * len(book.nodes)
        #: scope key -> state id -> sorted ranks of the scope's nodes in it
        self.groups: dict[object, dict[int, list[int]]] = {}
        self.node_groups: list[list[dict[int, list[int]]]] = [[] for _ in book.nodes]
        self._options: dict[tuple[int, int, int, int, tuple[str, ...]], dict[int, Option | None]]
        self._options = {}
        book.changed_nodes = set(range(len(book.nodes)))
        self.picks = 0
        self.states_scored = 0

    def set_mix(self, mix: ShapeMix) -> None:
        """Measure against ``mix`` from now on (node groups are kept)."""
        if mix == self.mix:
            return
        self.mix, self.shapes = mix, _shapes(mix)
        self.frag_of = [self.frag(state) for state in self.states]
        self._options.clear()

    # -- states --------------------------------------------------------------
    def _state(self, rank: int) -> int:
        book = self.book
        first = book.first_dev[rank]
        avails = tuple(sorted(book.avail[first:first + book.nodes[rank].gpus], reverse=True))
        host = book.host
        state: State = (book.node_gpu_type(book.nodes[rank]), avails,
                        host.cpu_free(rank), host.mem_free(rank))
        sid = self.state_id.get(state)
        if sid is None:
            sid = self.state_id[state] = len(self.states)
            self.states.append(state)
            self.frag_of.append(self.frag(state))
        return sid

    def frag(self, state: State) -> int:
        """Weighted free milli the mix's shapes cannot use on a node in ``state``."""
        gpu_type, avails, cpu, mem = state
        total = sum(avails)
        if not total:
            return 0
        full = sum(1 for a in avails if a >= FULL)
        best = avails[0] if avails else 0
        out = 0
        for count, charge, whole, s_cpu, s_mem, types in self.shapes:
            if (types is not None and gpu_type not in types) or s_cpu > cpu or s_mem > mem:
                out += count * total
            elif whole:
                out += count * (total if full < whole else total - FULL * full)
            elif best < charge:
                out += count * total
            else:
                out += count * sum(a for a in avails if a < charge)
        return out

    def sync(self) -> None:
        """Move the nodes changed since the last pick to their new state's group."""
        book = self.book
        changed = book.changed_nodes
        if not changed:
            return
        book.flush()
        for rank in sorted(changed):
            old = self.node_state[rank]
            new = self._state(rank)
            if new == old:
                continue
            self.node_state[rank] = new
            for groups in self.node_groups[rank]:
                _move(groups, rank, old, new)
        changed.clear()

    def _groups(self, scope: ScopeIndex) -> dict[int, list[int]]:
        found = self.groups.get(scope.key)
        if found is None:
            found = self.groups[scope.key] = {}
            fkey, constraints = cast(tuple[FilterKey, Constraints], scope.key)
            for rank in self.book.member_nodes(fkey, constraints):
                if self.book.is_ready[rank]:
                    found.setdefault(self.node_state[rank], []).append(rank)
                    self.node_groups[rank].append(found)
        return found

    # -- picking ---------------------------------------------------------------
    def pick(self, scope: ScopeIndex, req: PlacementRequest) -> list[tuple[int, int]] | None:
        """(device id, milli) for the next pod of ``req`` in ``scope``, or None."""
        self.sync()
        self.picks += 1
        groups = self._groups(scope)
        key = (req.charge, req.whole_devices, req.cpu_milli, req.memory_mib, req.gpu_types)
        cache = self._options.get(key)
        if cache is None:
            cache = self._options[key] = {}
        best: tuple[int, int, int] | None = None
        best_option: Option | None = None
        for sid, ranks in groups.items():
            if not ranks:
                continue
            if sid in cache:
                option = cache[sid]
            else:
                option = cache[sid] = self._score(self.states[sid], self.frag_of[sid], req)
                self.states_scored += 1
            if option is None:
                continue
            rank = ranks[0]
            order = (option[0], option[1], rank)
            if best is None or order < best:
                best, best_option = order, option
        if best is None or best_option is None:
            return None
        return self._devices(best[2], best_option, req)

    def _score(self, state: State, before: int, req: PlacementRequest) -> Option | None:
        gpu_type, avails, cpu, mem = state
        if (req.cpu_milli and req.cpu_milli > cpu) or (req.memory_mib and req.memory_mib > mem):
            return None
        cpu_after = cpu - req.cpu_milli if cpu < UNLIMITED else cpu
        mem_after = mem - req.memory_mib if mem < UNLIMITED else mem
        if req.whole_devices:
            full = sum(1 for a in avails if a >= FULL)
            if full < req.whole_devices:
                return None
            after = tuple(sorted((*avails[req.whole_devices:], *([0] * req.whole_devices)),
                                 reverse=True))
            delta = self.frag((gpu_type, after, cpu_after, mem_after)) - before
            return (delta, full - req.whole_devices, 0)
        charge = req.charge
        fitting = sorted({a for a in avails if a >= charge})
        if not fitting:
            return None
        if fitting[0] < FULL:  # a shared device fits: never open a full one
            fitting = [a for a in fitting if a < FULL]
        best: Option | None = None
        for a in fitting:
            rest = list(avails)
            rest[rest.index(a)] = a - charge
            after = tuple(sorted(rest, reverse=True))
            delta = self.frag((gpu_type, after, cpu_after, mem_after)) - before
            option = (delta, a - charge, a)
            if best is None or option < best:
                best = option
        return best

    def _devices(self, rank: int, option: Option, req: PlacementRequest) -> list[tuple[int, int]]:
        book = self.book
        if req.whole_devices:
            return [(g, FULL) for g in book.full_devs[rank][: req.whole_devices]]
        first = book.first_dev[rank]
        for g in range(first, first + book.nodes[rank].gpus):
            if book.avail[g] == option[2]:
                return [(g, req.charge)]
        raise AssertionError("fragmentation index out of sync with the book")


def _shapes(mix: ShapeMix) -> list[tuple[int, int, int, int, int, frozenset[str] | None]]:
    return [
        (count, s.charge, s.whole_devices, s.cpu_milli, s.memory_mib,
         frozenset(s.gpu_types) if s.gpu_types else None)
        for s, count in mix.gpu_shapes
    ]


def _move(groups: dict[int, list[int]], rank: int, old: int, new: int) -> None:
    from bisect import bisect_left, insort

    if old >= 0:
        ranks = groups.get(old)
        if ranks is not None:
            pos = bisect_left(ranks, rank)
            if pos < len(ranks) and ranks[pos] == rank:
                del ranks[pos]
                if not ranks:
                    del groups[old]
    insort(groups.setdefault(new, []), rank)


def mix_of(shapes: Iterable[tuple[PlacementRequest, int]]) -> ShapeMix:
    """A mix from requests and pod counts (helper for callers and tests)."""
    from apportion.engine.placement.shapes import PodShape

    return ShapeMix.of(
        (PodShape(r.charge, r.whole_devices, r.cpu_milli, r.memory_mib, r.gpu_types), n)
        for r, n in shapes
    )
