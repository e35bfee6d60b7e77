"""Domain errors. Expected scheduling outcomes are values, never exceptions;
these are raised for bad input at the boundary and for illegal state changes."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


class ApportionError(Exception):
    """Base class of every error apportion raises on purpose."""


class ValidationError(ApportionError):
    """Bad input. Names the field, what is wrong, and what is allowed.

    ``field`` is a path such as ``teams[0].children[1].reservations.main``.
    """

    def __init__(self, field: str, message: str, allowed: str | None = None) -> None:
        self.field = field
        self.message = message
        self.allowed = allowed
        text = f"{field}: {message}" if field else message
        if allowed:
            text += f" (allowed: {allowed})"
        super().__init__(text)

    def at(self, prefix: str) -> ValidationError:
        """The same error with its field path prefixed by ``prefix``."""
        if not prefix:
            return self
        field = f"{prefix}.{self.field}" if self.field and not self.field.startswith("[") else (
            f"{prefix}{self.field}"
        )
        return type(self)(field, self.message, self.allowed)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the closest choice, or the empty string."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown_key(field: str, key: str, allowed: Iterable[str]) -> ValidationError:
    """The one error for an unknown field, in the REST API, the CLI and the
    scenario parser alike: ``<field>: unknown key; did you mean 'priority'?``."""
    keys = sorted(allowed)
    return ValidationError(field, f"unknown key{did_you_mean(key, keys)}", ", ".join(keys))


class ReservationError(ValidationError):
    """A reservation change that would break SPEC section 2's rules."""


class NotFound(ApportionError):
    """A named object does not exist."""

    def __init__(self, kind: str, name: str, choices: Iterable[str] = ()) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} not found{did_you_mean(name, choices)}")


class IllegalTransition(ApportionError):
    """A lifecycle change the transition table does not allow.

    Carries the workload's history so the caller can see how it got here.
    """

    def __init__(
        self, workload: str, current: str, target: str, history: Sequence[str] = ()
    ) -> None:
        self.workload = workload
        self.current = current
        self.target = target
        self.history = tuple(history)
        trail = " -> ".join(self.history) if self.history else current
        super().__init__(
            f"workload {workload!r}: cannot go from {current} to {target} (history: {trail})"
        )
