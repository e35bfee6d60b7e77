import pytest

from apportion.domain.errors import ValidationError
from apportion.domain.quantities import (
    RequestKind,
    format_gpus,
    gpus_number,
    parse_gpu_amount,
    parse_gpu_request,
)


@pytest.mark.parametrize(
    ("gpus", "kind", "charge"),
    [
        pytest.param(0.25, RequestKind.FRACTION, 250, id="quarter"),
        pytest.param("0.5", RequestKind.FRACTION, 500, id="half-string"),
        pytest.param(0.75, RequestKind.FRACTION, 750, id="three-quarters"),
        pytest.param(1, RequestKind.WHOLE, 1000, id="one"),
        pytest.param(8, RequestKind.WHOLE, 8000, id="eight"),
        pytest.param(2.0, RequestKind.WHOLE, 2000, id="two-float"),
    ],
)
def test_valid_gpu_requests(gpus: object, kind: RequestKind, charge: int) -> None:
    req = parse_gpu_request(gpus)
    assert req.kind is kind
    assert req.charge(81920) == charge


@pytest.mark.parametrize("bad", [0.3, 1.5, -1, 0, "abc", True, 0.1])
def test_invalid_gpu_requests_name_field_and_allowed_values(bad: object) -> None:
    with pytest.raises(ValidationError) as err:
        parse_gpu_request(bad)
    assert err.value.field == "gpus"
    assert "0.25, 0.5, 0.75" in str(err.value)


def test_both_fields_refused() -> None:
    with pytest.raises(ValidationError, match="not both"):
        parse_gpu_request(0.5, 1024)


def test_memory_request_charged_by_ceiling() -> None:
    req = parse_gpu_request(gpu_memory_mib=20480)
    assert req.charge(81920) == 250
    assert parse_gpu_request(gpu_memory_mib=20481).charge(81920) == 251
    assert parse_gpu_request(gpu_memory_mib=1).charge(16384) == 1


def test_memory_request_must_be_positive_integer() -> None:
    with pytest.raises(ValidationError) as err:
        parse_gpu_request(gpu_memory_mib=0)
    assert err.value.field == "gpu_memory_mib"


def test_amounts_and_formatting() -> None:
    assert parse_gpu_amount(32, "r") == 32000
    assert parse_gpu_amount("0.25", "r") == 250
    with pytest.raises(ValidationError, match=">= 0"):
        parse_gpu_amount(-1, "reservations.main")
    assert gpus_number(28800) == 28.8
    assert gpus_number(8000) == 8
    assert format_gpus(250) == "0.25"
