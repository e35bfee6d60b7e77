"""Preemption rules of SPEC 6.4-6.6, one scenario per rule."""

from __future__ import annotations

from apportion.engine.plan import DecisionKind
from tests.engine.harness import World


def test_same_team_higher_priority_displaces_lower() -> None:
    w = World().pool(nodes=1).team("t")
    w.submit("low", "t", 8, priority=10, running=True)
    w.submit("high", "t", 8, priority=60)
    w.settle()
    assert (w.status("low"), w.status("high")) == ("Preempted", "Running")


def test_same_team_equal_priority_is_never_a_victim() -> None:
    w = World().pool(nodes=1).team("t")
    w.submit("first", "t", 8, running=True)
    w.submit("second", "t", 8)
    w.settle()
    assert w.status("first") == "Running"
    assert w.code("second") == "WAITING_FOR_CAPACITY"


def test_lower_priority_cannot_displace_other_teams_higher_priority() -> None:
    w = World().pool(nodes=1).team("a").team("b")
    w.submit("hi", "a", 8, priority=75, running=True)
    w.submit("lo", "b", 8, priority=50)
    w.settle()
    assert w.status("hi") == "Running"
    assert w.code("lo") == "FAIR_SHARE"


def test_team_takes_back_its_idle_reservation_whatever_the_priority() -> None:
    w = World().pool(nodes=1).team("a").team("b", main=8)
    w.submit("borrower", "a", 8, priority=90, running=True)
    w.submit("owner", "b", 8, priority=10)  # elastic, low priority, but its own GPUs
    w.settle()
    assert (w.status("borrower"), w.status("owner")) == ("Preempted", "Running")


def test_equal_priority_lumpy_reclaim_converges_without_flip_flop() -> None:
    w = World().pool(nodes=1).team("a").team("b")
    for i in range(8):
        w.submit(f"a{i}", "a", requeue_on_preemption=True, running=True)
    for i in range(3):
        w.submit(f"b{i}", "b", 3)
    w.settle()
    assert w.usage("a") == 5 and w.usage("b") == 3
    before = len(w.preemptions)
    for _ in range(5):  # nothing moves any more
        w.settle()
    w.submit("a-more", "a", 1)
    w.settle()
    assert len(w.preemptions) == before
    assert w.usage("a") == 5 and w.usage("b") == 3


def test_starting_victims_go_before_running_ones() -> None:
    w = World().pool(nodes=1).team("a").team("b", main=8)
    w.submit("old", "a", 4, running=True)
    w.instant_running = False
    w.submit("new", "a", 4)
    w.settle()
    assert w.status("new") == "Starting"
    w.submit("owner", "b", 4, wclass="reserved")
    w.settle()
    assert w.preempted() == ["new"]


def test_teams_over_their_entitlement_are_victims_first() -> None:
    w = World().pool(nodes=2).team("a").team("b", main=8).team("c", main=8)
    for i in range(4):
        w.submit(f"c{i}", "c", 1, priority=10, running=True)
    for i in range(8):
        w.submit(f"a{i}", "a", 1, priority=60, running=True)
    w.submit("owner", "b", 1, pods=8, wclass="reserved")
    w.settle()
    assert w.status("owner") == "Running"
    assert w.preempted("c") == []  # c is within its share although its priority is lowest
    assert len(w.preempted("a")) == 4


def test_victim_set_is_irreducible() -> None:
    w = World().pool(nodes=1).team("a").team("b", main=8)
    w.submit("x1", "a", 1, priority=10, running=True)
    w.submit("x2", "a", 4, priority=20, running=True)
    w.submit("x3", "a", 3, priority=30, running=True)
    w.submit("owner", "b", 4, wclass="reserved")
    w.settle()
    assert w.status("owner") == "Running"
    assert w.preempted() == ["x2"]  # x1 was picked first, then spared by the reverse pass


