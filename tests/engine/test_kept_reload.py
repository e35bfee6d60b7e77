"""SPEC 6.5's cost puts Starting work before Running work (less work lost),
also when the cycle runs on a kept working state (``CycleCache``) that
re-reads the workloads the last plan touched."""

from __future__ import annotations

import pytest

from apportion.engine.kept_state import CycleCache
from tests.engine.harness import World


@pytest.mark.parametrize("kept", [False, True], ids=["fresh", "kept"])
def test_a_starting_workload_is_preempted_before_a_running_one(kept: bool) -> None:
    """Team a runs "old" (priority 10) and, from the last cycle, is starting
    "new" (priority 50); b's reserved job reclaims b's 1 GPU. Both are 1 GPU
    of elastic work of the same team: the Starting one goes, although the
    Running one has the lower priority (Running milli come first in the cost)."""
    cache = CycleCache()
    w = World(cache if kept else None).pool(nodes=1, gpus=2).team("a").team("b", main=1)
    w.submit("old", "a", 1, priority=10, running=True)
    w.instant_running = False  # "new" stays Starting
    w.submit("new", "a", 1, priority=50)
    w.settle()
    assert (w.status("old"), w.status("new")) == ("Running", "Starting")

    w.submit("owner", "b", 1, wclass="reserved")
    w.settle()
    assert w.preempted() == ["new"]
    assert (w.status("old"), w.status("owner")) == ("Running", "Starting")
    (p,) = w.preemptions
    assert (p.by, p.milli) == (w.names["owner"], 1000)
    if kept:
        assert cache.rebuilds == 1 and cache.kept > 0  # the kept state decided it
