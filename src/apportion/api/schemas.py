"""Pydantic models at the HTTP edge: request bodies (Create/Update) and the
shapes of responses (Read).

Requests are strict: a number must be a JSON number (``true`` and ``"0.5"`` are
refused), every number and id has a range (``domain/limits.py``), and an
unknown field is refused with a did-you-mean — the same error, word for word,
as the scenario parser's (``domain.errors.unknown_key``). Responses are
enforced: every route declares its ``Envelope[...]`` and FastAPI validates and
serialises what the route returns against it. Domain rules (priority ranges
per class, 0.25 GPU steps, leaf teams) stay in the domain."""

from __future__ import annotations

import math
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from apportion.api.schemas_usage import EtaRead
from apportion.domain import limits
from apportion.domain.cluster import Packing, TypicalPod, parse_typical_pods
from apportion.domain.errors import ValidationError as DomainValidationError
from apportion.domain.errors import did_you_mean
from apportion.domain.host import ALLOWED_CPU, ALLOWED_MEMORY
from apportion.domain.jobcontrol import ARRAY_FORMATS, MAX_DEPENDENCIES, ArraySpec, parse_array
from apportion.domain.org import SLUG_RE
from apportion.domain.quantities import ALLOWED_GPUS
from apportion.domain.reasons import ReasonCode
from apportion.domain.workload import (
    ALLOWED_GPU_TYPES,
    MAX_GPU_TYPES,
    TopologyMode,
    WorkloadClass,
    WorkloadSpec,
    make_spec,
    parse_gpu_types,
)
from apportion.service import inputs
from apportion.service.context import Role

T = TypeVar("T")
Gpus = int | float


