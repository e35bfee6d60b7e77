"""6.5's prune: reverse passes over the chosen victims, newest-chosen first,
dropping a victim if W still fits and every 6.4 test still holds without
it, repeated until a pass spares nobody."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from apportion.domain.lifecycle import WorkloadState
from apportion.engine.preemption.index import PodVictim, candidate_key

if TYPE_CHECKING:
    from apportion.engine.preemption.search import VictimSearch


def prune(
    s: VictimSearch, chosen: list[WorkloadState], dom: tuple[str, str] | None, free: int,
) -> list[WorkloadState]:
    """Reverse passes: drop a victim if W still fits and every 6.4 test holds.

    SPEC 6.5 asks for one pass and promises an irreducible result; with
    order-dependent 6.4 tests one pass can miss a victim that becomes
    sparable only after a later-chosen one was dropped, so the pass repeats
    until it drops nothing (docs/scheduling.md). On entry and exit every
    kept victim is removed from the working state.
    """
    kept = list(chosen)
    while True:
        before = len(kept)
        kept, free = _prune_pass(s, kept, dom, free)
        if len(kept) == before:
            return kept

class _Kept:
    """The victims still kept during one pass, in the order they were chosen,
    with what the per-victim tests ask kept at hand (no scan of the whole set
    per victim: sets of a thousand victims occur)."""

    def __init__(self, chosen: list[WorkloadState], own: str) -> None:
        self.chosen = chosen
        self.alive = [True] * len(chosen)
        self.own = own
        self.own_count = sum(1 for v in chosen if v.team == own)
        self.by_id: dict[int, list[int]] = {}
        for i, v in enumerate(chosen):
            self.by_id.setdefault(v.id, []).append(i)

    def drop(self, i: int) -> None:
        self.alive[i] = False
        if self.chosen[i].team == self.own:
            self.own_count -= 1

    def same_workload(self, i: int) -> Iterator[WorkloadState]:
        """Kept candidates of the same workload as the ``i``-th, but it."""
        for j in self.by_id[self.chosen[i].id]:
            if j != i and self.alive[j]:
                yield self.chosen[j]

    def from_(self, i: int) -> list[WorkloadState]:
        """The kept victims chosen at or after the ``i``-th, in order."""
        return [c for j, c in enumerate(self.chosen[i:], i) if self.alive[j]]

    def kept(self) -> list[WorkloadState]:
        return self.from_(0)


def _prune_pass(
    s: VictimSearch, chosen: list[WorkloadState], dom: tuple[str, str] | None, free: int,
) -> tuple[list[WorkloadState], int]:
    """One reverse pass, newest-chosen first."""
    needs_order = not (s.for_hold or s.w.spec.is_reserved) and any(
        v.team != s.w.team for v in chosen
    )
    kept = _Kept(chosen, s._own)
    for i in range(len(chosen) - 1, -1, -1):
        v = chosen[i]
        milli = s._milli(v)
        if free - milli < s.need:
            continue  # not enough capacity without it: it stays
        if not _own_rule_holds_without(s, v, kept) or not _may_spare(v, kept, i):
            continue
        if needs_order and _affects_later(s, v, kept, i):
            spared = _spare_in_order(s, v, kept.from_(i), dom, free - milli)
        else:
            spared = _spare(s, v, dom, free - milli)
        if spared:
            kept.drop(i)
            free -= milli
    return kept.kept(), free


def _own_rule_holds_without(s: VictimSearch, v: WorkloadState, kept: _Kept) -> bool:
    """6.4's same-team rule after sparing ``v``, read on the final set:
    if victims of W's own team remain, the team (W added, they removed)
    is still no further over its share than before. Sparing another
    team's victim leaves W's team's usage as it is."""
    if s._own_limit is None or v.team != s._own or v.is_hold:
        return True
    if kept.own_count <= 1:  # v is the only one of W's team left
        return True
    return s.own_debt() + s._milli(v) * s.ps.scale <= 0


def _affects_later(s: VictimSearch, v: WorkloadState, kept: _Kept, i: int) -> bool:
    """Could sparing ``v`` (the ``i``-th chosen) break the 6.4 test of a
    victim chosen after it?

    Keeping ``v`` raises the excess of ``v``'s team and its ancestors.
    That only hurts a later cross-team victim whose c_W contains ``v``'s
    team (it raises excess(c_W)); a higher excess(c_V) only helps.
    """
    path = s.ws.tree.path(v.team)
    chosen, alive = kept.chosen, kept.alive
    for j in range(i + 1, len(chosen)):
        c = chosen[j]
        if not alive[j] or c.team == s.w.team or c.spec.is_reserved:
            continue
        if s._lca_children(c.team)[0] in path:
            return True
    return False


def _spare(s: VictimSearch, v: WorkloadState, dom: tuple[str, str] | None, free: int) -> bool:
    """Put ``v`` back; keep it back if W still fits, else take it out again."""
    s.restore(v)
    if s.fit(dom, free):
        return True
    s.remove(v)
    return False

def _spare_in_order(
    s: VictimSearch, v: WorkloadState, later: list[WorkloadState],
    dom: tuple[str, str] | None, free: int,
) -> bool:
    """Like :meth:`_spare`, and every other victim must still pass 6.4 in the
    order it was chosen. The order is replayed on the ledger alone (cheap);
    only ``v`` moves on the devices. Victims chosen before ``v`` saw the
    same working state as before (those before them are unchanged), so the
    replay starts at ``v`` (``later``: the kept victims from ``v`` on)."""
    for c in later:
        if not c.is_hold:
            s._move(c.spec, s._milli(c))
    ok = True
    for c in later:
        if c is v:
            continue
        s._verdicts.clear()
        ok = ok and s.passes(c)
        if not c.is_hold:
            s._move(c.spec, -s._milli(c))
    s._verdicts.clear()
    if ok:
        s._devices_back(v)
        ok = s.fit(dom, free)
        if not ok:
            s._devices_out(v)
    if not ok and not v.is_hold:
        s._move(v.spec, -s._milli(v))
    if ok:  # spared: no longer taken out
        s._out.pop(candidate_key(v))
        if isinstance(v, PodVictim):
            s._pods_out[v.id].discard(v.pod)
    return ok

def _may_spare(v: WorkloadState, kept: _Kept, i: int) -> bool:
    """A pod of a workload still taken whole is implied by it, and a pod
    may stay only if no older pod of it goes (newest first)."""
    if not isinstance(v, PodVictim):
        return True
    return not any(
        not isinstance(c, PodVictim) or c.pod < v.pod for c in kept.same_workload(i)
    )
