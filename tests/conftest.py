"""Suite-wide hooks."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs PostgreSQL ``postgres``: those that ask for the
    ``pg_server`` fixture, and the ``postgresql`` case of a backend-parametrized
    fixture (``backend_url``, ``validation_api``: they ask for the server at run
    time). ``-m "not postgres"`` then runs the rest."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        if "pg_server" in names or "postgresql" in params.values():
            item.add_marker(pytest.mark.postgres)