def _number_in(lo: float, hi: float, allowed: str | None = None, want: str | None = None
               ) -> Any:
    """A JSON number (int or float, never a bool or a string) within lo..hi;
    out of range reads ``must be <want>, got <value>``."""
    allowed = allowed or f"a number {lo}..{hi}"
    want = want or allowed

    def check(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PydanticCustomError("number_type", "must be a number, got {got}",
                                      {"got": repr(value), "allowed": allowed})
        if isinstance(value, float) and not math.isfinite(value):
            raise PydanticCustomError("number_range", "must be a finite number, got {got}",
                                      {"got": repr(value), "allowed": allowed})
        if not lo <= value <= hi:
            raise PydanticCustomError("number_range", "must be {want}, got {got}",
                                      {"got": repr(value), "want": want,
                                       "allowed": allowed})
        return value

    return BeforeValidator(check)


def _json_int(value: object) -> object:
    """A JSON integer: ``4`` or ``4.0`` (JSON Schema's ``integer`` is any number
    without a fraction), never ``true`` or ``"4"``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("int_type", "must be an integer, got {got}",
                                  {"got": repr(value)})
    return value


#: An integer as JSON Schema reads one: ``Annotated[int, <bounds>, JSON_INT]`` (the
#: bounds before it, so that they show in the schema as minimum/maximum).
JSON_INT = BeforeValidator(_json_int)


def _int(lo: int, hi: int, description: str | None = None) -> Any:
    return Field(ge=lo, le=hi, description=description)


#: A JSON number of GPUs per pod (SPEC 1: 0.25, 0.5, 0.75 or a whole N).
PodGpus = Annotated[float | int, _number_in(0, limits.MAX_GPUS_PER_POD, ALLOWED_GPUS),
                    Field(json_schema_extra={"minimum": 0, "maximum": limits.MAX_GPUS_PER_POD},
                          description="0.25, 0.5, 0.75 or a whole number 1-"
                          f"{limits.MAX_GPUS_PER_POD}")]
ReservationGpus = Annotated[float | int, _number_in(0, limits.MAX_RESERVATION_GPUS),
                            Field(json_schema_extra={"minimum": 0,
                                                     "maximum": limits.MAX_RESERVATION_GPUS},
                                  description="GPUs, steps of 0.001")]
Cores = Annotated[float | int, _number_in(
    0, limits.MAX_CPU, f"{ALLOWED_CPU}, at most {limits.MAX_CPU}",
    f"a multiple of 0.001 ≥ 0 and ≤ {limits.MAX_CPU}"),
                  Field(json_schema_extra={"minimum": 0, "maximum": limits.MAX_CPU},
                        description="cores per pod, steps of 0.001")]
Days = Annotated[float | int, _number_in(0, 36500),
                 Field(json_schema_extra={"minimum": 0, "maximum": 36500})]
EpochSeconds = Annotated[float | int, _number_in(0, limits.MAX_EPOCH_SECONDS),
                         Field(json_schema_extra={"minimum": 0,
                                                  "maximum": limits.MAX_EPOCH_SECONDS})]
Version = Annotated[int, _int(0, limits.MAX_INT64, "the version you read; 409 if stale"), JSON_INT]
Seconds = Annotated[int, _int(0, limits.MAX_SECONDS, "seconds"), JSON_INT]
#: a time limit (issue 16): integer seconds >= 1
TimeLimit = Annotated[int, _int(1, limits.MAX_SECONDS, "seconds >= 1"), JSON_INT]
Slug = Annotated[StrictStr, Field(min_length=1, max_length=63)]
#: A team slug: a DNS label (``domain/org.py``).
TeamSlug = Annotated[StrictStr, Field(min_length=1, max_length=63, pattern=SLUG_RE.pattern)]
Name = Annotated[StrictStr, Field(min_length=1, max_length=255)]
Label = Annotated[StrictStr, Field(min_length=1, max_length=255)]
StrMap = dict[Annotated[StrictStr, Field(max_length=255)], Annotated[StrictStr,
                                                                   Field(max_length=4096)]]


def _gpu_types(value: object) -> object:
    """``gpu_type``: one type or a list of 1-16 (SPEC 3), checked by the domain so
    that ``[""]`` or 17 types read the same here as in a scenario file."""
    try:
        parse_gpu_types(value)
    except DomainValidationError as err:
        raise PydanticCustomError("gpu_type", err.message,
                                  {"allowed": err.allowed or ALLOWED_GPU_TYPES}) from None
    items = [value] if isinstance(value, str) else value
    assert isinstance(items, list | tuple)  # parse_gpu_types refuses anything else
    for item in items:
        if len(item) > 255:
            raise PydanticCustomError("gpu_type", "each type must have at most 255 "
                                      "characters", {"allowed": ALLOWED_GPU_TYPES})
    return value


#: A type name with a non-blank character (what the domain accepts).
GpuTypeName = Annotated[StrictStr, Field(min_length=1, max_length=255, pattern=r"\S")]
#: ``gpu_type`` of a submission: one type or a list of acceptable types.
GpuTypes = Annotated[
    GpuTypeName | Annotated[list[GpuTypeName], Field(min_length=1, max_length=MAX_GPU_TYPES)],
    BeforeValidator(_gpu_types),
    Field(description=f"one GPU type, or a list of 1-{MAX_GPU_TYPES} acceptable types "
          "(any of them will do)"),
]


def _nul_path(data: Any) -> list[str | int] | None:
    """Where the first string (or key) holding a NUL character is, or None."""
    if isinstance(data, str):
        return [] if "\x00" in data else None
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and "\x00" in key:
                return [key]
            found = _nul_path(value)
            if found is not None:
                return [key, *found]
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = _nul_path(value)
            if found is not None:
                return [i, *found]
    return None


class Strict(BaseModel):
    """A request body: unknown fields are refused, naming the closest known one."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        nul = _nul_path(data)
        if nul is not None:  # PostgreSQL cannot store it: refuse it on every backend
            raise PydanticCustomError(
                "nul_character", "must not contain a NUL character (\\u0000)",
                {"path": nul, "allowed": "text without NUL (\\u0000) characters"})
        if isinstance(data, dict):
            names = {f.alias or n for n, f in cls.model_fields.items()}
            for key in data:
                if key not in names:
                    raise PydanticCustomError(
                        "unknown_key", "unknown key{hint}",
                        {"key": str(key), "hint": did_you_mean(str(key), names),
                         "allowed": ", ".join(sorted(names))})
        return data


def _given(model: BaseModel, *, without: tuple[str, ...] = ("version",)) -> frozenset[str]:
    """The fields a PATCH body set (by field name), for ``inputs.Change.given``."""
    return frozenset(model.model_fields_set) - set(without)


def _version(body: int | None, if_match: int | None) -> int | None:
    """The version a write expects: the body's, else the ``If-Match`` header's."""
    return body if body is not None else if_match


def _typical(models: list[TypicalPodModel] | None) -> tuple[TypicalPod, ...] | None:
    """A pool's prior in the domain's terms (its rules: 0.25 GPU steps, ...)."""
    if models is None:
        return None
    return parse_typical_pods([m.model_dump() for m in models])


class Metadata(BaseModel):
    next_token: str | None = None
    total_count: int | None = None


class Envelope(BaseModel, Generic[T]):
    data: T
    metadata: Metadata
    request_id: str


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = {}


class ErrorBody(BaseModel):
    error: ErrorDetail
    request_id: str


# -- organizations and tokens ------------------------------------------------------
class OrgRead(BaseModel):
    slug: str
    name: str
    version: int
    created_at: str | None


class OrgCreate(Strict):
    slug: Slug
    name: Name | None = None

    def to_input(self) -> inputs.OrgNew:
        return inputs.OrgNew(slug=self.slug, name=self.name)


class OrgUpdate(Strict):
    name: Name | None = None
    version: Version | None = None

    def to_input(self, if_match: int | None = None) -> inputs.OrgChange:
        return inputs.OrgChange(given=_given(self), version=_version(self.version, if_match),
                                name=self.name)


class TokenCreate(Strict):
    name: Name
    role: Literal["org_admin", "team_lead", "member", "viewer", "agent"]
    teams: list[Slug] = Field(default=[], max_length=limits.MAX_TEAMS)
    pool: Label | None = None
    expires_at: EpochSeconds | None = None
    expires_in_days: Days | None = None

    def to_input(self) -> inputs.TokenNew:
        return inputs.TokenNew(
            name=self.name, role=Role(self.role), teams=tuple(self.teams), pool=self.pool,
            expires_at=None if self.expires_at is None else float(self.expires_at),
            expires_in_days=None if self.expires_in_days is None
            else float(self.expires_in_days))


class TokenRead(BaseModel):
    id: str
    name: str
    role: str
    teams: list[str]
    pool: str | None
    created_at: str | None
    expires_at: str | None
    revoked_at: str | None
    last_used_at: str | None


class TokenCreated(TokenRead):
    token: str = Field(description="the secret: shown only in the response that creates it")


class OrgCreated(BaseModel):
    organization: OrgRead
    admin_token: TokenCreated


# -- teams and reservations ---------------------------------------------------------
class TeamCreate(Strict):
    slug: TeamSlug
    name: Name | None = None
    parent: TeamSlug | None = None
    bursting_priority: Annotated[int, _int(1, 10), JSON_INT] = 1
    burst_limit_percent: Annotated[int, _int(0, 1_000_000), JSON_INT] | None = None

    def to_input(self) -> inputs.TeamNew:
        return inputs.TeamNew(slug=self.slug, name=self.name, parent=self.parent,
                              bursting_priority=self.bursting_priority,
                              burst_limit_percent=self.burst_limit_percent)


class TeamUpdate(Strict):
    name: Name | None = None
    parent: TeamSlug | None = None
    bursting_priority: Annotated[int, _int(1, 10), JSON_INT] | None = None
    burst_limit_percent: Annotated[int, _int(0, 1_000_000), JSON_INT] | None = None
    version: Version | None = None

    def to_input(self, if_match: int | None = None) -> inputs.TeamChange:
        return inputs.TeamChange(
            given=_given(self), version=_version(self.version, if_match), name=self.name,
            parent=self.parent, bursting_priority=self.bursting_priority,
            burst_limit_percent=self.burst_limit_percent)


class TeamRead(BaseModel):
    slug: str
    name: str
    parent: str | None
    bursting_priority: int
    burst_limit_percent: int | None
    children: list[str]
    is_leaf: bool
    reservations: dict[str, Gpus]
    version: int
    created_at: str | None


class ReservationSet(Strict):
    gpus: ReservationGpus
    version: Version | None = None

    def to_input(self, if_match: int | None = None) -> inputs.ReservationWanted:
        return inputs.ReservationWanted(gpus=self.gpus, version=_version(self.version, if_match))


class ReservationRead(BaseModel):
    team: str
    pool: str
    gpus: Gpus
    version: int
    updated_at: str | None


# -- pools, nodes, capacity -----------------------------------------------------------
DeviceMib = Annotated[int, _int(1, limits.MAX_GPU_MEMORY_MIB, "MiB per device"), JSON_INT]


class TypicalPodModel(Strict):
    """One shape of a pool's prior for ``fragmentation`` packing (docs/placement.md)."""

    gpus: PodGpus
    count: Annotated[int, _int(1, limits.MAX_TYPICAL_COUNT, "pods of this shape"),
                     JSON_INT] = 1
    cpu: Cores = 0
    memory_mib: Annotated[int, _int(0, limits.MAX_MEMORY_MIB, "host MiB per pod"),
                          JSON_INT] = 0


TYPICAL_PODS_DOC = ("the prior of fragmentation packing: pod shapes the pool typically runs, "
                    "with counts; null = one whole node of each node size; [] = none")


class PoolCreate(Strict):
    name: Slug
    gpu_type: Label | None = None
    gpu_memory_mib: DeviceMib = 81920
    topology: list[Label] = Field(default=[], max_length=16)
    start_delay: Seconds = 0
    preemption_grace: Seconds = 0
    starvation_hold_after: Seconds | None = None
    packing: Packing = Field(default=Packing.FRAGMENTATION, description="fragmentation | best_fit "
                             "(docs/placement.md)")
    typical_pods: list[TypicalPodModel] | None = Field(
        default=None, max_length=limits.MAX_TYPICAL_SHAPES, description=TYPICAL_PODS_DOC)
    default_time_limit: TimeLimit | None = None
    max_time_limit: TimeLimit | None = None

    def to_input(self) -> inputs.PoolSettings:
        return inputs.PoolSettings(
            name=self.name, gpu_type=self.gpu_type, gpu_memory_mib=self.gpu_memory_mib,
            topology=tuple(self.topology), start_delay=self.start_delay,
            preemption_grace=self.preemption_grace,
            starvation_hold_after=self.starvation_hold_after, packing=Packing(self.packing),
            typical_pods=_typical(self.typical_pods),
            default_time_limit=self.default_time_limit, max_time_limit=self.max_time_limit)


class PoolUpdate(Strict):
    gpu_type: Label | None = None
    gpu_memory_mib: DeviceMib | None = None
    topology: list[Label] | None = Field(default=None, max_length=16)
    start_delay: Seconds | None = None
    preemption_grace: Seconds | None = None
    starvation_hold_after: Seconds | None = None
    packing: Packing | None = None
    typical_pods: list[TypicalPodModel] | None = Field(
        default=None, max_length=limits.MAX_TYPICAL_SHAPES, description=TYPICAL_PODS_DOC)
    default_time_limit: TimeLimit | None = None
    max_time_limit: TimeLimit | None = None
    version: Version | None = None

    def to_input(self, if_match: int | None = None) -> inputs.PoolChange:
        return inputs.PoolChange(
            given=_given(self), version=_version(self.version, if_match),
            gpu_type=self.gpu_type, gpu_memory_mib=self.gpu_memory_mib,
            topology=None if self.topology is None else tuple(self.topology),
            start_delay=self.start_delay, preemption_grace=self.preemption_grace,
            starvation_hold_after=self.starvation_hold_after,
            packing=None if self.packing is None else Packing(self.packing),
            typical_pods=_typical(self.typical_pods),
            default_time_limit=self.default_time_limit, max_time_limit=self.max_time_limit)


class TypicalPodRead(BaseModel):
    gpus: Gpus
    count: int
    cpu: Gpus
    memory_mib: int


class AgentInfo(BaseModel):
    status: Literal["never", "connected", "silent"]
    last_heartbeat_at: str | None


class PoolRead(BaseModel):
    name: str
    gpu_type: str | None
    gpu_memory_mib: int
    topology: list[str]
    start_delay: int
    preemption_grace: int
    starvation_hold_after: int | None
    packing: str
    typical_pods: list[TypicalPodRead] | None = Field(description=TYPICAL_PODS_DOC)
    default_time_limit: int | None = Field(default=None, description="seconds; the time "
                                           "limit of work that gives none (null: none)")
    max_time_limit: int | None = Field(default=None, description="seconds; the largest time "
                                       "limit allowed (null: no maximum)")
    capacity: Gpus
    node_count: int
    agent: AgentInfo
    version: int
    created_at: str | None


class DeviceShareModel(BaseModel):
    index: int
    milli: int


class PodPlacementModel(BaseModel):
    node: str
    devices: list[DeviceShareModel]


class NodeRead(BaseModel):
    name: str
    pool: str
    gpus: int
    gpu_type: str | None
    gpu_memory_mib: int
    labels: dict[str, str]
    cpu: Gpus | None = Field(description="allocatable cores; null = not limited")
    memory_mib: int | None = Field(description="allocatable MiB; null = not limited")
    cpu_in_use: Gpus = Field(default=0, description="cores the Starting and Running pods "
                             "placed on the node request")
    memory_mib_in_use: int = Field(default=0, description="MiB the Starting and Running pods "
                                   "placed on the node request")
    health: Literal["ready", "down", "unknown"]
    cordoned: bool
    state: Literal["ready", "cordoned", "down", "unknown"]
    unavailable: list[DeviceShareModel]
    unavailable_gpus: Gpus
    last_seen_at: str | None
    version: int


class VersionBody(Strict):
    version: Version | None = None


class PoolCapacity(BaseModel):
    pool: str
    capacity: Gpus
    unavailable: Gpus
    reserved: Gpus
    used: Gpus
    free: Gpus


class TeamCapacity(BaseModel):
    team: str
    pool: str
    reservation: Gpus
    reserved_in_use: Gpus
    elastic_in_use: Gpus
    entitlement: Gpus
    burst_cap: Gpus | None


# -- workloads ------------------------------------------------------------------------
class TopologyModel(Strict):
    level: Label
    mode: TopologyMode = TopologyMode.REQUIRED


class DependencyModel(Strict):
    """A dependency (issue 16): run after workload ``id`` ended (``ok``: Completed;
    ``notok``: ended otherwise; ``any``: ended, however)."""

    id: Annotated[int, _int(1, limits.MAX_INT64, "a workload id"), JSON_INT]
    condition: Literal["ok", "any", "notok"] = "ok"


class WorkloadCreate(Strict):
    """SPEC section 3. Values are checked by the domain (errors name the field)."""

    name: Name
    team: TeamSlug
    class_: WorkloadClass = Field(default=WorkloadClass.ELASTIC, alias="class")
    priority: Annotated[int, _int(0, 1000, "reserved 100-1000, elastic 0-99"),
                        JSON_INT] | None = None
    gpus: PodGpus | None = None
    gpu_memory_mib: DeviceMib | None = None
    pods: Annotated[int, _int(1, limits.MAX_PODS), JSON_INT] = 1
    min_pods: Annotated[int, _int(1, limits.MAX_PODS), JSON_INT] | None = None
    gang: StrictBool | None = None
    topology: TopologyModel | None = None
    gpu_type: GpuTypes | None = None
    pool: Slug | None = None
    node_selector: StrMap = {}
    requeue_on_preemption: StrictBool = False
    command: list[Annotated[StrictStr, Field(max_length=65536)]] | Annotated[
        StrictStr, Field(max_length=65536)] | None = Field(
        default=None, description="argv as a list; a string is split as a POSIX shell "
        "would (quotes group, no variables or pipes)")
    image: Annotated[StrictStr, Field(min_length=1, max_length=1024)] | None = None
    env: StrMap = {}
    labels: StrMap = {}
    duration: Seconds | None = None
    cpu: Cores | None = None
    memory_mib: Annotated[float | int, _number_in(
        0, limits.MAX_MEMORY_MIB, f"{ALLOWED_MEMORY}, at most {limits.MAX_MEMORY_MIB}",
        f"a whole number of MiB ≥ 0 and ≤ {limits.MAX_MEMORY_MIB}"),
        Field(description="MiB per pod")] | None = None
    # job control (issue 16; docs/scheduling.md "Job control")
    time_limit: TimeLimit | None = Field(default=None, description="seconds of running "
                                         "after which the run is ended (Failed, TIME_LIMIT)")
    requeue_on_timeout: StrictBool = False
    after: list[DependencyModel] | None = Field(
        default=None, max_length=MAX_DEPENDENCIES, description="workloads this one waits for")
    hold: StrictBool = Field(default=False, description="submit held (reason HELD)")
    array: Annotated[StrictStr, Field(max_length=4096)] | None = Field(
        default=None, description=f"submit an array: {ARRAY_FORMATS}")

    def job_options(self) -> tuple[bool, ArraySpec | None]:
        """(submit held, the array to make) of this submission."""
        return self.hold, None if self.array is None else parse_array(self.array)

    def to_spec(self) -> WorkloadSpec:
        """The domain's WorkloadSpec (its rules: priority per class, 0.25 steps,
        min_pods <= pods, ...); what the service receives."""
        fields = self.model_dump(exclude_unset=True, by_alias=True,
                                 exclude={"hold", "array"})
        args = {k: v for k, v in fields.items() if v is not None}
        args["wclass"] = args.pop("class", WorkloadClass.ELASTIC)
        return make_spec(**args)


class CancelBody(Strict):
    version: Version | None = None
    message: Annotated[StrictStr, Field(max_length=4096)] | None = None


class ArrayCancelBody(Strict):
    """An array's cancel: a message only. An array has no version of its own, so
    a ``version`` here is refused (422 naming it) rather than accepted and not
    checked; to cancel one member only if it is unchanged, cancel it by its id
    with its version."""

    message: Annotated[StrictStr, Field(max_length=4096)] | None = None


class ReasonModel(BaseModel):
    code: ReasonCode = Field(description="SPEC section 7 (docs/scheduling.md)")
    message: str


class AttemptRead(BaseModel):
    attempt: int
    status: str
    pool: str | None
    started_at: str | None
    ended_at: str | None
    preempted_by: int | None


class PreemptionRead(BaseModel):
    """One preemption of a workload: ``whole`` ended the attempt; ``shrink``
    (SPEC 6.5) took ``pods`` and the workload kept running on the others."""

    at: str | None
    attempt: int
    kind: Literal["whole", "shrink"]
    by: int | None
    pods: list[int]
    gpus: Gpus


class TopologyRead(BaseModel):
    level: str
    mode: TopologyMode


class WorkloadSpecRead(BaseModel):
    """A workload's ``spec``: its submit body with every default filled in.
    ``gpu_type`` is null (any type), one type (a string), or the sorted list
    of two or more distinct acceptable types; a list of one reads back as
    that string."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    team: str
    class_: WorkloadClass = Field(alias="class")
    priority: int
    gpus: Gpus | None = None
    gpu_memory_mib: int | None = None
    pods: int = 1
    min_pods: int = 1
    gang: bool = False
    topology: TopologyRead | None = None
    gpu_type: str | list[str] | None = Field(
        default=None, description="null = any type; a string = that type; a list (2 or "
        f"more, sorted, at most {MAX_GPU_TYPES}) = any of them")
    pool: str | None = None
    node_selector: dict[str, str] = {}
    requeue_on_preemption: bool = False
    command: list[str] = []
    image: str | None = None
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    duration: int | None = None
    cpu: Gpus = Field(default=0, description="host cores per pod (0 = none asked for)")
    memory_mib: int = Field(default=0, description="host MiB per pod (0 = none asked for)")
    time_limit: int | None = Field(default=None, description="seconds (null: the pool's "
                                   "default_time_limit, if any)")
    requeue_on_timeout: bool = False
    after: list[dict[str, Any]] = Field(default=[], description="[{id, condition}]")


class WorkloadRead(BaseModel):
    id: int
    name: str
    team: str
    class_: WorkloadClass = Field(alias="class")
    priority: int
    status: str
    attempt: int
    pool: str | None
    reason: ReasonModel | None
    nominated: bool
    placement: list[PodPlacementModel]
    pods: int = Field(description="pods requested")
    pods_running: int = Field(description="pods the attempt holds while Starting or Running "
                              "(fewer than pods after a shrink); 0 otherwise")
    gpus: Gpus | None
    submitted_by: str
    submitted_at: str | None
    started_at: str | None
    running_at: str | None
    ended_at: str | None
    preempted_by: int | None
    attempts: list[AttemptRead]
    preemptions: list[PreemptionRead] = []
    spec: WorkloadSpecRead = Field(description="the normalised submit body")
    version: int
    held: bool = Field(default=False, description="held by a user (waits with reason HELD)")
    array_id: int | None = Field(default=None, description="the array it belongs to (the id "
                                 "of its first member)")
    array_index: int | None = None
    array_limit: int | None = Field(default=None, description="members of its array that "
                                    "may run at once (%N)")
    array_size: int | None = Field(default=None, description="members made (only in the "
                                   "answer to an array's submission)")


class WhyRead(BaseModel):
    workload_id: int
    status: str
    reason: ReasonModel | None
    explanation: str
    fair_share: list[TeamCapacity] = []


class Victim(BaseModel):
    workload_id: int
    gpus: Gpus


class VictimRead(BaseModel):
    """A workload this one preempted (one entry per attempt it ended)."""

    workload_id: int
    name: str | None = Field(description="null where the caller may not read its team")
    team: str
    attempt: int


class DryRunRead(BaseModel):
    pool: str | None
    starts_now: bool
    reason: ReasonModel | None
    victims: list[Victim]
    placement: list[PodPlacementModel]
    #: when it would start if submitted now (a forward run, service/eta.py)
    eta: EtaRead | None = None


class EventRead(BaseModel):
    id: int
    type: str
    at: str | None
    workload_id: int | None
    attempt: int | None
    status: str | None
    cause: str
    message: str
    data: dict[str, Any]


class AuditRead(BaseModel):
    id: int
    at: str | None
    actor: str
    token_id: str | None
    request_id: str | None
    action: str
    object: str
    outcome: str
    message: str
    before: Any = None
    after: Any = None
