"""One pool's part of the working state: its ledger (usage, buckets, caps),
its devices, its entitlements, and the indexes kept over them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm
from typing import TYPE_CHECKING

from apportion.domain.cluster import Pool
from apportion.domain.lifecycle import WorkloadState
from apportion.engine.fairshare.types import Entitlements
from apportion.engine.owners import owner_of
from apportion.engine.placement import ClusterState, PlacementRequest
from apportion.engine.preemption.index import VictimIndex
from apportion.engine.usage_ledger import Ledger

if TYPE_CHECKING:
    from apportion.domain.reasons import Reason
    from apportion.domain.workload import WorkloadSpec
    from apportion.engine.placement import PlacementResult


@dataclass(slots=True)
class PoolState:
    """One pool's working state."""

    pool: Pool
    ledger: Ledger
    cluster: ClusterState
    capacity: int
    entitlements: Entitlements | None = None
    scale: int = 1
    scaled: dict[str, int] = field(default_factory=dict)
    #: Workload ids whose usage is counted here (placed or nominated), by id.
    users: dict[int, int] = field(default_factory=dict)
    #: Candidate victims (elastic placed work, nominations, holds), sorted.
    victims: VictimIndex = field(default_factory=VictimIndex)
    #: Workloads holding a starvation hold here (claims that are not usage).
    holders: set[int] = field(default_factory=set)
    #: The same ids by leaf team, for victim searches that look at a few teams.
    team_users: dict[str, set[int]] = field(default_factory=dict)
    node_labels: dict[str, Mapping[str, str]] = field(default_factory=dict)
    schedulable: frozenset[str] = frozenset()
    #: Requests made so far, by workload id: the spec and attempt they were
    #: made for, and the requests (immutable, so shared) by pods asked.
    requests: dict[int, tuple[WorkloadSpec, int, dict[int | None, PlacementRequest]]] = field(
        default_factory=dict
    )
    #: Memo of explain.never_reason (it depends on the spec, the tree and the
    #: nodes only, none of which change for one PoolState): id -> (spec, reason).
    never: dict[int, tuple[WorkloadSpec, Reason | None]] = field(default_factory=dict)
    #: Memo of :meth:`can_ever_place` by request shape (the nodes never change
    #: for one PoolState, and the answer depends on nothing else).
    ever: dict[tuple[object, ...], PlacementResult | None] = field(default_factory=dict)

    def charge(self, w: WorkloadState) -> int:
        return w.spec.charge(self.pool.gpu_memory_mib)

    def request(self, w: WorkloadState, pods: int | None = None) -> PlacementRequest:
        """The placement request of ``w`` here, optionally with fewer pods."""
        known = self.requests.get(w.id)
        if known is None or known[0] is not w.spec or known[1] != w.attempt:
            known = self.requests[w.id] = (w.spec, w.attempt, {})
        req = known[2].get(pods)
        if req is None:
            req = known[2][pods] = self._request(w, pods)
        return req

    def can_ever_place(self, w: WorkloadState) -> PlacementResult | None:
        """Could an empty pool hold ``w``'s min_pods (None) or why not (kept)."""
        req = self.request(w, w.spec.min_pods)
        shape = (req.pods, req.min_pods, req.charge, req.whole_devices, req.topology,
                 tuple(sorted(req.node_selector.items())), req.gpu_types,
                 req.cpu_milli, req.memory_mib)
        if shape not in self.ever:
            self.ever[shape] = self.cluster.can_ever_place(req)
        return self.ever[shape]

    def forget(self, wid: int) -> None:
        """Drop what is kept for workload ``wid`` (it left)."""
        self.requests.pop(wid, None)
        self.never.pop(wid, None)

    def _request(self, w: WorkloadState, pods: int | None) -> PlacementRequest:
        req = PlacementRequest.for_spec(w.spec, self.pool.gpu_memory_mib, owner_of(w))
        if pods is None or pods == req.pods:
            return req
        return PlacementRequest(
            pods=pods,
            min_pods=min(req.min_pods, pods),
            charge=req.charge,
            whole_devices=req.whole_devices,
            topology=req.topology,
            node_selector=req.node_selector,
            gpu_types=req.gpu_types,
            owner=req.owner,
            cpu_milli=req.cpu_milli,
            memory_mib=req.memory_mib,
        )

    def entitlement(self, team: str) -> Fraction:
        return self.entitlements.of(team) if self.entitlements is not None else Fraction(0)

    def set_entitlements(self, ents: Entitlements) -> None:
        """Keep the exact shares, and the same shares as integers over one common
        denominator, so the hot comparisons (excess, deficit) stay exact without
        building a Fraction each time."""
        if self.entitlements is ents:
            return
        self.entitlements = ents
        if ents.scale:  # computed with the shares (a plain dict, read only)
            self.scale = ents.scale
            self.scaled = ents.scaled if isinstance(ents.scaled, dict) else dict(ents.scaled)
            return
        scale = 1
        for value in ents.by_team.values():
            scale = lcm(scale, value.denominator)
        self.scale = scale
        self.scaled = {t: v.numerator * (scale // v.denominator) for t, v in ents.by_team.items()}

    def excess_key(self, team: str) -> int:
        """``excess(team) x scale``: exact, an int, ordered like the excess."""
        return self.ledger.usage_by_team[team] * self.scale - self.scaled.get(team, 0)

    def deficit_key(self, team: str) -> int:
        """``deficit(team) x scale``."""
        return -self.excess_key(team)

    def size_key(self, w: WorkloadState) -> int:
        """W's size (pods x per-pod charge, SPEC 1) x scale, for 6.2's order."""
        return w.spec.pods * self.charge(w) * self.scale

    def excess(self, team: str) -> Fraction:
        return self.ledger.usage(team) - self.entitlement(team)

    def deficit(self, team: str) -> Fraction:
        return self.entitlement(team) - self.ledger.usage(team)
