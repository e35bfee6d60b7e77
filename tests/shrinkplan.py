"""Plans with a shrink in them (SPEC 6.5), for tests of everything around the
engine while the engine's victim search learns to produce them itself.

A shrink is the engine's ``Decision(PREEMPT, pods=...)``; these helpers add one
to a plan the real engine computed, so the store, the service, the agent and
the CLI see exactly what a shrinking cycle will give them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from apportion.domain.lifecycle import Status
from apportion.engine.plan import Decision, DecisionKind, Plan
from apportion.engine.snapshot import Snapshot


def with_shrink(plan: Plan, snapshot: Snapshot, workload_id: int, take: int, by: int,
                grace: int = 0) -> Plan:
    """``plan`` plus a shrink of ``workload_id`` by its ``take`` newest pods."""
    w = next(w for w in snapshot.workloads if w.id == workload_id)
    assert w.status is Status.RUNNING, w.status
    n = len(w.placement)
    pods = tuple(range(n - take, n))
    milli = sum(d.milli for p in w.placement[n - take:] for d in p.devices)
    shrink = Decision(DecisionKind.PREEMPT, workload_id, pool=w.pool, by=by, milli=milli,
                      exits_at=plan.now + grace, pods=pods)
    return replace(plan, decisions=(*plan.decisions, shrink))


def shrinking_run(real: Callable[..., Plan], workload_id: int, take: int, by: Callable[[], int],
                  grace: int = 0) -> Callable[..., Plan]:
    """A stand-in for ``service.scheduler._run``: the real cycle, plus a shrink of
    ``workload_id`` by ``take`` pods while the snapshot shows it Running with all
    its pods. The snapshot decides (not a flag here): a plan whose commit was
    refused as stale is recomputed, and must shrink again."""

    def run(loaded):  # type: ignore[no-untyped-def]
        plan = real(loaded)
        w = next((w for w in loaded.snapshot.workloads if w.id == workload_id), None)
        if w is None or w.status is not Status.RUNNING or len(w.placement) < w.spec.pods:
            return plan
        if plan.for_workload(workload_id):  # the engine decided about it itself
            return plan
        return with_shrink(plan, loaded.snapshot, workload_id, take, by(), grace)

    return run
