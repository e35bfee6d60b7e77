"""``apportion agent``: run the agent of one pool (docs/agent.md)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from platformdirs import user_data_dir

from apportion.agent.factory import EXECUTORS, build_executor
from apportion.agent.inventory import load_config
from apportion.agent.loop import Agent, AgentOptions
from apportion.agent.state import StateFile
from apportion.client import ApportionClient


def agent(
    server: Annotated[str, typer.Option(envvar="APPORTION_SERVER",
                                        help="Control plane URL.")],
    token: Annotated[str, typer.Option(envvar=["APPORTION_AGENT_TOKEN", "APPORTION_TOKEN"],
                                       help="An agent token bound to the pool.")],
    pool: Annotated[str, typer.Option(help="The pool this agent runs.")],
    executor: Annotated[str, typer.Option(help="sim, local or kubernetes.")] = "sim",
    config: Annotated[Path | None, typer.Option(
        help="Executor configuration (YAML): nodes, speed, failures, ...")] = None,
    data_dir: Annotated[Path | None, typer.Option(
        help="State file and logs; default <user data dir>/apportion/agent-<pool>.")] = None,
    speed: Annotated[float | None, typer.Option(
        help="sim: time factor (10 = ten times faster).")] = None,
    shape: Annotated[str | None, typer.Option(
        help="sim: RACKSxNODESxGPUS when the config lists no nodes (default 4x4x8).")] = None,
    poll_interval: Annotated[float, typer.Option(help="Seconds between polls.")] = 1.0,
    heartbeat_interval: Annotated[float, typer.Option(help="Seconds between heartbeats.")
                                  ] = 10.0,
    duration: Annotated[float | None, typer.Option(
        help="Stop after this many seconds (tests, CI).")] = None,
    stop_runs_on_exit: Annotated[bool, typer.Option(
        help="Stop running workloads when the agent exits (default: leave them running "
             "for the next agent to adopt).")] = False,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Run the agent of one pool: heartbeats, decisions, executor, reports."""
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if executor not in EXECUTORS:
        raise typer.BadParameter(f"one of {', '.join(EXECUTORS)}", param_hint="--executor")
    directory = data_dir or Path(user_data_dir("apportion")) / f"agent-{pool}"
    try:
        settings = load_config(config)
        ex = build_executor(executor, settings, directory, speed=speed, shape=shape,
                            pool=pool)
    except (OSError, ValueError, ImportError) as err:
        typer.echo(f"apportion agent: {err}", err=True)
        raise typer.Exit(2) from None
    api = ApportionClient(server, token, timeout=60.0, user_agent="apportion-agent")
    runner = Agent(api, ex, StateFile(directory / f"agent-{pool}.json"), pool,
                   AgentOptions(poll_interval=poll_interval,
                                heartbeat_interval=heartbeat_interval))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"apportion agent: pool {pool}, executor {executor}, server {server}, "
          f"state in {directory}", file=sys.stderr, flush=True)
    try:
        runner.run(stop, until=None if duration is None else time.time() + duration)
    finally:
        runner.shutdown(stop_runs=stop_runs_on_exit)
        api.close()


def register(app: typer.Typer) -> None:
    """Add ``agent`` to the ``apportion`` command."""
    app.command("agent")(agent)