def test_gang_victim_is_preempted_as_a_whole() -> None:
    w = World().pool(nodes=1).team("a").team("b", main=8)
    w.submit("gang", "a", 1, pods=8, running=True)
    w.submit("owner", "b", 1, wclass="reserved")
    w.settle()
    assert w.status("gang") == "Preempted"
    assert [p.milli for p in w.preemptions] == [8000]


def test_topology_preemption_picks_the_cheapest_domain() -> None:
    w = World().pool(racks={"r1": 1, "r2": 1}, topology=("zone", "rack")).team("a").team(
        "b", main=8)
    w.submit("r1-big", "a", 8, node_selector={"rack": "r1"}, running=True)
    w.submit("r2-small", "a", 4, node_selector={"rack": "r2"}, running=True)
    w.submit("r2-other", "a", 4, node_selector={"rack": "r2"}, running=True, priority=5)
    w.submit("owner", "b", 1, pods=4, wclass="reserved",
             topology={"level": "rack", "mode": "required"})
    w.settle()
    assert w.status("owner") == "Running"
    assert w.preempted() == ["r2-other"]
    assert {p.node for p in w.w("owner").placement} == {"main-r2-n0"}


def test_higher_ranked_workload_takes_a_nomination() -> None:
    w = World().pool(nodes=1, preemption_grace=60).team("a").team("b", main=8)
    w.submit("borrower", "a", 8, running=True)
    w.submit("b-res", "b", 8, wclass="reserved")
    w.settle()
    assert w.code("b-res") == "PREEMPTING"
    w.advance(10)
    w.submit("b-urgent", "b", 8, wclass="reserved", priority=500)
    w.settle()
    taken = [d for p in w.plans for d in p.decisions if d.kind is DecisionKind.DENOMINATE]
    assert [(d.workload_id, d.by) for d in taken] == [(w.names["b-res"], w.names["b-urgent"])]
    assert w.code("b-urgent") == "PREEMPTING"
    assert w.status("b-res") == "Queued" and w.w("b-res").nomination == ()
    assert len(w.preemptions) == 1  # taking a nomination preempts nobody new
    w.advance(60)
    w.settle()
    assert w.status("b-urgent") == "Running"
    assert w.code("b-res") == "RESERVATION_EXHAUSTED"


def test_nomination_reserves_devices_against_smaller_work() -> None:
    w = World().pool(nodes=1, preemption_grace=60).team("a").team("b", main=8).team("c")
    w.submit("borrower", "a", 8, running=True)
    w.submit("owner", "b", 8, wclass="reserved")
    w.settle()
    w.advance(60)
    w.submit("small", "c", 1, priority=99)  # arrives the instant the victim exits
    w.settle()
    assert w.status("owner") == "Running"
    assert w.status("small") == "Queued"


def test_requeue_on_preemption_starts_a_new_attempt() -> None:
    w = World().pool(nodes=1).team("a").team("b", main=8)
    w.submit("sweep", "a", 8, requeue_on_preemption=True, running=True)
    w.submit("owner", "b", 8, wclass="reserved")
    w.settle()
    s = w.w("sweep")
    assert (s.status.value, s.attempt) == ("Queued", 2)
    assert s.attempts[0].status.value == "Preempted"
    assert s.submitted_at == 0


def test_reserved_arrival_in_capped_subtree_displaces_its_elastic_work() -> None:
    w = World().pool(nodes=4).team("org", limit=0, main=16).team("x", "org", main=8).team(
        "y", "org", main=8)
    for i in range(8):
        w.submit(f"xe{i}", "x", running=True)  # uses y's idle reservation inside org's cap
    for i in range(8):
        w.submit(f"xr{i}", "x", wclass="reserved", running=True)
    w.submit("y-res", "y", 1, pods=4, wclass="reserved")
    w.settle()
    assert w.status("y-res") == "Running"
    assert len(w.preempted("xe")) == 4
    assert w.usage("x") + w.usage("y") <= 16


