"""The cycle's fragmentation packing measures against the pool's work,
including work not routed yet (SPEC 5: running and waiting work)."""

from __future__ import annotations

from dataclasses import replace

from apportion.domain.cluster import Node, NodeState
from tests.engine.harness import World


def test_a_waiting_gang_of_whole_nodes_keeps_a_node_whole() -> None:
    # Without the pending 3 x 8 gang in the pool's mix, the half GPU would go to
    # the empty node (it keeps n000's four free GPUs together for another
    # 4-GPU pod) and no node could ever hold an 8-GPU pod of the gang.
    w = World().pool(nodes=3).team("prod", main=8).team("nlp").team("vision")
    w.nodes[2] = replace(w.nodes[2], state=NodeState.CORDONED)  # counts, takes no pods
    w.submit("prod-train", "prod", 4, wclass="reserved", running=True)
    w.submit("nlp-half", "nlp", 0.5)
    w.submit("vision-huge", "vision", 8, pods=3, gang=True)
    w.settle()
    assert {p.node for p in w.w("prod-train").placement} == {"main-n000"}
    assert {p.node for p in w.w("nlp-half").placement} == {"main-n000"}
    assert (w.status("vision-huge"), w.code("vision-huge")) == ("Queued", "GANG_WAITING")
    assert "1 fit now" in w.w("vision-huge").reason.message


def test_with_no_large_work_in_sight_a_share_still_keeps_an_empty_node_whole() -> None:
    # The pool's mix is one 4-GPU job and one half GPU: measured against those
    # alone (FGD's measure), the half GPU strands 0.5 GPU on the empty node and
    # 3.5 next to the 4-GPU job, so it would open the empty node. The prior of
    # a whole node (SPEC 5: "plus a configured prior") keeps it whole for the
    # 8-GPU job that comes next (found by the dashboard's browser test).
    w = World().pool(nodes=2).team("prod", main=8).team("nlp")
    w.submit("prod-train", "prod", 4, wclass="reserved", running=True)
    w.submit("nlp-half", "nlp", 0.5)
    w.settle()
    assert {p.node for p in w.w("nlp-half").placement} == {"main-n000"}
    w.submit("sweep", "nlp", 8, priority=50)
    w.settle()
    assert w.status("sweep") == "Running"
    assert {p.node for p in w.w("sweep").placement} == {"main-n001"}


def test_on_nodes_of_two_sizes_a_share_goes_to_the_small_node() -> None:
    # A 4-GPU and an 8-GPU node, both empty: the whole-node prior has a pod of
    # each size; the 8-GPU shape can never run on the 4-GPU node, so a share
    # placed there strands nothing more for it, and the large node stays whole.
    w = World().pool(nodes=0).team("nlp")
    w.nodes += [Node("big", "main", 8), Node("small", "main", 4)]
    w.submit("half", "nlp", 0.5)
    w.settle()
    assert {p.node for p in w.w("half").placement} == {"small"}


def test_a_pool_s_typical_pods_replace_the_whole_node_prior() -> None:
    # The same pool told that it runs half GPUs and 4-GPU jobs only (no whole
    # nodes): measured against those, the half GPU strands least on the empty
    # node, as FGD would place it; with no prior at all ([]), the same.
    for typical in ([{"gpus": 0.5, "count": 4}, {"gpus": 4}], []):
        w = World().pool(nodes=2, typical_pods=typical).team("prod", main=8).team("nlp")
        w.submit("prod-train", "prod", 4, wclass="reserved", running=True)
        w.submit("nlp-half", "nlp", 0.5)
        w.settle()
        assert {p.node for p in w.w("nlp-half").placement} == {"main-n001"}, typical
    # told that it runs 8-GPU jobs, it keeps the empty node whole
    w = World().pool(nodes=2, typical_pods=[{"gpus": 8, "count": 1}]).team(
        "prod", main=8).team("nlp")
    w.submit("prod-train", "prod", 4, wclass="reserved", running=True)
    w.submit("nlp-half", "nlp", 0.5)
    w.settle()
    assert {p.node for p in w.w("nlp-half").placement} == {"main-n000"}


def test_a_share_skips_a_cpu_only_node_and_a_full_one() -> None:
    """A node without GPUs (CPU-only work runs there) and a full node have no
    device a half GPU could share: it goes to the third node, next to the
    4-GPU job already there (that node's empty GPUs stay whole for another
    4-GPU pod)."""
    w = World().pool(nodes=2).team("prod", main=16).team("nlp")
    w.nodes.append(Node("main-cpu", "main", 0))
    w.submit("full", "prod", 8, wclass="reserved", running=True)
    w.submit("four", "prod", 4, wclass="reserved", running=True)
    w.submit("nlp-half", "nlp", 0.5)
    w.settle()
    (full,) = {p.node for p in w.w("full").placement}
    (four,) = {p.node for p in w.w("four").placement}
    assert full != four and "main-cpu" not in (full, four)
    assert {p.node for p in w.w("nlp-half").placement} == {four}
    assert w.status("nlp-half") == "Running"
