"""Running a command: one write transaction, with its Idempotency-Key.

A command returns a :class:`Result` (HTTP-neutral status and JSON data). With
an idempotency key, the stored result is returned for the same request, the
key refused for a different one, and a new result stored in the same
transaction as the command's changes, so a crash never separates the two.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apportion.service.context import Ctx
from apportion.service.errors import Conflict, IdempotencyMismatch
from apportion.store.db import Database, IntegrityError

# ``Session`` is re-exported: routers type their read functions with it without
# importing SQLAlchemy themselves
from apportion.store.db import Session as Session
from apportion.store.repos.security import add_idempotency, get_idempotency


@dataclass(frozen=True, slots=True)
class Result:
    status: int
    data: Any
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Idempotency:
    key: str
    fingerprint: str

    @classmethod
    def of(cls, key: str | None, method: str, path: str, body: bytes) -> Idempotency | None:
        if not key:
            return None
        digest = hashlib.sha256(method.encode() + b" " + path.encode() + b"\n" + body)
        return cls(key, digest.hexdigest())


def execute(
    db: Database, ctx: Ctx, idem: Idempotency | None, fn: Callable[[Session], Result]
) -> Result:
    """Run ``fn`` in one write transaction, honouring ``idem``."""
    for attempt in range(2):
        try:
            with db.write() as session:
                if idem is not None:
                    stored = get_idempotency(session, ctx.org_id, idem.key)
                    if stored is not None:
                        if stored.fingerprint != idem.fingerprint:
                            raise IdempotencyMismatch(idem.key)
                        return Result(stored.status_code, stored.response, replayed=True)
                result = fn(session)
                if idem is not None:
                    add_idempotency(
                        session, ctx.org_id, idem.key, fingerprint=idem.fingerprint,
                        status_code=result.status, response=_jsonable(result.data),
                        created_at=time.time(),
                    )
                return result
        except IntegrityError:
            # Two requests with the same new key raced; the loser replays the winner.
            if idem is None or attempt:
                raise Conflict("the change conflicts with another one; retry") from None
    raise AssertionError("unreachable")


def _jsonable(data: Any) -> Any:
    return json.loads(json.dumps(data, default=str))
