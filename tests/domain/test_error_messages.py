"""What a user reads when input is refused: the field, what is wrong (with the
value given) and what is allowed, in one line (``str(ValidationError)``, which
the API's 422 and the CLI print as they are)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from apportion.domain.cluster import Node, Pool
from apportion.domain.errors import ValidationError, unknown_key
from apportion.domain.host import cpu_quantity
from apportion.domain.org import OrgTree, Team, build_tree, validate_reservations
from apportion.domain.quantities import parse_gpu_amount
from apportion.domain.workload import make_spec

GPUS = "(allowed: 0.25, 0.5, 0.75 or a whole number 1-1024)"
TYPES = "(allowed: a GPU type name, or a list of 1-16 of them)"
AMOUNT = "(allowed: a number of GPUs >= 0, in steps of 0.001)"

SPEC_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"name": ""}, "name: must be a string of 1-255 characters, got ''"),
    ({"team": ""}, "team: must name a team"),
    ({"wclass": "gold"}, "class: 'gold' is not a class (allowed: reserved, elastic)"),
    ({"wclass": "reserved", "priority": 99},
     "priority: 99 is out of range (allowed: 100-1000 for reserved work)"),
    ({"priority": 100}, "priority: 100 is out of range (allowed: 0-99 for elastic work)"),
    ({"priority": "high"},
     "priority: must be an integer, got 'high' (allowed: 0-99 for elastic work)"),
    ({"pods": 0}, "pods: 0 is out of range (allowed: an integer 1..10000)"),
    ({"pods": 2.5}, "pods: must be an integer, got 2.5 (allowed: an integer 1..10000)"),
    ({"pods": 2, "min_pods": 3}, "min_pods: 3 is out of range (allowed: an integer 1..pods (2))"),
    ({"gang": "yes"}, "gang: must be true or false, got 'yes'"),
    ({"gpus": None}, f"gpus: a GPU request is required {GPUS}"),
    ({"gpus": 1, "gpu_memory_mib": 10},
     "gpus: give either gpus or gpu_memory_mib, not both (allowed: exactly one of the two)"),
    ({"gpus": 0.3}, f"gpus: 0.3 is not a valid GPU request {GPUS}"),
    ({"gpus": 2000}, f"gpus: 2000 is more GPUs than one pod may ask for {GPUS}"),
    ({"gpus": "lots"}, f"gpus: must be a number, got 'lots' {GPUS}"),
    ({"gpus": float("inf")}, f"gpus: must be a finite number, got inf {GPUS}"),
    ({"gpus": None, "gpu_memory_mib": 0},
     "gpu_memory_mib: must be a whole number of MiB >= 1, got 0"
     " (allowed: a whole number of MiB 1..16777216)"),
    ({"topology": {"level": "rack", "mode": "sometimes"}},
     "topology.mode: 'sometimes' is not a mode (allowed: required, preferred)"),
    ({"topology": {"level": "rack", "zone": "a"}},
     "topology.zone: unknown key (allowed: level, mode)"),
    ({"topology": {"level": ""}}, "topology.level: must name a topology level (a label key)"),
    ({"topology": "rack"}, "topology: must be {level: <label key>, mode: required|preferred}"),
    ({"requeue_on_preemption": "no"}, "requeue_on_preemption: must be true or false"),
    ({"command": 3}, "command: must be a string or a list of strings"),
    ({"command": "a 'b"},
     "command: cannot split \"a 'b\" into arguments: No closing quotation"
     " (allowed: a list of strings, or a string split as a shell would)"),
    ({"env": [1]}, "env: must be a mapping of strings to strings"),
    ({"labels": {"a": None}}, "labels.a: keys and values must be strings"),
    ({"gpu_type": 3}, f"gpu_type: must be a type or a list of types, got 3 {TYPES}"),
    ({"gpu_type": []}, f"gpu_type: must list 1-16 types, got 0 {TYPES}"),
    ({"gpu_type": [""]}, f"gpu_type: each type must be a non-empty string, got '' {TYPES}"),
    ({"pool": ""}, "pool: must be a non-empty string, got ''"),
    ({"image": ""}, "image: must be a non-empty string, got ''"),
]


@pytest.mark.parametrize(("kwargs", "text"), SPEC_ERRORS)
def test_a_refused_workload_spec_says_which_field_and_what_is_allowed(
    kwargs: dict[str, Any], text: str
) -> None:
    given: dict[str, Any] = {"name": "w", "team": "t", "gpus": 1, **kwargs}
    with pytest.raises(ValidationError) as err:
        make_spec(**given)
    assert str(err.value) == text
    assert err.value.field == text.split(":")[0]


def _tree(**milli_in_main: int) -> OrgTree:
    teams = [Team("research"), Team("nlp", parent="research"),
             Team("vision", parent="research"), Team("production")]
    return build_tree(teams, {(team, "main"): m for team, m in milli_in_main.items()})


OTHER_ERRORS: list[tuple[Callable[[], object], str]] = [
    (lambda: Node("", "p", 1), "name: must not be empty"),
    (lambda: Node("n", "p", -1), "gpus: must be an integer >= 0, got -1"),
    (lambda: Node("n", "p", 1, gpu_memory_mib=0), "gpu_memory_mib: must be >= 1"),
    (lambda: Node("n", "p", 1, cpu_milli=-1),
     "cpu_milli: must be an integer >= 0, got -1 (allowed: milli-CPU >= 0 or null)"),
    (lambda: Node("n", "p", 1, memory_mib=True),
     "memory_mib: must be an integer >= 0, got True (allowed: MiB >= 0 or null)"),
    (lambda: Pool(""), "name: must not be empty"),
    (lambda: Pool("p", packing="x"),  # type: ignore[arg-type]
     "packing: 'x' is not a packing policy (allowed: fragmentation, best_fit)"),
    (lambda: Pool("p", start_delay=-1), "start_delay: must be an integer >= 0 seconds, got -1"),
    (lambda: Pool("p", preemption_grace=1.5),  # type: ignore[arg-type]
     "preemption_grace: must be an integer >= 0 seconds, got 1.5"),
    (lambda: Pool("p", starvation_hold_after=-2),
     "starvation_hold_after: must be seconds >= 0 or null, got -2"),
    (lambda: Pool("p", topology=("rack", "rack")), "topology: levels must be distinct"),
    (lambda: parse_gpu_amount(-1, "reservations.main"),
     f"reservations.main: must be >= 0, got -1 {AMOUNT}"),
    (lambda: parse_gpu_amount(10**9, "reservations.main"),
     f"reservations.main: must be <= 1000000, got 1000000000 {AMOUNT}"),
    (lambda: parse_gpu_amount(0.0001, "reservations.main"),
     f"reservations.main: 0.0001 has more than 3 decimals {AMOUNT}"),
    (lambda: parse_gpu_amount("x", "reservations.main"),
     f"reservations.main: must be a number, got 'x' {AMOUNT}"),
    (lambda: cpu_quantity("0.0001", "nodes[0].cpu"),
     "nodes[0].cpu: '0.0001' is finer than 0.001 cores (1m)"
     " (allowed: cores (8, 0.5) or milli-cores (500m))"),
    (lambda: validate_reservations(_tree(research=60000, production=30000), {"main": 80000}),
     "reservations.main: top-level teams reserve 90 GPUs in pool 'main', more than its"
     " capacity of 80 (allowed: sum <= 80)"),
    (lambda: validate_reservations(_tree(research=10000, nlp=8000, vision=4000),
                                   {"main": 80000}),
     "reservations.research.main: children of 'research' reserve 12 GPUs in pool 'main'"
     " (nlp 8, vision 4) but 'research' reserves only 10 (allowed: children's sum <= 10)"),
]


@pytest.mark.parametrize(("build", "text"), OTHER_ERRORS)
def test_refused_nodes_pools_and_amounts_say_which_field(
    build: Callable[[], object], text: str
) -> None:
    with pytest.raises(ValidationError) as err:
        build()
    assert str(err.value) == text


def test_an_unknown_key_names_the_closest_one_and_every_allowed_key() -> None:
    err = unknown_key("workloads[0].priorty", "priorty", ["pods", "priority", "name"])
    assert str(err) == ("workloads[0].priorty: unknown key; did you mean 'priority'?"
                        " (allowed: name, pods, priority)")
    assert err.field == "workloads[0].priorty"
