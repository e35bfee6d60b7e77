"""GPU quantities. Inside apportion every amount is an integer of milli-GPUs.

A pod's request is one of: ``gpus`` 0.25/0.5/0.75 (a fraction of one device),
``gpus`` N >= 1 whole (N whole devices on one node), or ``gpu_memory_mib`` M
(a share of one device charged ``ceil(M * 1000 / device_memory_mib)``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from apportion.domain import limits
from apportion.domain.errors import ValidationError

MILLI_PER_GPU = 1000
FRACTION_MILLIS = (250, 500, 750)
ALLOWED_GPUS = f"0.25, 0.5, 0.75 or a whole number 1-{limits.MAX_GPUS_PER_POD}"


class RequestKind(enum.StrEnum):
    FRACTION = "fraction"
    WHOLE = "whole"
    MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """What one pod asks for.

    ``value`` is milli-GPU for FRACTION (250/500/750), a device count for WHOLE,
    MiB for MEMORY.
    """

    kind: RequestKind
    value: int

    @property
    def is_whole(self) -> bool:
        return self.kind is RequestKind.WHOLE

    @property
    def whole_devices(self) -> int:
        """Devices a pod takes whole (0 for a shared, fractional pod)."""
        return self.value if self.kind is RequestKind.WHOLE else 0

    def charge(self, device_memory_mib: int) -> int:
        """Milli-GPU charged per pod on devices of ``device_memory_mib``."""
        if self.kind is RequestKind.WHOLE:
            return self.value * MILLI_PER_GPU
        if self.kind is RequestKind.FRACTION:
            return self.value
        return -(-self.value * MILLI_PER_GPU // device_memory_mib)

    def describe(self) -> str:
        if self.kind is RequestKind.MEMORY:
            return f"{self.value} MiB"
        return f"{format_gpus(self.charge(1))} GPU"


def _to_decimal(value: object, field: str, allowed: str) -> Decimal:
    if isinstance(value, bool) or value is None:
        raise ValidationError(field, f"must be a number, got {value!r}", allowed)
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValidationError(field, f"must be a finite number, got {value!r}", allowed)
        return Decimal(repr(value))
    if isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            raise ValidationError(field, f"must be a number, got {value!r}", allowed) from None
        if not number.is_finite():
            raise ValidationError(field, f"must be a finite number, got {value!r}", allowed)
        return number
    raise ValidationError(field, f"must be a number, got {value!r}", allowed)


def parse_gpu_request(
    gpus: object = None, gpu_memory_mib: object = None, *, field_prefix: str = ""
) -> GpuRequest:
    """Parse a per-pod request; exactly one of ``gpus`` and ``gpu_memory_mib``.

    Raises ValidationError naming the field and the allowed values.
    """
    gpus_field = f"{field_prefix}gpus"
    mem_field = f"{field_prefix}gpu_memory_mib"
    if gpus is not None and gpu_memory_mib is not None:
        raise ValidationError(
            gpus_field, "give either gpus or gpu_memory_mib, not both", "exactly one of the two"
        )
    if gpus is None and gpu_memory_mib is None:
        raise ValidationError(gpus_field, "a GPU request is required", ALLOWED_GPUS)
    if gpu_memory_mib is not None:
        mem = _to_decimal(gpu_memory_mib, mem_field, "a whole number of MiB >= 1")
        if mem != mem.to_integral_value() or not 1 <= mem <= limits.MAX_GPU_MEMORY_MIB:
            raise ValidationError(
                mem_field, f"must be a whole number of MiB >= 1, got {gpu_memory_mib}",
                f"a whole number of MiB 1..{limits.MAX_GPU_MEMORY_MIB}",
            )
        return GpuRequest(RequestKind.MEMORY, int(mem))
    amount = _to_decimal(gpus, gpus_field, ALLOWED_GPUS)
    if amount > limits.MAX_GPUS_PER_POD:
        raise ValidationError(gpus_field, f"{gpus} is more GPUs than one pod may ask for",
                              ALLOWED_GPUS)
    if amount >= 1 and amount == amount.to_integral_value():
        return GpuRequest(RequestKind.WHOLE, int(amount))
    milli = amount * MILLI_PER_GPU
    if milli == milli.to_integral_value() and int(milli) in FRACTION_MILLIS:
        return GpuRequest(RequestKind.FRACTION, int(milli))
    raise ValidationError(gpus_field, f"{gpus} is not a valid GPU request", ALLOWED_GPUS)


def parse_gpu_amount(value: object, field: str) -> int:
    """Parse a non-negative GPU amount (e.g. a reservation) into milli-GPU.

    Any multiple of 0.001 GPU is accepted.
    """
    allowed = "a number of GPUs >= 0, in steps of 0.001"
    amount = _to_decimal(value, field, allowed)
    if amount < 0:
        raise ValidationError(field, f"must be >= 0, got {value}", allowed)
    if amount > limits.MAX_RESERVATION_GPUS:
        raise ValidationError(field, f"must be <= {limits.MAX_RESERVATION_GPUS}, got {value}",
                              allowed)
    milli = amount * MILLI_PER_GPU
    if milli != milli.to_integral_value():
        raise ValidationError(field, f"{value} has more than 3 decimals", allowed)
    return int(milli)


def gpus_number(milli: int | Fraction) -> int | float:
    """Milli-GPU as a number of GPUs for output: an int when whole, else a float."""
    value = Fraction(milli) / MILLI_PER_GPU
    if value.denominator == 1:
        return int(value)
    return round(float(value), 3)


def count_of(n: int, noun: str, plural: str | None = None) -> str:
    """``1 workload``, ``2 workloads``, ``0 preemptions``: the count and its
    noun, singular only for exactly one."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def format_gpus(milli: int | Fraction) -> str:
    """Milli-GPU as a short human string: ``8``, ``0.25``, ``28.8``."""
    number = gpus_number(milli)
    if isinstance(number, int):
        return str(number)
    return f"{number:g}"
