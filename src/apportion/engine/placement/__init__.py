"""Placement engine (SPEC section 5): devices, fractions, gangs, topology.

Pure and deterministic; :class:`ClusterState` is the working copy of one
pool's devices that the scheduling cycle places into, preempts from and
nominates on.
"""

from apportion.engine.placement.cluster_state import ClusterState
from apportion.engine.placement.shapes import PodShape, ShapeMix
from apportion.engine.placement.types import (
    Counters,
    FailureKind,
    Owner,
    PlacementRequest,
    PlacementResult,
)

__all__ = [
    "ClusterState",
    "Counters",
    "FailureKind",
    "Owner",
    "PlacementRequest",
    "PlacementResult",
    "PodShape",
    "ShapeMix",
]