def test_dry_run_reports_victims_and_changes_nothing() -> None:
    w = World().pool(nodes=1).team("a").team("b", main=8)
    w.submit("sweep", "a", 8, running=True)
    before = dict(w.states)
    dr = w.dry_run("owner", "b", 8, wclass="reserved")
    assert dr.pool == "main" and dr.starts_now is True
    assert dr.victims == ((w.names["sweep"], 8000),)
    # the cycle's own decisions for it: routed, then started on the freed node
    assert [d.kind.value for d in dr.decisions] == ["route", "start"]
    assert {d.workload_id for d in dr.decisions} == {dr.workload_id}
    assert w.states == before
    dr2 = w.dry_run("late", "a", 8)
    assert dr2.starts_now is False and dr2.reason is not None
    assert dr2.reason.code.value == "WAITING_FOR_CAPACITY"


def test_lumpy_burst_starts_the_small_jobs_and_preempts_nothing() -> None:
    """SPEC rev 3, 6.2: the order reads the deficit after admitting W. Both
    teams are entitled to 4; a's 8-GPU job would leave a at -4, each of b's
    1-GPU jobs at 3, 2, ... so b's jobs go first and fill the pool. Revision 2
    started the big job (deficits tied, a submitted first) and preempted it in
    the same cycle for b's jobs."""
    w = World().pool(nodes=1).team("a").team("b")
    w.submit("big", "a", 8)
    for i in range(8):
        w.submit(f"b{i}", "b", 1)
    w.cycle()
    kinds = {d.kind.value for d in w.plans[0].decisions}
    assert "preempt" not in kinds
    assert len(w.running("b")) == 8 and w.status("big") == "Queued"
    w.settle()
    assert not w.preempted() and w.code("big") == "FAIR_SHARE"


def test_each_workload_competes_with_its_own_deficit_after_admission() -> None:
    """SPEC 6.2 (rev 3): W's own size is counted, so a team's small job goes
    before its own earlier big one (docs/scheduling.md, "Order")."""
    w = World().pool(nodes=1, gpus=4).team("a").team("b")
    w.submit("x", "b", 2, running=True)
    w.submit("big", "a", 2)
    w.submit("small", "a", 1)
    w.submit("other", "b", 1)
    w.cycle()
    # Entitled to 2 each. After admitting: small 2 - 0 - 1 = 1, big 2 - 0 - 2 = 0,
    # other 2 - 2 - 1 = -1: small first; then big (2 - 1 - 2 = -1) ties with
    # other (-1) and was submitted first, but only one GPU is left: it waits,
    # other takes it.
    starts = [d.workload_id for d in w.plans[-1].decisions if d.kind.value == "start"]
    assert starts == [w.names["small"], w.names["other"]]
    assert w.status("big") == "Queued" and w.code("big") is not None


def test_prune_repeats_until_no_victim_can_be_spared() -> None:
    """One reverse pass would keep c's own small job (docs/scheduling.md)."""
    w = World().pool(nodes=1, gpus=4).team("a").team("c")
    w.submit("r0", "a", 2, priority=50)
    for i in (1, 2, 3):
        w.submit(f"r{i}", "a", 0.25, priority=10)
    w.submit("r4", "c", 0.25, priority=10)
    w.submit("r5", "a", 0.25, priority=50)
    w.settle()
    w.submit("newcomer", "c", 2, priority=90)
    w.settle()
    assert w.status("newcomer") == "Running"
    assert w.preempted() == ["r0"]


