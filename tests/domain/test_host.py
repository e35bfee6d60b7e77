"""Host CPU and memory (SPEC 1, 5): numbers, Kubernetes quantities, errors."""

from __future__ import annotations

import pytest

from apportion.domain.cluster import Node, Packing, Pool
from apportion.domain.errors import ValidationError
from apportion.domain.host import (
    cpu_number,
    cpu_quantity,
    memory_quantity,
    parse_cpu,
    parse_memory_mib,
)
from apportion.domain.workload import make_spec


@pytest.mark.parametrize(("value", "milli"), [(None, 0), (0, 0), (8, 8000), (0.5, 500),
                                              (0.001, 1), (96.25, 96250), (2.0, 2000)])
def test_cpu_in_cores_becomes_milli_cpu(value: object, milli: int) -> None:
    assert parse_cpu(value) == milli


@pytest.mark.parametrize("value", [0.0005, -1, "8", True, float("nan")])
def test_bad_cpu_names_the_field_and_the_step(value: object) -> None:
    with pytest.raises(ValidationError) as err:
        parse_cpu(value, "cpu")
    assert err.value.field == "cpu" and "multiple of 0.001 ≥ 0" in err.value.message
    with pytest.raises(ValidationError) as unnamed:
        parse_cpu(value)  # the field is "cpu" unless the caller names another
    assert unnamed.value.field == "cpu"


@pytest.mark.parametrize("value", [1.5, -1, "64Gi", False])
def test_bad_memory_mib(value: object) -> None:
    with pytest.raises(ValidationError, match="whole number of MiB"):
        parse_memory_mib(value)


@pytest.mark.parametrize(("text", "milli"), [("8", 8000), ("500m", 500), ("0.5", 500),
                                             ("1.5", 1500), ("63770m", 63770)])
def test_cpu_quantities(text: str, milli: int) -> None:
    assert cpu_quantity(text) == milli


def test_cpu_quantity_errors_and_allocatable_rounding() -> None:
    with pytest.raises(ValidationError, match="finer than 0"):
        cpu_quantity("0.0001")
    with pytest.raises(ValidationError, match="unknown unit 'k'"):
        cpu_quantity("8k")
    with pytest.raises(ValidationError, match="500m"):
        cpu_quantity("lots")
    assert cpu_quantity("1500500u", exact=False) == 1500


@pytest.mark.parametrize(("text", "mib"), [("64Gi", 65536), ("512Mi", 512), ("1G", 954),
                                           ("1Ti", 1048576), ("1048576", 1), ("1.5Gi", 1536),
                                           ("2048Ki", 2), ("1M", 1)])
def test_memory_quantities_are_mib_rounded_up_for_requests(text: str, mib: int) -> None:
    assert memory_quantity(text) == mib


def test_memory_allocatable_rounds_down_and_errors_name_the_forms() -> None:
    assert memory_quantity("1G", round_up=False) == 953
    assert memory_quantity("528280740Ki", round_up=False) == 515899
    with pytest.raises(ValidationError) as err:
        memory_quantity("64GB", "memory")
    assert err.value.field == "memory" and "64Gi, 512Mi, 1G" in (err.value.allowed or "")


def test_spec_node_and_pool_carry_host_resources_with_defaults() -> None:
    spec = make_spec(name="w", team="t", gpus=1, cpu=4, memory_mib=16384)
    assert (spec.cpu_milli, spec.memory_mib) == (4000, 16384)
    assert (make_spec(name="w", team="t", gpus=1).cpu_milli, spec.memory_mib) == (0, 16384)
    assert Node("a", "p", 8).cpu_milli is None  # not limited
    assert Node("a", "p", 8, cpu_milli=96000, memory_mib=1024).memory_mib == 1024
    with pytest.raises(ValidationError, match="cpu_milli"):
        Node("a", "p", 8, cpu_milli=-1)
    assert Pool("p").packing is Packing.FRAGMENTATION
    assert Pool("p", packing="best_fit").packing is Packing.BEST_FIT  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as err:
        Pool("p", packing="tight")  # type: ignore[arg-type]
    assert err.value.field == "packing" and err.value.allowed == "fragmentation, best_fit"
    assert (cpu_number(8000), cpu_number(500)) == (8, 0.5)


def test_a_pool_s_typical_pods_keep_their_host_requests_and_name_bad_fields() -> None:
    """SPEC 5's configured prior: each shape keeps its CPU and memory, and a
    refused entry names its place in the list (``typical_pods[1].gpus``)."""
    from apportion.domain.cluster import TypicalPod, parse_typical_pods

    got = parse_typical_pods([{"gpus": 0.5, "count": 4}, {"gpus": 2, "cpu": 8, "memory_mib": 4096}])
    assert got == (TypicalPod(500, 4), TypicalPod(2000, 1, 8000, 4096))
    with pytest.raises(ValidationError) as gpus:
        parse_typical_pods([{"gpus": 1}, {"gpus": 0.3}])
    assert gpus.value.field == "typical_pods[1].gpus"
    with pytest.raises(ValidationError) as unknown:
        parse_typical_pods([{"gpus": 1, "colour": "red"}])
    assert unknown.value.field == "typical_pods[0].colour"
    assert unknown.value.message == "is not a field of a typical pod"
