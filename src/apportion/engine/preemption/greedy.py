"""6.5's greedy: take the first candidate, in the victim order, that passes
6.4 in the working state at that moment, until W fits."""

from __future__ import annotations

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
    chosen: list[WorkloadState] = []
    if s.for_hold:
        for v in s._hold_candidates():
            if s.fit(dom, free):
                return chosen, free
            if dom is None or s._touches(v, dom):
                free += s.remove(v)
                chosen.append(v)
        return (chosen, free) if s.fit(dom, free) else (None, free)

    index = s.ps.victims
    sub = index.domain(dom) if dom is not None else None
    eligible = s.eligible
    if sub is not None:
        index = sub
    elif dom is not None:
        def eligible(v: WorkloadState) -> bool:
            return s.eligible(v) and s._touches(v, dom)

    is_filtered = dom is not None and sub is None
    if (s.shortcuts.first_pick and not is_filtered and not s.w.spec.is_reserved
            and not _can_take_now(s, index) and not s.fit(dom, free)):
        return None, free  # the queue's first pick would find nothing
    if (s.shortcuts.exhaust and s._probe is not None and not is_filtered
            and not s.w.spec.is_reserved):
        fits, looked = exhaustion_fits(
            s.ws, s.ps, s.w, index, s.eligible,
            s.ps.cluster.probe(s.req, domain=dom), free, s.need,
            s.own_debt(),
        )
        s.examined += looked
        if not fits:
            return None, free  # the greedy would take its final set and not fit
    own = s.w.team
    prio, is_elastic = s.w.spec.priority, not s.w.spec.is_reserved

    def rule(key: tuple[int, str]) -> tuple[bool, int | None]:
        # Groups are sorted by priority: W outranks only a prefix of the
        # nominations, and of its own team's work when W is elastic.
        if key[0] == NOMINATION or is_elastic:
            return False, prio
        return False, None

    static = eligible
    taken: set[tuple[int, int]] = set()
    # Same team (6.4, rev 3): while the team is over what the rule allows,
    # only a victim that frees enough passes; once one is taken the team
    # is within it, and the rest pass (see below).
    has_own_rule = s._own_limit is not None

    def may_pick(v: WorkloadState) -> bool:
        if has_own_rule and v.team == own and (candidate_key(v) in taken or not s.own_allows(v)):
            return False
        return static(v) and s._may_take(v)

    # Other teams' placed work in the right index needs no per-item check:
    # the index holds only elastic Starting/Running work, all eligible for W.
    queue = VictimQueue(index, s._teams(), s._candidate,
                        may_pick, s.ps.excess_key, s.verdict, own=own, rule=rule,
                        trusted=not is_filtered,
                        block=s._block, woken=s._woken, level=s.ps.excess_key)
    try:
        while not s.fit(dom, free):
            pick = queue.pick()
            if pick is None:
                return None, free
            was_over = pick.team == own and s.own_debt() > 0
            free += s.remove(pick)
            chosen.append(pick)
            if was_over:  # own candidates skipped as too small may pass now
                taken.add(candidate_key(pick))
                queue.rescan(own)
        return chosen, free
    finally:
        s.examined += queue.examined