def test_victim_order_follows_the_excess_recomputed_after_each_pick() -> None:
    # 16 GPUs; the owner's reserved gang of 5 is granted 5, the other 11 are
    # split 5.5/5.5, so a (9 running) is 3.5 over and b (7 running, started
    # later) 1.5 over. Largest excess first, recomputed after each pick:
    # a (3.5), a (2.5), then a tie at 1.5 goes to the most recently started
    # (b), then a (1.5 > 0.5), then the tie at 0.5 again to b.
    w = World().pool(nodes=2).team("owner", main=8).team("a").team("b")
    for i in range(9):
        w.submit(f"a{i}", "a", 1, running=True)
    w.advance(60)
    for i in range(7):
        w.submit(f"b{i}", "b", 1, running=True)
    w.submit("gang", "owner", 1, pods=5, wclass="reserved")
    plan = w.cycle()
    victims = [w.states[d.workload_id].name for d in plan.decisions
               if d.kind is DecisionKind.PREEMPT]
    assert [v[0] for v in victims] == ["a", "a", "b", "a", "b"]


def test_least_work_lost_spares_a_long_running_gang() -> None:
    """SPEC rev 3, 6.5 (from trying the system): a 2-GPU priority-50 job
    needs room; team x runs a priority-30 2-GPU job (since t=0) and a
    priority-30 64-GPU gang (since t=10). Revision 2 took the most recently
    started, the gang; now the least work lost goes first: the 2-GPU job
    (2 GPUs x 100 s against 64 GPUs x 90 s)."""
    w = World().pool(nodes=33, gpus=2).team("x").team("y")
    w.submit("small", "x", 2, priority=30, running=True)
    w.advance(10)
    w.submit("gang", "x", 2, pods=32, priority=30, running=True)
    w.advance(90)
    w.submit("urgent", "y", 2, priority=50)
    w.settle()
    assert w.preempted() == ["small"]
    assert w.status("gang") == "Running" and w.status("urgent") == "Running"


def test_work_lost_is_read_at_the_cycle_s_time() -> None:
    """Which of two Running jobs loses less work changes with time when their
    sizes differ: 1 GPU since t=0 against 4 GPUs since t=100. At t=120 the
    big one has lost less (80 against 120 GPU-seconds), at t=150 the small
    one has (150 against 200); revision 2 took the most recently started,
    the big one, at both times."""
    def victim(at: int) -> str:
        w = World().pool(nodes=1, gpus=5).team("x").team("y")
        w.submit("one", "x", 1, priority=30, running=True)
        w.advance(100)
        w.submit("big", "x", 4, priority=30, running=True)
        w.advance(at - 100)
        w.submit("urgent", "y", 1, priority=50)
        w.settle()
        (name,) = w.preempted()
        return name
    assert victim(120) == "big"
    assert victim(150) == "one"


def test_a_nomination_counts_against_the_burst_cap() -> None:
    """SPEC 6.6: while W waits for its victims to exit, its nomination counts
    as usage for caps. Team e (cap 8) runs 4 x 2 GPUs; its 2-GPU priority-75
    job takes one of its own priority-10 jobs (grace 30 s). Another e job would fit the
    free GPUs but not the cap, nomination counted, and waits; after the grace
    the nominee starts and e is at its cap, not over it."""
    w = World().pool(nodes=1, gpus=12, preemption_grace=30).team("e", limit=100, main=4)
    for i in range(4):
        w.submit(f"low{i}", "e", 2, priority=10, running=True)
    w.submit("hi", "e", 2, priority=75)
    w.submit("more", "e", 1, priority=5)  # outranks nothing of its own team
    w.cycle()  # hi first (priority), then more, in the same cycle
    assert w.code("hi") == "PREEMPTING" and len(w.preempted("low")) == 1
    assert w.status("more") == "Queued" and w.code("more") == "BURST_LIMIT_REACHED"
    w.settle()
    assert w.status("more") == "Queued" and w.code("more") == "BURST_LIMIT_REACHED"
    w.advance(30)
    w.settle()
    assert w.status("hi") == "Running" and w.usage("e") == 8


