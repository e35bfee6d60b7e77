"""The scheduler: pure and deterministic. Imports ``apportion.domain`` only.

``run_cycle(snapshot, config) -> Plan`` (cycle.py) is the one entry point the
simulator, the server and the dry-run API all call.
"""
