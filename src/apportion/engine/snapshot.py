"""The frozen input of a scheduling cycle."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from apportion.domain.cluster import Node, Pool, pool_capacity
from apportion.domain.lifecycle import Exiting, WorkloadState
from apportion.domain.org import OrgTree
from apportion.engine.policy import SPEC_POLICY, Policy


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a cycle may look at. ``now`` is seconds (virtual or wall clock).

    ``workloads`` holds the non-terminal workloads (Pending, Queued, Starting,
    Running); ``exiting`` the preempted attempts still holding devices.
    ``version`` lets the service refuse to commit a plan made from a stale
    snapshot.
    """

    now: int
    tree: OrgTree
    pools: Mapping[str, Pool]
    nodes: tuple[Node, ...]
    workloads: tuple[WorkloadState, ...]
    exiting: tuple[Exiting, ...] = ()
    version: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "pools", MappingProxyType(dict(self.pools)))

    def pool_nodes(self, pool: str) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.pool == pool)

    def capacity(self, pool: str) -> int:
        return pool_capacity(self.pool_nodes(pool))


@dataclass(frozen=True, slots=True)
class Shortcuts:
    """The victim search's shortcuts, each of which only skips work whose
    outcome it knows; plans are the same with any of them off (tested).

    - ``bounds``: the cheap necessary conditions (``preemption/bounds.py``:
      enough reachable GPUs, teams that could ever pass 6.4) checked first;
    - ``failed_search_memo``: a search that failed is not repeated for a
      workload of the same shape while nothing changed (``Admission``);
    - ``exhaust``: a search whose whole candidate set would not make room
      fails without the greedy (``preemption/exhaust.py``);
    - ``first_pick``: the greedy stops at once when its first pick would
      find nothing (``preemption/greedy.py``).
    """

    bounds: bool = True
    failed_search_memo: bool = True
    exhaust: bool = True
    first_pick: bool = True


ALL_SHORTCUTS = Shortcuts()


@dataclass(frozen=True, slots=True)
class CycleConfig:
    """Settings of one cycle. ``cycle_id`` is recorded on every decision."""

    cycle_id: int = 0
    #: Off only to check that they change nothing (tests, benchmarks).
    shortcuts: Shortcuts = ALL_SHORTCUTS
    #: Upper bound on preemption candidates examined for one workload (safety valve).
    max_victim_candidates: int = 100_000
    extra: Mapping[str, str] = field(default_factory=dict)
    #: Another policy than the SPEC's, for ``apportion replay`` (engine/policy.py).
    policy: Policy = SPEC_POLICY