def test_a_burst_still_takes_back_what_it_lent_in_the_same_cycle() -> None:
    """SPEC 6.2 orders by priority before the deficit, and entitlements never
    stop work from using free GPUs: y's priority-50 jobs fill x's idle
    reservation first, then x's priority-30 jobs take it back (6.4) in the same
    cycle. Kept as the spec's outcome; docs/scheduling.md ("What a burst still
    preempts") proposes ordering work within its entitlement first."""
    w = World().pool(nodes=1, gpus=8).team("x", main=4).team("y")
    for i in range(8):
        w.submit(f"y{i}", "y", 1, priority=50)
    for i in range(4):
        w.submit(f"x{i}", "x", 1, priority=30)
    plan = w.cycle()
    started = {d.workload_id for d in plan.decisions if d.kind.value == "start"}
    taken = [d.workload_id for d in plan.decisions if d.kind.value == "preempt"]
    assert len(taken) == 4 and set(taken) <= started
    assert {w.names[f"y{i}"] for i in range(8)} >= set(taken)
    w.settle()
    assert w.running("x") == ["x0", "x1", "x2", "x3"] and len(w.running("y")) == 4


def test_a_team_takes_back_its_reservation_in_a_rack_the_pool_does_not_list() -> None:
    """The same rule with required topology at a level the pool's topology
    does not list (the racks are node labels only): the rack is searched as
    a filtered domain, and the borrower is still a victim whatever its
    priority."""
    w = World().pool(racks={"r1": 1, "r2": 1}, gpus=4).team("a").team("b", main=8)
    w.submit("borrower", "a", 4, priority=90, node_selector={"rack": "r1"}, running=True)
    w.submit("other", "a", 4, priority=90, node_selector={"rack": "r2"}, running=True)
    w.submit("owner", "b", 4, priority=10, topology={"level": "rack", "mode": "required"})
    w.settle()
    assert w.pools["main"].topology == ()
    assert w.status("owner") == "Running"
    assert w.preempted() == ["borrower"]


def test_same_team_higher_priority_displaces_work_that_ran_for_a_while() -> None:
    """The rule does not depend on how long the victim has run (work lost
    orders victims, it never protects one)."""
    w = World().pool(nodes=1).team("t")
    w.submit("low", "t", 8, priority=10, running=True)
    w.advance(100)
    w.submit("high", "t", 8, priority=60)
    w.settle()
    assert (w.status("low"), w.status("high")) == ("Preempted", "Running")


def test_an_excess_of_one_milli_gpu_is_an_excess() -> None:
    """o uses 4 GPUs and a 1-milli-GPU share (a memory share of 1 MiB is
    charged ceil(1 x 1000 / 81920) = 1 milli-GPU, SPEC 1), which leaves 3
    whole GPUs free; t's 4-GPU job brings t's demand to 4: entitled to 4
    each, o is 1 milli over. 6.4 lets t take o's work (excess(o) = 1 > 0,
    excess(t) with its job = 0 < 1), and 6.5 takes the share first (least
    work lost), after which the job fits."""
    w = World().pool(nodes=1).team("t").team("o")
    w.submit("four", "o", 4, running=True)
    w.advance(60)
    w.submit("tiny", "o", None, gpu_memory_mib=1, running=True)
    w.submit("job", "t", 4)
    w.settle()
    assert w.preempted() == ["tiny"]
    assert w.status("job") == "Running"


