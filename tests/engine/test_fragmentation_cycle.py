"""The cycle's fragmentation packing measures against the pool's work,
including work not routed yet (SPEC 5: running and waiting work)."""

from __future__ import annotations

from dataclasses import replace

from apportion.domain.cluster import NodeState
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
