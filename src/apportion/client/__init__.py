"""Typed HTTP client of the apportion REST API, shared by the CLI, the agent and tests.

Free of Typer/Rich and of the server's packages (import-linter enforces it).
"""

from apportion.client.base import Page, Response, paginate
from apportion.client.client import TERMINAL_STATUSES, ApportionClient
from apportion.client.errors import ApiError, ServerUnreachable
from apportion.client.sse import SseEvent, parse_sse

__all__ = [
    "TERMINAL_STATUSES",
    "ApiError",
    "ApportionClient",
    "Page",
    "Response",
    "ServerUnreachable",
    "SseEvent",
    "paginate",
    "parse_sse",
]
