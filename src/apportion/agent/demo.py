"""The demo organization and workload stream of ``apportion up``, through the client.

Organization (reservations scale with the pool's capacity C; for 4x4x8, C = 128):

    research   bursting priority 3, reservation 3/8 C (48)
      nlp      bursting priority 2, reservation 1/4 C (32)
      vision   bursting priority 1, reservation 1/8 C (16)
    production bursting priority 2, burst limit 50 %, reservation 1/4 C (32)

A quarter of the pool is unreserved. The stream opens with a scripted act that
shows bursting and preemption within seconds, then keeps submitting a seeded
random mix (reserved and elastic, fractions, gangs, rack topology) while at
most ``max_waiting`` workloads wait.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apportion.client import ApiError, ApportionClient, ServerUnreachable

log = logging.getLogger("apportion.demo")
TEAMS = ("nlp", "vision", "production")


@dataclass(frozen=True, slots=True)
class DemoShape:
    capacity: int  # GPUs in the pool
    node_gpus: int  # GPUs per node
    is_local: bool = False  # real commands (local executor) instead of durations only


def create_org(client: ApportionClient, pool: str, capacity: int) -> dict[str, int]:
    """Teams, bursting priorities, a burst limit and reservations; returns them."""
    client.create_team("research", name="Research", bursting_priority=3)
    client.create_team("nlp", name="NLP", parent="research", bursting_priority=2)
    client.create_team("vision", name="Vision", parent="research", bursting_priority=1)
    client.create_team("production", name="Production", bursting_priority=2,
                       burst_limit_percent=50)
    nlp, vision = capacity // 4, capacity // 8
    reservations = {"research": nlp + vision, "nlp": nlp, "vision": vision,
                    "production": capacity // 4}
    for team in ("research", "production", "nlp", "vision"):
        if reservations[team]:
            client.set_reservation(team, pool, reservations[team])
    return reservations


class DemoStream:
    """Submits demo workloads until ``stop`` is set; :meth:`run` is a thread target."""

    def __init__(self, client: ApportionClient, shape: DemoShape, *, seed: int = 7,
                 interval: float = 2.0, max_waiting: int = 12,
                 duration_scale: float = 1.0) -> None:
        self.client = client
        self.shape = shape
        self.rng = random.Random(seed)
        self.interval = interval
        self.max_waiting = max_waiting
        self.duration_scale = duration_scale
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

    # -- the scripted opening ---------------------------------------------------------------

    def _opening(self, stop: threading.Event) -> None:
        """Elastic work bursts into idle reservations; then their owners reclaim them."""
        g = self.shape.node_gpus
        nodes = max(1, self.shape.capacity // g)
        # production bursts far beyond its reservation (up to its 50 % cap) ...
        for _ in range(max(1, nodes * 3 // 8)):
            self._submit("production", "elastic", gpus=g, priority=40, duration=900,
                         kind="batch")
        # ... vision fills the rest of the surplus with low-priority sweeps ...
        for _ in range(max(1, nodes // 2)):
            self._submit("vision", "elastic", gpus=max(1, g // 2), pods=2, priority=20,
                         duration=900, kind="sweep")
        if stop.wait(min(3.0, self.interval * 1.5)):
            return
        # ... NLP takes its reservation back (reserved work preempts elastic) ...
        self._submit("nlp", "reserved", gpus=g, pods=max(1, nodes // 4), duration=300,
                     kind="train", gang=True)
        if stop.wait(min(3.0, self.interval * 1.5)):
            return
        # ... and a high-priority elastic job displaces lower-priority elastic work.
        self._submit("production", "elastic", gpus=g, priority=90, duration=200, kind="urgent")

    # -- the steady stream ------------------------------------------------------------------

    def _one_more(self) -> None:
        waiting = self.client.list_workloads(status=["Pending", "Queued"], limit=1)
        if (waiting.total_count or 0) >= self.max_waiting:
            return
        g, rng = self.shape.node_gpus, self.rng
        team = rng.choice(TEAMS)
        wclass = "reserved" if rng.random() < 0.35 else "elastic"
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
        priority = 100 if wclass == "reserved" else rng.choice([20, 50, 50, 75])
        self._submit(team, wclass, gpus=gpus, pods=pods, priority=priority,
                     duration=rng.choice([60, 120, 240, 480]), kind=kind, **extra)

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
