"""What every command shares: the client from the config, output options, error lines.

Exit codes (docs/cli.md): 0 ok; 1 a failure the server reported, or no server reachable;
2 a usage error (bad arguments, not logged in, bad config). Errors are one line on stderr
that says what to do; never a traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import httpx
import typer
from rich.markup import escape

from apportion import __version__
from apportion.cli.config import ConfigError, effective_server, effective_token, load_config
from apportion.cli.output import Format, stderr
from apportion.client import TERMINAL_STATUSES, ApiError, ApportionClient, ServerUnreachable

EXIT_FAILURE = 1
EXIT_USAGE = 2

#: Tests may plug an ``httpx.MockTransport`` in here.
TRANSPORT: httpx.BaseTransport | None = None

F = TypeVar("F", bound=Callable[..., Any])

OutputOpt = Annotated[Format | None, typer.Option(
    "-o", "--output", help="table, wide, json or yaml (default: config `output`, else table).",
    show_default=False,
)]
NoHeadersOpt = Annotated[bool, typer.Option("--no-headers", help="Print table rows only.")]


class CliError(Exception):
    """A failure to report as one line; ``exit_code`` 1 (failure) or 2 (usage)."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def usage_error(message: str) -> CliError:
    return CliError(message, EXIT_USAGE)


def output_format(value: Format | None) -> Format:
    """The ``-o`` value, else the config's ``output``, else ``table``."""
    if value is not None:
        return value
    try:
        configured = load_config().get("output")
    except ConfigError:
        configured = None
    try:
        return Format(configured) if configured else Format.TABLE
    except ValueError:
        return Format.TABLE


def open_client() -> ApportionClient:
    """A client for the configured server and token; a usage error when not logged in."""
    try:
        config = load_config()
    except ConfigError as err:
        raise usage_error(str(err)) from err
    server = effective_server(config)
    token = effective_token(config)
    if not server or not token:
        raise usage_error("not logged in: run `apportion login --server URL --token TOKEN`")
    return ApportionClient(server, token, transport=TRANSPORT,
                           user_agent=f"apportion-cli/{__version__}")


def describe_api_error(err: ApiError) -> str:
    """One line: the server's message, plus what to do about it where we know."""
    details = err.details
    text = err.message.rstrip(".")
    if err.code == "UNAUTHENTICATED":
        return f"{text}: log in again with `apportion login --server URL --token TOKEN`"
    if err.code == "FORBIDDEN":
        # the server's message already names the role and what is needed: once is enough
        role, required = details.get("role"), details.get("required")
        if role and required and str(role) not in text:
            return f"{text} (your role is {role}; this needs {_words(required)})"
        return text
    if err.code == "VERSION_CONFLICT":
        return f"{text}: it changed since you read it; read it again and retry"
    if err.code == "RATE_LIMITED":
        return f"{text}: too many requests, retry in a few seconds"
    if err.status >= 500:
        rid = f" (request id {err.request_id})" if err.request_id else ""
        return f"server error{rid}: {text}; the server log has the details"
    if err.code.startswith("HTTP_") and err.status in (404, 405):
        return (f"the server at this address does not offer this endpoint ({err.status}): "
                "is it an apportion server of the same version?")
    field, allowed = details.get("field"), details.get("allowed")
    if field and str(field) not in text:
        text = f"{field}: {text}"
    if allowed and err.code.startswith("VALIDATION") and _words(allowed) not in text:
        text = f"{text} (allowed: {_words(allowed)})"
    return text


def _words(value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)


def note(message: str) -> None:
    """A remark on stderr that is not an error (the exit code stays 0)."""
    stderr().print(f"[dim]note:[/] {escape(message)}", markup=True, highlight=False)


def report(message: str) -> None:
    stderr().print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


def command(func: F) -> F:
    """Run ``func`` turning known failures into one line and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CliError as err:
            report(err.message)
            raise typer.Exit(err.exit_code) from None
        except ApiError as err:
            report(describe_api_error(err))
            raise typer.Exit(EXIT_FAILURE) from None
        except ServerUnreachable as err:
            report(f"cannot reach the server at {err.server} ({err.reason}): is it running? "
                   "check the URL with `apportion config get server`")
            raise typer.Exit(EXIT_FAILURE) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def resolve_workload(client: ApportionClient, ref: str) -> dict[str, Any]:
    """A workload by id (digits) or by name.

    Names need not be unique: the one unfinished workload of that name wins; if all
    have finished, the newest; two or more unfinished ones are ambiguous (use the id).
    """
    if ref.isdigit():
        return client.get_workload(int(ref))
    matches = list(client.list_workloads(name=ref, limit=100).items)
    if not matches:
        raise CliError(f"no workload named {ref!r}: list them with `apportion workloads list -A`")
    live = [w for w in matches if w.get("status") not in TERMINAL_STATUSES]
    if len(live) == 1:
        return live[0]
    if not live:
        return max(matches, key=lambda w: int(w["id"]))
    ids = ", ".join(str(w["id"]) for w in sorted(live, key=lambda w: int(w["id"])))
    raise usage_error(f"{len(live)} unfinished workloads are named {ref!r} (ids {ids}): "
                      "use the id")
