from tests.pgfixture import backend_url, pg_server  # noqa: F401
