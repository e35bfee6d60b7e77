"""Pure domain types: quantities, organization tree, cluster, workloads, lifecycle.

Standard library only. Nothing here does I/O or reads a clock.
"""
