"""The one JSON shape of a placement, used by the store (rows), the agent
protocol (decisions and the agent's state file) and the simulator's output:
``[{"node": "a1", "devices": [{"index": 0, "milli": 500}]}, ...]``, one entry
per pod in pod order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apportion.domain.workload import DeviceShare, Placement, PodPlacement


def placement_to_json(placement: Sequence[PodPlacement]) -> list[dict[str, Any]]:
    """Pods in order, each its node and its device shares."""
    return [{"node": p.node, "devices": [{"index": d.index, "milli": d.milli}
                                         for d in p.devices]} for p in placement]


def placement_from_json(raw: Sequence[Mapping[str, Any]] | None) -> Placement:
    """The inverse of :func:`placement_to_json` (``None`` or ``[]``: no placement)."""
    return tuple(
        PodPlacement(str(p["node"]), tuple(DeviceShare(int(d["index"]), int(d["milli"]))
                                           for d in p.get("devices") or ()))
        for p in raw or ()
    )
