"""apportion — a GPU workload scheduler for organizations."""

__version__ = "0.1.0"
