"""Host resources of pods and nodes (SPEC 1 and 5): CPU and memory.

Inside apportion CPU is an integer of **milli-CPU** (1 core = 1000) and memory
an integer of **MiB**. They are placement constraints only (no quota, no fair
share). Users write CPU in cores (``8``, ``0.5``, steps of 0.001) and memory
in MiB; the CLI and the agents also read Kubernetes quantities (``500m``,
``64Gi``, ``1G``), converted here.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from apportion.domain import limits
from apportion.domain.errors import ValidationError

MILLI_PER_CPU = 1000
MIB = 1024 * 1024
ALLOWED_CPU = "a number of cores >= 0 in steps of 0.001, e.g. 8 or 0.5"
ALLOWED_MEMORY = "a whole number of MiB >= 0"
ALLOWED_CPU_QUANTITY = "cores (8, 0.5) or milli-cores (500m)"
ALLOWED_MEMORY_QUANTITY = (
    "bytes with a suffix Ki, Mi, Gi, Ti, Pi (powers of 1024) or k, M, G, T, P (powers of "
    "1000), e.g. 64Gi, 512Mi, 1G; a plain number is bytes"
)
_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
           "Ei": 1 << 60}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")


def _decimal(value: object) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value)) if math.isfinite(value) else None
    return None


def parse_cpu(value: object, field: str = "cpu") -> int:
    """A pod's (or node's) CPU in cores -> milli-CPU; ``None`` is 0.

    Raises ValidationError unless ``value`` is a number >= 0 in steps of 0.001.
    """
    if value is None:
        return 0
    amount = _decimal(value)
    if amount is None or amount < 0 or amount > limits.MAX_CPU:
        raise ValidationError(field, f"must be a multiple of 0.001 ≥ 0, got {value!r}",
                              ALLOWED_CPU)
    milli = amount * MILLI_PER_CPU
    if milli != milli.to_integral_value():
        raise ValidationError(field, f"must be a multiple of 0.001 ≥ 0, got {value!r}",
                              ALLOWED_CPU)
    return int(milli)


def parse_memory_mib(value: object, field: str = "memory_mib") -> int:
    """A whole number of MiB >= 0 (``None`` is 0)."""
    if value is None:
        return 0
    amount = _decimal(value)
    if (amount is None or amount < 0 or amount != amount.to_integral_value()
            or amount > limits.MAX_MEMORY_MIB):
        raise ValidationError(field, f"must be a whole number of MiB ≥ 0, got {value!r}",
                              ALLOWED_MEMORY)
    return int(amount)


def format_memory_mib(value: int | float | None) -> str:
    """Host memory as Kubernetes writes it: ``64Gi``, ``1536Mi``, ``2Ti``; ``-``
    for none (0: nothing asked for, None: not limited or unknown)."""
    if not value:
        return "-"
    mib = int(value)
    for unit, size in (("Ti", 1024 * 1024), ("Gi", 1024)):
        if mib % size == 0:
            return f"{mib // size}{unit}"
    return f"{mib}Mi"


def cpu_number(milli: int) -> int | float:
    """Milli-CPU as cores for output: an int when whole, else a float."""
    return milli // MILLI_PER_CPU if milli % MILLI_PER_CPU == 0 else milli / MILLI_PER_CPU


def _quantity(text: str, field: str, allowed: str) -> tuple[Decimal, str]:
    match = _QUANTITY.match(text)
    if match is None:
        raise ValidationError(field, f"{text!r} is not a quantity", allowed)
    try:
        return Decimal(match.group(1)), match.group(2)
    except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
        raise ValidationError(field, f"{text!r} is not a quantity", allowed) from None


def cpu_quantity(text: str, field: str = "cpu", *, exact: bool = True) -> int:
    """A Kubernetes CPU quantity (``8``, ``0.5``, ``500m``) -> milli-CPU.

    ``exact`` (a request) refuses amounts finer than 1m; otherwise (a node's
    allocatable, e.g. ``1500u``) they are rounded down.
    """
    amount, suffix = _quantity(text, field, ALLOWED_CPU_QUANTITY)
    scale = {"": Decimal(1000), "m": Decimal(1), "u": Decimal("0.001"),
             "n": Decimal("0.000001")}.get(suffix)
    if scale is None:
        raise ValidationError(field, f"{text!r}: unknown unit {suffix!r}", ALLOWED_CPU_QUANTITY)
    milli = amount * scale
    if milli != milli.to_integral_value():
        if exact:
            raise ValidationError(field, f"{text!r} is finer than 0.001 cores (1m)",
                                  ALLOWED_CPU_QUANTITY)
        return int(milli)
    return int(milli)


def memory_quantity(text: str, field: str = "memory", *, round_up: bool = True) -> int:
    """A Kubernetes memory quantity (``64Gi``, ``512Mi``, ``1G``, bytes) -> MiB.

    A request is rounded up to whole MiB (``round_up``: never asks for less
    than was written); a node's allocatable is rounded down.
    """
    amount, suffix = _quantity(text, field, ALLOWED_MEMORY_QUANTITY)
    factor = _BINARY.get(suffix) or _DECIMAL.get(suffix) or (1 if suffix == "" else None)
    if factor is None:
        raise ValidationError(field, f"{text!r}: unknown unit {suffix!r}",
                              ALLOWED_MEMORY_QUANTITY)
    mib = Fraction(amount) * factor / MIB
    return math.ceil(mib) if round_up else math.floor(mib)