def test_within_a_subtree_the_team_over_its_entitlement_goes_first() -> None:
    """o (reservation 2, all of it o2's) has o1 running 4 GPUs in rack a and
    o2 2 GPUs in rack b, next to r's reserved 2. t (weight 3) submits 4 GPUs
    at o1's priority: the surplus (4) splits 3:1 at that level, so t is
    entitled to 3, o to 3 (o2 2 from its bucket, o1 1). 6.4: excess(o) = 3
    > excess(t) with the job = 1. 6.5 takes o1's work first (over its
    entitlement; o2 is at its own) though o2's has the lower priority, and
    the job fits in rack a. (Taking o2's first would bring excess(o) down
    to 1, no longer above t's, with the job still not fitting.)"""
    w = World().pool(racks={"a": 1, "b": 1}, gpus=4)
    w.team("t", weight=3).team("o", main=2).team("o1", "o").team("o2", "o", main=2)
    w.team("r", main=2)
    w.submit("held", "r", 2, wclass="reserved", node_selector={"rack": "b"}, running=True)
    w.submit("small", "o2", 2, priority=20, node_selector={"rack": "b"}, running=True)
    w.submit("big", "o1", 4, priority=40, node_selector={"rack": "a"}, running=True)
    w.submit("job", "t", 4, priority=40)
    w.settle()
    assert w.preempted() == ["big"]
    assert w.status("job") == "Running" and w.status("small") == "Running"


def test_a_victim_refused_at_first_passes_after_a_later_pick() -> None:
    """t (reservation 2, burst limit 100 %: cap 4) runs 2 GPUs at priority
    40; o's 6 GPUs at priority 40 are Starting. t's 4-GPU job at priority 50
    is entitled, with t, to 4 (t's cap), o to the other 4: excess(o) = 2,
    excess(t) with the job = 2. o's work comes first in 6.5's order
    (Starting) but 6.4 refuses it (2 is not less than 2); t's own work is
    taken (the job needs it for t's cap anyway), t's excess falls to 0, and
    then o's work passes and is taken: the job needs its GPUs too."""
    w = World().pool(nodes=1).team("t", limit=100, main=2).team("o")
    w.submit("mine", "t", 2, priority=40, running=True)
    w.instant_running = False
    w.submit("theirs", "o", 6, priority=40)
    w.settle()
    assert w.status("theirs") == "Starting"
    w.submit("job", "t", 4, priority=50)
    w.settle()
    assert w.preempted() == ["mine", "theirs"]
    assert w.status("job") == "Starting"


def test_the_most_recently_started_goes_first_also_against_time_zero() -> None:
    """SPEC 6.5: two Starting jobs of one team, same priority, no work lost
    yet; the one started at t=1 is taken before the one started at t=0."""
    w = World().pool(nodes=1).team("a").team("b", main=8)
    w.instant_running = False
    w.submit("first", "a", 4)
    w.settle()
    w.advance(1)
    w.submit("second", "a", 4)
    w.settle()
    assert (w.w("first").started_at, w.w("second").started_at) == (0, 1)
    w.submit("owner", "b", 4, wclass="reserved")
    w.settle()
    assert w.preempted() == ["second"]


def test_a_same_team_victim_too_small_to_keep_the_team_within_its_share_is_passed_over() -> None:
    """SPEC 6.4, same team: with W added and every victim removed the team may
    not end further over its entitlement than it was. One node of 5 GPUs; t
    runs big (2 GPUs) and small (1 GPU), o runs 1 GPU and waits for 2 more
    (refused: o would end as far over as t is). t's priority-50 want (2 GPUs)
    is entitled to its 2 first, then t and o split the other 3 at priority 10:
    t is entitled to 3.5 and uses 3. small is the cheapest victim (least work
    lost), and with the free GPU it would make room, but t would end at 4 >
    3.5; big is taken instead (t ends at 3) and small keeps running."""
    w = World().pool(nodes=1, gpus=5)
    w.team("o").team("t")
    w.submit("big", "t", 2, priority=10, running=True)
    w.submit("small", "t", 1, priority=10, running=True)
    w.submit("o1", "o", 1, priority=10, running=True)
    w.submit("o2", "o", 2, priority=10)
    w.settle()
    assert w.code("o2") == "FAIR_SHARE" and w.preempted() == []
    w.advance(10)
    w.submit("want", "t", 2, priority=50)
    w.settle()
    assert w.status("want") == "Running"
    assert w.preempted() == ["big"]
    assert w.status("small") == "Running" and w.usage("t") == 3
