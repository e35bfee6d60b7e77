"""Build an executor from its name and configuration (used by the CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from apportion.agent.executor import Executor
from apportion.agent.inventory import nodes_from_config, parse_shape, rack_nodes

EXECUTORS = ("sim", "local", "kubernetes")
DEFAULT_SHAPE = "4x4x8"


def build_executor(
    kind: str, config: Mapping[str, Any], data_dir: Path, *, speed: float | None = None,
    shape: str | None = None, pool: str = "default",
) -> Executor:
    """``kind`` is sim, local or kubernetes; ``config`` the executor configuration file.

    sim: nodes from ``config['nodes']``, else from ``shape`` (RACKSxNODESxGPUS, default
    4x4x8). local: this machine (nvidia-smi, else ``config['gpus']``). kubernetes: the
    cluster of the current kubeconfig or in-cluster service account.
    """
    if kind == "sim":
        from apportion.agent.executors.sim import SimExecutor

        nodes = nodes_from_config(config)
        if not nodes or shape is not None:
            nodes = rack_nodes(*parse_shape(shape or DEFAULT_SHAPE),
                               gpu_type=config.get("gpu_type", "h100"))
        return SimExecutor.from_config(config, speed=speed, nodes=nodes)
    if kind == "local":
        from apportion.agent.executors.local import LocalExecutor

        return LocalExecutor.from_config(config, data_dir)
    if kind == "kubernetes":
        from apportion.agent.executors.kubernetes import KubernetesExecutor

        return KubernetesExecutor.from_config({**config, "pool": pool})
    raise ValueError(f"unknown executor {kind!r}; one of {', '.join(EXECUTORS)}")
