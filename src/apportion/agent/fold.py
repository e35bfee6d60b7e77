"""Folding a batch of decisions before the agent applies it (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apportion.agent.model import Instruction


@dataclass(frozen=True, slots=True)
class Folded:
    """``superseded``: run ids of starts that must not start (stopped in the same
    batch, or an older attempt of a workload whose newer attempt is in it);
    ``taken``: per run id, the pods shrinks of the batch take (a start in the
    same batch starts without them)."""

    superseded: frozenset[str]
    taken: dict[str, tuple[int, ...]]


def fold(batch: Sequence[Instruction]) -> Folded:
    stopped = {d.run_id for d in batch if d.kind == "stop"}
    newest: dict[int, int] = {}
    taken: dict[str, set[int]] = {}
    for d in batch:
        if d.kind == "start":
            newest[d.workload_id] = max(newest.get(d.workload_id, 0), d.attempt)
        elif d.kind == "shrink":
            taken.setdefault(d.run_id, set()).update(d.pods)
    superseded = frozenset(d.run_id for d in batch if d.kind == "start" and (
        d.run_id in stopped or d.attempt < newest[d.workload_id]))
    return Folded(superseded, {rid: tuple(sorted(p)) for rid, p in taken.items()})
