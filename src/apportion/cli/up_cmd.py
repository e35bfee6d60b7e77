"""``apportion up``: the whole system on one machine, with a demo organization.

In one process: the control plane (SQLite, scheduler loop, REST API) served by
uvicorn in a thread; one agent in a thread (sim executor with a rack-shaped demo
pool, or the local executor running real commands); and a demo stream that
creates an organization and submits workloads that burst and get preempted.
Prints the URL (the web dashboard, served by the same server) and the admin
token, then runs until Ctrl-C (or ``--duration``).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import secrets
import shutil
import signal
import socket
import string
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from apportion.agent.demo import DemoShape, DemoStream, create_org
from apportion.agent.executor import Executor
from apportion.agent.executors.local import LocalExecutor
from apportion.agent.executors.sim import SimExecutor
from apportion.agent.inventory import parse_shape, rack_nodes
from apportion.agent.loop import Agent, AgentOptions
from apportion.agent.state import StateFile
from apportion.client import ApportionClient

POOL = "demo"
SHOWN = ("Starting", "Running", "Completed", "Failed", "Preempted", "Cancelled")


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def up(
    executor: Annotated[str, typer.Option(help="sim (virtual demo pool) or local (real "
                                          "processes on this machine).")] = "sim",
    port: Annotated[int, typer.Option(help="TCP port; 0 or a busy port picks a free one.")
                    ] = 8080,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    data_dir: Annotated[Path | None, typer.Option(
        help="Keep the database, agent state and logs here (default: a temporary "
             "directory removed on exit).")] = None,
    shape: Annotated[str, typer.Option(help="sim: RACKSxNODESxGPUS of the demo pool.")
                     ] = "4x4x8",
    gpus: Annotated[int, typer.Option(help="local: GPUs of this machine when nvidia-smi "
                                      "is absent.")] = 8,
    speed: Annotated[float, typer.Option(help="sim: time factor (10 = a 60 s workload "
                                         "runs 6 s).")] = 10.0,
    duration: Annotated[float | None, typer.Option(
        "--duration", "--exit-after", help="Stop by itself after this many seconds.")] = None,
    demo: Annotated[bool, typer.Option(help="Create the demo organization and workload "
                                       "stream.")] = True,
    quiet: Annotated[bool, typer.Option(help="Do not print workload status changes.")
                     ] = False,
    log_level: Annotated[LogLevel, typer.Option(
        "--log-level", help="Of the log file; debug adds every HTTP request.")
                         ] = LogLevel.INFO,
) -> None:
    """Start apportion on this machine: control plane, an agent and a demo organization."""
    if executor not in ("sim", "local"):
        raise typer.BadParameter("sim or local", param_hint="--executor")
    try:
        racks, per_rack, node_gpus = parse_shape(shape)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--shape") from None
    is_temp = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="apportion-up-")) if data_dir is None else data_dir
    directory.mkdir(parents=True, exist_ok=True)
    configure_logging(directory / "apportion.log", log_level)
    token = _admin_token()
    stack = _Stack(directory)
    until = None if duration is None else time.monotonic() + duration
    previous = _stop_on_sigterm()
    try:
        url = stack.start_server(host, _port(host, port), token)
        admin = stack.own(ApportionClient(url, token, timeout=30.0))
        ex: Executor
        if executor == "sim":
            ex = SimExecutor(rack_nodes(racks, per_rack, node_gpus), speed=speed)
        else:
            ex = LocalExecutor(directory / "agent", node="local", gpus=gpus,
                               labels={"zone": "z1", "rack": "r1"})
        grace = 2 if executor == "sim" else 5
        admin.create_pool(POOL, topology=["zone", "rack"], preemption_grace=grace)
        agent_token = admin.create_token("agent-demo", "agent", pool=POOL)["token"]
        stack.start_agent(url, agent_token, ex)
        capacity = _wait_capacity(admin, until)
        _banner(url, token, executor, capacity, directory, is_temp)
        if demo and capacity > 0:
            create_org(admin, POOL, int(capacity))
            # a single local machine: 1-GPU units so that the demo still bursts and preempts
            per_node = node_gpus if executor == "sim" else 1
            stream = DemoStream(stack.own(ApportionClient(url, token, timeout=30.0)),
                                DemoShape(int(capacity), per_node, executor == "local",
                                          rack_gpus=per_rack * node_gpus
                                          if executor == "sim" else None),
                                duration_scale=1.0 if executor == "sim" else 0.1)
            stack.thread("apportion-demo", stream.run)
        _follow(admin, until, quiet)
    except KeyboardInterrupt:
        print("\napportion up: stopping", file=sys.stderr, flush=True)
    finally:
        try:
            stack.stop()
        finally:
            if is_temp:
                shutil.rmtree(directory, ignore_errors=True)
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, previous)


#: Loggers that write a line per HTTP request (the agent polls every 0.5 s):
#: only at ``--log-level debug``.
ACCESS_LOGGERS = ("httpx", "httpcore", "uvicorn.access")


def configure_logging(path: Path, level: LogLevel) -> None:
    """The log file at ``level``; per-request access lines only at debug."""
    number = getattr(logging, level.value.upper())
    logging.basicConfig(filename=path, level=number, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ACCESS_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if number <= logging.DEBUG
                                         else max(number, logging.WARNING))


def _stop_on_sigterm() -> Any:
    """SIGTERM (``kill``, a service manager) stops ``up`` as Ctrl-C does, so the
    ``finally`` that removes the temporary directory runs."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (a test calling ``up`` in a thread)
        return signal.getsignal(signal.SIGTERM)


