"""6.5's greedy: take the first candidate, in the victim order, that passes
6.4 in the working state at that moment, until W fits."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from apportion.domain.lifecycle import WorkloadState
from apportion.engine.preemption.exhaust import exhaustion_fits
from apportion.engine.preemption.index import candidate_key
from apportion.engine.preemption.order import NOMINATION, VictimIndex, VictimQueue

if TYPE_CHECKING:
    from apportion.engine.preemption.search import VictimSearch


def _can_take_now(s: VictimSearch, index: VictimIndex) -> bool:
    """For elastic W: could the greedy's first pick find anything in
    ``index``? Its own team's work below W's priority, or work under a
    c_V whose 6.4 test passes now (excess(c_V) > 0 and excess(c_W), W
    counted, below it). "No" means the queue would come up empty."""
    ps, tree, team_keys, groups = s.ps, s.ws.tree, index.team_keys, index.groups
    prio, own = s.w.spec.priority, s.w.team
    for key in team_keys.get(own, ()):
        head = groups[key][0]
        if head[0] < prio and head[3] != s.w.id:
            return True
    c_w = own
    for parent in (*tree.path(own)[1:], None):
        siblings = tree.children(parent) if parent is not None else tree.top_level()
        level = ps.excess_key(c_w)
        for sib in siblings:
            if sib == c_w:
                continue
            ex_v = ps.excess_key(sib)
            if ex_v > 0 and level < ex_v and any(
                leaf in team_keys for leaf in s.ws.leaves_under(sib)
            ):
                return True
        if parent is None:
            break
        c_w = parent
    return False

def greedy(
    s: VictimSearch, dom: tuple[str, str] | None, free: int
) -> tuple[list[WorkloadState] | None, int]:
    """Take candidates in order until W fits; None if it never does."""
    if s.for_hold:
        return _greedy_hold(s, dom, free)
    index, eligible, is_filtered = _scope(s, dom)
    if _known_to_fail(s, dom, free, index, is_filtered):
        return None, free
    queue = _queue(s, index, eligible, is_filtered)
    try:
        return _take_until_fit(s, dom, free, queue)
    finally:
        s.examined += queue.examined


def _greedy_hold(
    s: VictimSearch, dom: tuple[str, str] | None, free: int
) -> tuple[list[WorkloadState] | None, int]:
    """For a starvation hold: placed work, cheapest first, until W would fit."""
    chosen: list[WorkloadState] = []
    for v in s._hold_candidates():
        if s.fit(dom, free):
            return chosen, free
        if dom is None or s._touches(v, dom):
            free += s.remove(v)
            chosen.append(v)
    return (chosen, free) if s.fit(dom, free) else (None, free)


def _scope(
    s: VictimSearch, dom: tuple[str, str] | None
) -> tuple[VictimIndex, Callable[[WorkloadState], bool], bool]:
    """The index to search in ``dom``, the static 6.4 test, and whether the
    index holds candidates outside ``dom`` (so every item is checked)."""
    index = s.ps.victims
    sub = index.domain(dom) if dom is not None else None
    if sub is not None:
        return sub, s.eligible, False
    if dom is None:
        return index, s.eligible, False

    def eligible(v: WorkloadState) -> bool:
        return s.eligible(v) and s._touches(v, dom)

    return index, eligible, True


def _known_to_fail(
    s: VictimSearch, dom: tuple[str, str] | None, free: int, index: VictimIndex,
    is_filtered: bool,
) -> bool:
    """The shortcuts (``Shortcuts.first_pick``, ``.exhaust``): True when the
    greedy is known to end without a fit, so it need not run."""
    if is_filtered or s.w.spec.is_reserved:
        return False
    if s.shortcuts.first_pick and not _can_take_now(s, index) and not s.fit(dom, free):
        return True  # the queue's first pick would find nothing
    if s.shortcuts.exhaust and s._probe is not None:
        fits, looked = exhaustion_fits(
            s.ws, s.ps, s.w, index, s.eligible,
            s.ps.cluster.probe(s.req, domain=dom), free, s.need, s.own_debt(),
        )
        s.examined += looked
        return not fits  # the greedy would take its final set and not fit
    return False


def _queue(
    s: VictimSearch, index: VictimIndex, eligible: Callable[[WorkloadState], bool],
    is_filtered: bool,
) -> VictimQueue:
    """6.5's order over ``index``, with 6.4's tests and shrink before kill."""
    own = s.w.team
    prio, is_elastic = s.w.spec.priority, not s.w.spec.is_reserved

    def rule(key: tuple[int, str]) -> tuple[bool, int | None]:
        # Groups are sorted by priority: W outranks only a prefix of the
        # nominations, and of its own team's work when W is elastic.
        if key[0] == NOMINATION or is_elastic:
            return False, prio
        return False, None

    # Same team (6.4, rev 3): while the team is over what the rule allows,
    # only a victim that frees enough passes; once one is taken the team
    # is within it, and the rest pass (s.own_taken, see _take_until_fit).
    has_own_rule = s._own_limit is not None
    taken = s.own_taken

    def may_pick(v: WorkloadState) -> bool:
        if has_own_rule and v.team == own and (candidate_key(v) in taken or not s.own_allows(v)):
            return False
        return eligible(v) and s._may_take(v)

    # Other teams' placed work in the right index needs no per-item check:
    # the index holds only elastic Starting/Running work, all eligible for W.
    return VictimQueue(index, s._teams(), s._candidate,
                       may_pick, s.ps.excess_key, s.verdict, own=own, rule=rule,
                       trusted=not is_filtered,
                       block=s._block, woken=s._woken, level=s.ps.excess_key)


def _take_until_fit(
    s: VictimSearch, dom: tuple[str, str] | None, free: int, queue: VictimQueue
) -> tuple[list[WorkloadState] | None, int]:
    """Pick, take out, repeat, until W fits or nothing passes."""
    own = s.w.team
    chosen: list[WorkloadState] = []
    while not s.fit(dom, free):
        pick = queue.pick()
        if pick is None:
            return None, free
        was_over = pick.team == own and s.own_debt() > 0
        free += s.remove(pick)
        chosen.append(pick)
        if was_over:  # own candidates skipped as too small may pass now
            s.own_taken.add(candidate_key(pick))
            queue.rescan(own)
    return chosen, free
