"""``apportion submit NAME [options] -- COMMAND ARGS...`` or ``-f workload.yaml``.

Builds the submit body of docs/api.md from flags (or a YAML/JSON file, flags winning)
and either submits it or, with ``--dry-run``, asks the server what would happen.
"""

from __future__ import annotations

import math
import re
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from apportion.api.schemas import TopologyModel, WorkloadCreate
from apportion.cli import common
from apportion.cli.common import NoHeadersOpt, OutputOpt, command, usage_error
from apportion.cli.config import ConfigError, load_config
from apportion.cli.output import Column, Format, emit, gpus_phrase, stdout
from apportion.cli.workloads_eta import eta_line
from apportion.client import ApiError, ApportionClient
from apportion.domain.errors import ValidationError, unknown_key
from apportion.domain.host import cpu_number, cpu_quantity, memory_quantity
from apportion.domain.jobcontrol import parse_array, parse_dependency, parse_time_limit
from apportion.domain.workload import TopologyMode, WorkloadClass

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(mi|gi|ti|m|g|t|mib|gib|tib)?\s*$", re.IGNORECASE)
_MEMORY_FACTOR = {"": 1, "m": 1, "mi": 1, "mib": 1, "g": 1024, "gi": 1024, "gib": 1024,
                  "t": 1024 * 1024, "ti": 1024 * 1024, "tib": 1024 * 1024}
_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_DURATION_FACTOR = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def register(app: typer.Typer) -> None:
    app.command("submit")(submit)


def parse_gpu_memory(text: str) -> int:
    """``20Gi`` → 20480, ``512Mi`` → 512, ``1024`` → 1024 (MiB)."""
    match = _MEMORY.match(text)
    if not match:
        raise usage_error(f"--gpu-memory {text!r}: use a size such as 20Gi or 512Mi")
    mib = float(match.group(1)) * _MEMORY_FACTOR[(match.group(2) or "").lower()]
    if mib <= 0 or mib != int(mib):
        raise usage_error(f"--gpu-memory {text!r}: must be a positive whole number of MiB")
    return int(mib)


def parse_cpu_flag(text: str) -> int | float:
    """``--cpu 8`` → 8 cores, ``500m`` → 0.5, ``0.25`` → 0.25 (Kubernetes forms)."""
    try:
        return cpu_number(cpu_quantity(text, "--cpu"))
    except ValidationError as err:
        raise usage_error(f"--cpu {text!r}: {err.message}; use cores (8, 0.5) or "
                          "milli-cores (500m), in steps of 1m") from None


def parse_memory_flag(text: str) -> int:
    """``--memory 64Gi`` → 65536 MiB; ``512Mi``, ``1G`` (10^9 bytes, rounded up to whole
    MiB) and the other Kubernetes suffixes too. A bare number is refused: Kubernetes
    would read bytes, a user probably meant MiB."""
    hint = "use a size with a unit: 64Gi, 512Mi, 1G (Ki Mi Gi Ti = powers of 1024; " \
           "k M G T = powers of 1000)"
    if text.strip().replace(".", "", 1).isdigit():
        raise usage_error(f"--memory {text!r}: no unit; {hint}")
    try:
        return memory_quantity(text, "--memory")
    except ValidationError as err:
        raise usage_error(f"--memory {text!r}: {err.message}; {hint}") from None


def parse_gpu_types_flag(values: list[str] | None) -> str | list[str] | None:
    """``--gpu-type a --gpu-type b`` or ``--gpu-type a,b`` → ``["a", "b"]``; one type
    → ``"a"`` (sent as ``gpu_type``; the server checks the names and the count)."""
    if not values:
        return None
    types: list[str] = []
    for value in values:
        for part in value.split(","):
            name = part.strip()
            if not name:
                raise usage_error(f"--gpu-type {value!r}: an empty type name; use a name "
                                  "such as h100, or several: v100-16g,v100-32g")
            if name not in types:
                types.append(name)
    return types[0] if len(types) == 1 else types