class _Stack:
    """What ``up`` started, stopped in reverse order."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []
        self.clients: list[ApportionClient] = []
        self.agent: Agent | None = None
        self.server: Any = None
        self.server_thread: threading.Thread | None = None
        self.control: Any = None

    def own(self, client: ApportionClient) -> ApportionClient:
        self.clients.append(client)
        return client

    def thread(self, name: str, target: Any) -> None:
        t = threading.Thread(target=target, args=(self.stop_event,), name=name, daemon=True)
        t.start()
        self.threads.append(t)

    def start_server(self, host: str, port: int, token: str) -> str:
        import uvicorn

        from apportion.api.app import create_app
        from apportion.service.control import ControlPlane
        from apportion.service.settings import Settings

        settings = Settings.from_env(
            database_url=f"sqlite:///{self.directory / 'apportion.db'}",
            bootstrap_token=token, cycle_interval=1.0)
        self.control = ControlPlane(settings)
        self.control.start()
        config = uvicorn.Config(create_app(control=self.control), host=host, port=port,
                                log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.server_thread = threading.Thread(target=self.server.run, name="apportion-api",
                                              daemon=True)
        self.server_thread.start()
        end = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > end or not self.server_thread.is_alive():
                raise SystemExit(f"apportion up: the server did not start on {host}:{port}")
            time.sleep(0.05)
        return f"http://{host}:{port}"

    def start_agent(self, url: str, token: str, ex: Executor) -> None:
        api = self.own(ApportionClient(url, token, timeout=60.0, user_agent="apportion-agent"))
        agent_dir = self.directory / "agent"
        self.agent = Agent(api, ex, StateFile(agent_dir / f"agent-{POOL}.json"), POOL,
                           AgentOptions(poll_interval=0.5, heartbeat_interval=5.0))
        self.thread("apportion-agent", self.agent.run)

    def stop(self) -> None:
        self.stop_event.set()
        for t in reversed(self.threads):
            t.join(timeout=15)
        if self.agent is not None:
            with contextlib.suppress(Exception):
                self.agent.shutdown(stop_runs=True, timeout=15)
        for client in self.clients:
            client.close()
        if self.server is not None and self.server_thread is not None:
            self.server.should_exit = True
            self.server_thread.join(timeout=15)
        if self.control is not None:
            self.control.stop()


def _admin_token() -> str:
    alphabet = string.ascii_lowercase + string.digits
    ident = "".join(secrets.choice(alphabet) for _ in range(12))
    return f"apt_{ident}_{secrets.token_hex(24)}"


def _port(host: str, wanted: int) -> int:
    """``wanted`` if it is free, else a free port chosen by the system."""
    with socket.socket() as s:
        try:
            s.bind((host, wanted))
        except OSError:
            s.bind((host, 0))
        return int(s.getsockname()[1])


def _wait_capacity(admin: ApportionClient, until: float | None) -> float:
    end = time.monotonic() + 30
    while time.monotonic() < end and (until is None or time.monotonic() < until):
        capacity = float(admin.get_pool(POOL).get("capacity") or 0)
        if capacity > 0:
            return capacity
        time.sleep(0.1)
    return 0.0


def _banner(url: str, token: str, executor: str, capacity: float, directory: Path,
            is_temp: bool) -> None:
    kept = "removed on exit" if is_temp else "kept"
    print(f"""
apportion is up ({executor} executor, pool {POOL!r} with {capacity:g} GPUs)

  URL          {url}        (the dashboard: log in with the admin token)
  admin token  {token}
  API          {url}/v1     (docs: {url}/docs)

  Try:  apportion login --server {url} --token {token}
        apportion workloads list
        apportion top

  Data and log in {directory} ({kept}).  Ctrl-C stops everything.
""", flush=True)


def status_line(e: dict[str, Any]) -> str | None:
    """One printed line for a ``workload.status`` event (None: not shown). The
    workload is named by its name (from the event's ``data``; the id for events
    written before names were recorded)."""
    if e.get("status") not in SHOWN:
        return None
    at = str(e.get("at", ""))[11:19]
    name = (e.get("data") or {}).get("name") or f"#{e['workload_id']}"
    msg = f" - {e['message']}" if e.get("message") else ""
    return f"{at}  {name:<22}  {e['status']:<9}{msg}"


def _follow(admin: ApportionClient, until: float | None, quiet: bool) -> None:
    """Print workload status changes until ``until`` (or forever)."""
    after = 0
    while until is None or time.monotonic() < until:
        try:
            page = admin.list_events(type="workload.status", after=after, limit=100)
        except Exception as err:  # keep running: the stack may be restarting a piece
            logging.getLogger("apportion.up").warning("event feed: %s", err)
            page = None
        for e in page.items if page else []:
            after = max(after, int(e["id"]))
            line = status_line(e)
            if not quiet and line is not None:
                print(line, flush=True)
        if page is None or len(page.items) < 100:
            time.sleep(1.0)


def register(app: typer.Typer) -> None:
    """Add ``up`` to the ``apportion`` command."""
    app.command("up")(up)
