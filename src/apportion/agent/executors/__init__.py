"""Executors: sim (virtual nodes), local (processes on this machine), kubernetes (Jobs)."""