def parse_duration(text: str) -> int:
    """``3600``, ``90s``, ``30m``, ``2h``, ``1d`` → seconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise usage_error(f"--duration {text!r}: use seconds (3600) or 30m, 2h, 1d")
    return int(match.group(1)) * _DURATION_FACTOR[match.group(2)]


def parse_gpus(value: float) -> int | float:
    """Whole numbers go as integers (the server then reads "N whole GPUs")."""
    return int(value) if float(value).is_integer() else value


def parse_pairs(values: list[str] | None, option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in values or []:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise usage_error(f"{option} {item!r}: use KEY=VALUE")
        pairs[key] = val
    return pairs


def load_spec_file(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8") if path != "-" else typer.get_text_stream(
            "stdin").read()
        data = yaml.safe_load(text)
    except OSError as err:
        raise usage_error(f"-f {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise usage_error(f"-f {path}: not valid YAML ({err})") from err
    if not isinstance(data, dict):
        raise usage_error(f"-f {path}: must be a mapping of submit fields (see docs/api.md)")
    check_keys(data, f"-f {path}")
    return data


def check_keys(body: dict[str, Any], where: str) -> None:
    """Unknown fields are a usage error in the words of the server and the
    scenario parser: ``priorty: unknown key; did you mean 'priority'?``."""
    fields = {f.alias or n for n, f in WorkloadCreate.model_fields.items()}
    for key in body:
        if key not in fields:
            raise usage_error(f"{where}: {unknown_key(str(key), str(key), fields)}")
    topology = body.get("topology")
    if isinstance(topology, dict):
        for key in topology:
            if key not in TopologyModel.model_fields:
                raise usage_error(f"{where}: "
                                  f"{unknown_key(f'topology.{key}', str(key), ('level', 'mode'))}")


def _default_team() -> str | None:
    try:
        return load_config().get("default_team")
    except ConfigError:
        return None


DRY_RUN_COLUMNS = (
    Column("POOL", lambda d: d.get("pool")),
    Column("STARTS-NOW", lambda d: d.get("starts_now")),
    Column("REASON", lambda d: (d.get("reason") or {}).get("code")),
    Column("VICTIMS", lambda d: [str(v.get("workload_id")) for v in d.get("victims") or []]),
)
SUBMITTED_COLUMNS = (
    Column("ID", lambda w: w.get("id")),
    Column("NAME", lambda w: w.get("name")),
    Column("TEAM", lambda w: w.get("team")),
    Column("STATUS", lambda w: w.get("status")),
)


@command
def submit(
    name: Annotated[str | None, typer.Argument(
        help="Workload name (optional with -f when the file has one).", show_default=False)
    ] = None,
    cmd: Annotated[list[str] | None, typer.Argument(
        help="After --: the command and its arguments.", show_default=False)] = None,
    file: Annotated[str | None, typer.Option("-f", "--file", help="Submit body as YAML/JSON "
                                             "(- for stdin); flags override its fields.")] = None,
    team: Annotated[str | None, typer.Option("--team", "-t", help="Leaf team (default: "
                                             "config default_team).")] = None,
    gpus: Annotated[float | None, typer.Option("--gpus", help="Per pod: 0.25, 0.5, 0.75 "
                                               "or a whole number.")] = None,
    gpu_memory: Annotated[str | None, typer.Option("--gpu-memory", help="Per pod, instead "
                                                   "of --gpus: e.g. 20Gi, 512Mi.")] = None,
    cpu: Annotated[str | None, typer.Option("--cpu", help="Host CPU per pod: cores (8, "
                                            "0.5) or 500m.")] = None,
    memory: Annotated[str | None, typer.Option("--memory", help="Host memory per pod: "
                                               "64Gi, 512Mi, 1G.")] = None,
    pods: Annotated[int | None, typer.Option("--pods", min=1)] = None,
    min_pods: Annotated[int | None, typer.Option("--min-pods", min=1, help="Elastic "
                                                 "scaling: start with at least this many.")
                        ] = None,
    wclass: Annotated[WorkloadClass | None, typer.Option("--class", help="reserved or "
                                                         "elastic (default elastic).")] = None,
    priority: Annotated[int | None, typer.Option("--priority", "-p", help="reserved "
                                                 "100-1000, elastic 0-99.")] = None,
    topology: Annotated[str | None, typer.Option("--topology", help="Node label level "
                                                 "(e.g. rack) to keep pods together.")] = None,
    topology_mode: Annotated[TopologyMode, typer.Option("--topology-mode")
                             ] = TopologyMode.REQUIRED,
    gpu_type: Annotated[list[str] | None, typer.Option(
        "--gpu-type", help="An acceptable GPU type; several: repeat the flag or separate "
        "them with commas (v100-16g,v100-32g).")] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="Pin to this pool.")] = None,
    gang: Annotated[bool | None, typer.Option("--gang/--no-gang", help="All pods together "
                                              "(default when pods > 1).")] = None,
    requeue: Annotated[bool, typer.Option("--requeue", help="Start again when "
                                          "preempted.")] = False,
    duration: Annotated[str | None, typer.Option("--duration", help="Seconds of Running "
                                                 "(3600, 30m, 2h); for simulation.")] = None,
    image: Annotated[str | None, typer.Option("--image")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="KEY=VALUE, "
                                                  "repeatable.")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", "-l", help="KEY=VALUE, "
                                                    "repeatable.")] = None,
    node_selector: Annotated[list[str] | None, typer.Option("--node-selector", help="KEY="
                                                            "VALUE, repeatable.")] = None,
    time_limit: Annotated[str | None, typer.Option(
        "--time", help="Time limit (Slurm's formats: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
        "D-HH:MM:SS; a bare number is minutes; or 90m, 4h, 2d). The run is ended "
        "(Failed, TIME_LIMIT) when it has run this long.")] = None,
    requeue_on_timeout: Annotated[bool, typer.Option(
        "--requeue-on-timeout", help="At the time limit, start a new attempt instead of "
        "failing.")] = False,
    after: Annotated[list[str] | None, typer.Option(
        "--after", help="ID[:ok|:any|:notok]: wait for workload ID to complete (ok, the "
        "default), end however (any) or end other than Completed (notok); repeatable, "
        "comma-separated too.")] = None,
    hold: Annotated[bool, typer.Option("--hold", help="Submit held: it waits (HELD) until "
                                       "`apportion workloads release ID`.")] = False,
    array: Annotated[str | None, typer.Option(
        "--array", help="Submit an array: 0-99, 1,3,5-7 or 0-99:2, with %N to run at most N "
        "at once (0-99%10); members NAME[INDEX] see APPORTION_ARRAY_ID and "
        "APPORTION_ARRAY_INDEX.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the pool, whether it "
                                          "starts now or why not, and the victims; submit "
                                          "nothing.")] = False,
    output: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
) -> None:
    """Submit a workload (or ask what would happen with --dry-run)."""
    body = load_spec_file(file) if file else {}
    flags: dict[str, Any] = {
        "name": name, "team": team, "class": wclass.value if wclass else None,
        "priority": priority, "pods": pods, "min_pods": min_pods, "gang": gang,
        "gpu_type": parse_gpu_types_flag(gpu_type), "pool": pool, "image": image,
        "duration": parse_duration(duration) if duration else None,
        "requeue_on_preemption": True if requeue else None,
        "command": list(cmd) if cmd else None,
        "env": parse_pairs(env, "--env") or None,
        "labels": parse_pairs(label, "--label") or None,
        "node_selector": parse_pairs(node_selector, "--node-selector") or None,
        "topology": {"level": topology, "mode": topology_mode.value} if topology else None,
        "cpu": parse_cpu_flag(cpu) if cpu is not None else None,
        "memory_mib": parse_memory_flag(memory) if memory is not None else None,
        **job_flags(time_limit, requeue_on_timeout, after, hold, array),
    }
    if gpus is not None and gpu_memory is not None:
        raise usage_error("give --gpus or --gpu-memory, not both")
    if gpus is not None:
        flags["gpus"] = parse_gpus(gpus)
        body.pop("gpu_memory_mib", None)
    if gpu_memory is not None:
        flags["gpu_memory_mib"] = parse_gpu_memory(gpu_memory)
        body.pop("gpus", None)
    body.update({k: v for k, v in flags.items() if v is not None})
    body.setdefault("team", _default_team())
    _check_required(body)
    _check_finite(body)
    fmt = common.output_format(output)
    with common.open_client() as client:
        if dry_run:
            _dry_run(client, body, fmt, no_headers)
            return
        workload = client.submit_workload(body, idempotency_key=uuid.uuid4().hex)
    if fmt is Format.TABLE and not no_headers and workload.get("array_size"):
        size, aid = int(workload["array_size"]), workload["array_id"]
        stdout().print(f"array {aid} {body['name']!r} submitted to team {workload['team']}: "
                       f"{size} members (workloads {aid}..{aid + size - 1}); list them with "
                       f"`apportion workloads list --array {aid}`")
    elif fmt is Format.TABLE and not no_headers:
        held = " (held)" if workload.get("held") else ""
        stdout().print(f"workload {workload['id']} {workload['name']!r} submitted to team "
                       f"{workload['team']}: {workload['status']}{held}")
    else:
        emit(workload, fmt, SUBMITTED_COLUMNS, has_headers=not no_headers)


def job_flags(time_limit: str | None, requeue_on_timeout: bool, after: list[str] | None,
              hold: bool, array: str | None) -> dict[str, Any]:
    """The job-control fields (issue 16) of the flags; a bad value is a usage
    error naming the flag and what it accepts."""
    out: dict[str, Any] = {}
    try:
        if time_limit is not None:
            out["time_limit"] = parse_time_limit(time_limit, "--time")
        deps = [d for item in after or [] for d in item.split(",") if d.strip()]
        if deps:
            out["after"] = [parse_dependency(d, "--after").to_json() for d in deps]
        if array is not None:
            parse_array(array, "--array")
            out["array"] = array
    except ValidationError as err:
        raise usage_error(str(err)) from None
    if requeue_on_timeout:
        out["requeue_on_timeout"] = True
    if hold:
        out["hold"] = True
    return out


def _check_required(body: dict[str, Any]) -> None:
    if not body.get("name"):
        raise usage_error("a workload needs a name: apportion submit NAME ... (or name: in -f)")
    if not body.get("team"):
        raise usage_error("which team? use --team T, or set a default with "
                          "`apportion config set default_team T`")
    if body.get("gpus") is None and body.get("gpu_memory_mib") is None:
        raise usage_error("how much GPU per pod? use --gpus 0.5|1|4... or --gpu-memory 20Gi")


def _check_finite(value: Any, field: str = "") -> None:
    """JSON has no infinity or NaN: ``--gpus inf`` or ``gpus: .inf`` in a file is a
    usage error naming the field (it was a traceback from the JSON encoder)."""
    if isinstance(value, float) and not math.isfinite(value):
        allowed = (" (allowed: 0.25, 0.5, 0.75 or a whole number 1-1024)"
                   if field == "gpus" else "")
        raise usage_error(f"{field}: must be a finite number, got {value}{allowed}")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{field}.{key}" if field else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, f"{field}[{i}]")


def _dry_run(client: ApportionClient, body: dict[str, Any], fmt: Format,
             no_headers: bool) -> None:
    """Print what the scheduler would do now, naming the victims."""
    result = client.dry_run_workload(body)
    if fmt is not Format.TABLE:
        emit(result, fmt, DRY_RUN_COLUMNS, has_headers=not no_headers)
        return
    out = stdout()
    reason = result.get("reason") or {}
    out.print(f"pool:       {result.get('pool') or '-'}")
    if result.get("starts_now"):
        out.print("starts now: yes")
    else:
        out.print(f"starts now: no, {reason.get('code', 'waiting')}: "
                  f"{reason.get('message') or '-'}")
    if result.get("eta") is not None:
        out.print(eta_line(result["eta"]).replace("eta: ", "eta:        ", 1), markup=False,
                  highlight=False)
    victims = result.get("victims") or []
    if not victims:
        out.print("victims:    none")
        return
    out.print(f"victims:    {len(victims)}")
    for victim in victims:
        wid = victim.get("workload_id")
        try:
            w = client.get_workload(int(wid))
            who = f"{w['name']} (team {w['team']}, {w['class']}, priority {w['priority']}, " \
                  f"{w['status']})"
        except (ApiError, TypeError, ValueError):
            who = "(not visible to you)"
        out.print(f"  #{wid} {who}: {gpus_phrase(victim.get('gpus'))}")
