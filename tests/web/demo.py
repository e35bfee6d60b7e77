"""A known organization for the dashboard tests, built through the REST API.

Pool ``main`` (topology ``rack``): n1 and n2 in rack r1, n3 in rack r2
(cordoned), 8 GPUs each. Teams research/{nlp, vision} and production;
production reserves 8 GPUs. After :func:`build` and one cycle with the agent's
reports: ``prod-train`` (production, reserved, 4 GPUs) and ``nlp-half`` (nlp,
elastic, 1/2 GPU) run; ``vision-huge`` (vision, 3 pods x 8 GPUs, gang) waits,
because only 16 GPUs take new pods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ADMIN_TOKEN = "apt_webadmin0001_" + "w" * 32
Call = Callable[..., Any]  # (method, path, headers=None, json=None) -> data


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Demo:
    call: Call
    agent: dict[str, str] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    reported: set[tuple[int, int]] = field(default_factory=set)
    cursor: int = 0
    #: what the agent reports at each heartbeat (a test may change it)
    nodes: list[dict[str, Any]] = field(default_factory=lambda: list(NODES))

    def token(self, name: str, role: str, teams: list[str] | None = None,
              pool: str | None = None) -> str:
        body = {"name": name, "role": role, "teams": teams or [], "pool": pool}
        secret: str = self.call("POST", "/v1/tokens", json=body)["token"]
        self.tokens[name] = secret
        return secret

    def submit(self, key: str, headers: dict[str, str] | None = None, **spec: Any) -> int:
        spec.setdefault("name", key)
        wid = int(self.call("POST", "/v1/workloads", headers, json=spec)["id"])
        self.ids[key] = wid
        return wid

    def heartbeat(self, nodes: list[dict[str, Any]] | None = None) -> None:
        """The agent's liveness report: without it the nodes turn ``unknown``
        once ``agent_timeout`` passes (a session-long server outlives it).
        ``nodes``: report these from now on."""
        if nodes is not None:
            self.nodes = nodes
        self.call("POST", "/v1/agent/heartbeat", self.agent, json={"nodes": self.nodes})

    def report_running(self) -> int:
        """The agent's part: report every new start decision as running."""
        n = 0
        while True:
            page = self.call("GET", f"/v1/agent/decisions?limit=100&cursor={self.cursor}",
                             self.agent)
            if not page:
                return n
            self.cursor = max(int(d["id"]) for d in page)
            for d in page:
                key = (d["workload_id"], d["attempt"])
                if d["kind"] != "start" or key in self.reported:
                    continue
                self.reported.add(key)
                res = self.call("POST", "/v1/agent/reports", self.agent, json={
                    "workload_id": d["workload_id"], "attempt": d["attempt"],
                    "run_id": d["run_id"], "status": "running"})
                n += bool(res.get("accepted"))


NODES = [{"name": "n1", "gpus": 8, "labels": {"rack": "r1"}},
         {"name": "n2", "gpus": 8, "labels": {"rack": "r1"}},
         {"name": "n3", "gpus": 8, "labels": {"rack": "r2"}}]


def build(call: Call) -> Demo:
    """Create the organization and submit the three workloads (no cycle run)."""
    demo = Demo(call)
    call("POST", "/v1/pools", json={"name": "main", "topology": ["rack"],
                                    "preemption_grace": 0})
    demo.agent = bearer(demo.token("agent-main", "agent", pool="main"))
    demo.heartbeat()
    call("POST", "/v1/nodes/n3/cordon", json={})
    for body in ({"slug": "research"}, {"slug": "nlp", "parent": "research"},
                 {"slug": "vision", "parent": "research"}, {"slug": "production"}):
        call("POST", "/v1/teams", json=body)
    call("PUT", "/v1/reservations/production/main", json={"gpus": 8})
    demo.submit("prod-train", team="production", **{"class": "reserved"}, gpus=4)
    demo.submit("nlp-half", team="nlp", gpus=0.5)
    demo.submit("vision-huge", team="vision", gpus=8, pods=3, gang=True)
    return demo
