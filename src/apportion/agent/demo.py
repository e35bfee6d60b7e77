"""The demo organization and workload stream of ``apportion up``, through the client.

Organization (reservations scale with the pool's capacity C; for 4x4x8, C = 128):

    research   bursting priority 3, reservation 3/8 C (48)
      nlp      bursting priority 2, reservation 1/4 C (32)
      vision   bursting priority 1, reservation 1/8 C (16)
    production bursting priority 2, burst limit 50 %, reservation 1/4 C (32)

A quarter of the pool is unreserved. The stream opens with a scripted act that
shows, within its first ten seconds, bursting, fractions, an elastically
scaling sweep, reclaim by reserved work (preemption and a shrink), a
higher-priority elastic job displacing lower ones and a gang with required
rack topology; then it keeps submitting a seeded random mix (reserved and
elastic, fractions, gangs, rack topology) of work that can always run.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from apportion.client import ApiError, ApportionClient, ServerUnreachable

log = logging.getLogger("apportion.demo")
TEAMS = ("nlp", "vision", "production")


@dataclass(frozen=True, slots=True)
class DemoShape:
    capacity: int  # GPUs in the pool
    node_gpus: int  # GPUs per node
    is_local: bool = False  # real commands (local executor) instead of durations only
    rack_gpus: int | None = None  # GPUs in one rack (None: the whole pool is one rack)

    @property
    def rack_nodes(self) -> int:
        """Nodes in one rack: what a gang with required rack topology may span."""
        return max(1, (self.rack_gpus or self.capacity) // self.node_gpus)


def demo_reservations(capacity: int) -> dict[str, int]:
    """The demo's reservations for a pool of ``capacity`` GPUs."""
    nlp, vision = capacity // 4, capacity // 8
    return {"research": nlp + vision, "nlp": nlp, "vision": vision,
            "production": capacity // 4}


#: production's burst limit (percent of its reservation)
PRODUCTION_BURST = 50


def create_org(client: ApportionClient, pool: str, capacity: int) -> dict[str, int]:
    """Teams, bursting priorities, a burst limit and reservations; returns them."""
    client.create_team("research", name="Research", bursting_priority=3)
    client.create_team("nlp", name="NLP", parent="research", bursting_priority=2)
    client.create_team("vision", name="Vision", parent="research", bursting_priority=1)
    client.create_team("production", name="Production", bursting_priority=2,
                       burst_limit_percent=PRODUCTION_BURST)
    reservations = demo_reservations(capacity)
    for team in ("research", "production", "nlp", "vision"):
        if reservations[team]:
            client.set_reservation(team, pool, reservations[team])
    return reservations


class DemoStream:
    """Submits demo workloads until ``stop`` is set; :meth:`run` is a thread target.

    Every workload it submits can run: reserved work fits its team's
    reservation, elastic work fits the pool and production's burst cap, a gang
    with required topology fits one rack. It never stalls: when ``max_waiting``
    workloads wait, the one that has waited longest (past ``max_wait`` s) is
    cancelled to make room, so the cluster keeps changing."""

    def __init__(self, client: ApportionClient, shape: DemoShape, *, seed: int = 7,
                 interval: float = 2.0, max_waiting: int = 12,
                 duration_scale: float = 1.0, max_wait: float = 60.0) -> None:
        self.client = client
        self.shape = shape
        self.rng = random.Random(seed)
        self.interval = interval
        self.max_waiting = max_waiting
        self.max_wait = max_wait
        self.duration_scale = duration_scale
        self.reservations = demo_reservations(shape.capacity)
        self.submitted = 0
        self._n = 0

    def run(self, stop: threading.Event) -> None:
        try:
            self._opening(stop)
            while not stop.wait(self.interval):
                self._guarded(self._one_more)
        except ServerUnreachable:
            if not stop.is_set():
                log.warning("demo stream: the control plane went away")

    def cap(self, team: str) -> int:
        """The most GPUs ``team``'s elastic work may use (its burst cap, or the pool)."""
        if team == "production":
            return self.reservations[team] * (100 + PRODUCTION_BURST) // 100
        return self.shape.capacity

    # -- the scripted opening ---------------------------------------------------------------

    def _opening(self, stop: threading.Event) -> None:
        """Within seconds: bursting into idle reservations, fractions sharing devices,
        elastic scaling; then the owners reclaim (preemption and a shrink), a
        higher-priority elastic job displaces lower ones, a gang with required
        rack topology starts."""
        g = self.shape.node_gpus
        nodes = max(1, self.shape.capacity // g)
        cap = self.cap("production")
        cap_nodes = max(1, cap // g)
        # production's unit: a node, or on a pool whose burst cap is under a node
        # (one 8-GPU node: cap 3) half its cap, so that its work can run at all
        unit = g if cap >= g else max(1, cap // 2)
        # production bursts beyond its reservation, one unit short of its 50 % cap ...
        for _ in range(max(1, cap // unit - 1)):
            self._submit("production", "elastic", gpus=unit, priority=40, duration=900,
                         kind="batch")
        # ... fractions: notebooks sharing GPUs ...
        self._submit("nlp", "elastic", gpus=0.25, pods=4, priority=50, duration=600,
                     kind="notebook")
        self._submit("nlp", "elastic", gpus=0.5, pods=2, priority=50, duration=600,
                     kind="notebook")
        # ... vision fills the rest of the pool with an elastically scaling sweep
        # (it may lose as many pods as NLP's reclaim needs: that reclaim shrinks it,
        # the next one preempts whole workloads)
        rest = max(1, nodes - cap_nodes)
        nlp_pods = max(1, min(self.reservations["nlp"] // g, nodes // 4))
        self._submit("vision", "elastic", gpus=g, pods=rest, min_pods=max(1, rest - nlp_pods),
                     priority=20, duration=900, kind="sweep", gang=False)
        if stop.wait(min(3.0, self.interval * 1.5)):
            return
        # ... NLP takes its reservation back (reserved work shrinks the sweep) ...
        nlp_gpus = min(g, self.reservations["nlp"])
        if nlp_gpus >= 1:
            self._submit("nlp", "reserved", gpus=nlp_gpus, pods=nlp_pods, duration=300,
                         kind="train", gang=True)
        if stop.wait(min(3.0, self.interval * 1.5)):
            return
        # ... a high-priority elastic job displaces lower-priority elastic work ...
        self._submit("production", "elastic", gpus=unit, priority=90, duration=200,
                     kind="urgent")
        if stop.wait(min(3.0, self.interval * 1.5)):
            return
        # ... and vision's own reserved gang, all in one rack.
        vision_pods = max(1, min(self.reservations["vision"] // g, nodes // 4,
                                 self.shape.rack_nodes))
        if self.reservations["vision"] >= g:
            self._submit("vision", "reserved", gpus=g, pods=vision_pods, duration=240,
                         kind="gang", gang=True,
                         topology={"level": "rack", "mode": "required"})

    # -- the steady stream ------------------------------------------------------------------

    def _one_more(self) -> None:
        waiting = self.client.list_workloads(status=["Pending", "Queued"], limit=100)
        if (waiting.total_count or 0) >= self.max_waiting and not self._make_room(
                waiting.items):
            return
        g, rng = self.shape.node_gpus, self.rng
        team = rng.choice(TEAMS)
        wclass = "reserved" if rng.random() < 0.35 else "elastic"
        budget = self.reservations[team] if wclass == "reserved" else self.cap(team)
        if budget < 1:
            wclass, budget = "elastic", self.cap(team)
        choice = rng.random()
        extra: dict[str, Any] = {}
        if choice < 0.25:
            gpus: float = rng.choice([0.25, 0.5])
            pods = rng.randint(1, 4)
            kind = "notebook"
        elif choice < 0.8:
            gpus, pods, kind = rng.choice([1, 2, max(1, g // 2)]), 1, "job"
        else:
            gpus, pods, kind = g, rng.randint(2, 4), "gang"
            extra["topology"] = {"level": "rack", "mode": "preferred"}
        gpus = min(gpus, g)
        # only work that can run: within the reservation (reserved) or the cap (elastic)
        while pods > 1 and gpus * pods > budget:
            pods -= 1
        if gpus > budget:
            gpus = 0.5
        if wclass == "elastic" and pods > 1 and kind == "job":
            extra["min_pods"] = 1
        priority = 100 if wclass == "reserved" else rng.choice([20, 50, 50, 75])
        self._submit(team, wclass, gpus=gpus, pods=pods, priority=priority,
                     duration=rng.choice([60, 120, 240, 480]), kind=kind, **extra)

    def _make_room(self, waiting: list[dict[str, Any]]) -> bool:
        """Cancel the demo workload that has waited longest, once it has waited
        ``max_wait`` s; True if one was cancelled."""
        demo = [w for w in waiting if (w.get("spec") or {}).get("labels", {}).get("demo")]
        if not demo:
            return False
        oldest = min(demo, key=lambda w: int(w["id"]))
        try:
            submitted = datetime.fromisoformat(str(oldest["submitted_at"]).replace("Z", "+00:00"))
        except (KeyError, ValueError):
            return False
        if (datetime.now(UTC) - submitted).total_seconds() < self.max_wait:
            return False
        self.client.cancel_workload(int(oldest["id"]), message=(
            f"demo: waited over {self.max_wait:g} s; making room for new work"))
        return True

    # -- helpers ----------------------------------------------------------------------------

    def _submit(self, team: str, wclass: str, *, gpus: float, duration: int, kind: str,
                pods: int = 1, priority: int | None = None, **extra: Any) -> None:
        self._n += 1
        seconds = max(1, round(duration * self.duration_scale))
        spec: dict[str, Any] = {
            "name": f"{team}-{kind}-{self._n}", "team": team, "class": wclass, "gpus": gpus,
            "pods": pods, "duration": seconds, "labels": {"demo": "true"}, **extra,
        }
        if priority is not None:
            spec["priority"] = priority
        if self.shape.is_local:
            spec["command"] = ["sh", "-c", 'echo "$APPORTION_WORKLOAD_NAME pod '
                               '$APPORTION_POD_INDEX on GPUs $CUDA_VISIBLE_DEVICES"; '
                               f"sleep {seconds}"]
        self._guarded(lambda: self.client.submit_workload(spec))
        self.submitted += 1

    @staticmethod
    def _guarded(fn: Callable[[], Any]) -> None:
        try:
            fn()
        except ApiError as err:
            log.warning("demo stream: %s", err)
