"""Login, logout, and the live-update signal the pages listen to."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from apportion.service import audit
from apportion.service.changes import events_topic
from apportion.service.errors import Unauthenticated
from apportion.service.insights import last_event_id
from apportion.web import session as web_session
from apportion.web.deps import FormDep, SessionDep
from apportion.web.render import form_of, render, safe_next

router = APIRouter()
#: how often the live stream looks for new events where no NOTIFY wakes it (SQLite)
POLL_SECONDS = 0.25
#: a burst of changes is sent as one signal once it has been quiet this long...
QUIET_SECONDS = 0.3
#: ...or at the latest this long after its first change
MAX_DELAY_SECONDS = 1.0
KEEPALIVE_SECONDS = 15.0


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = "/") -> Response:
    carrier = Response()
    nonce = web_session.login_nonce(request, carrier)
    return _with_nonce(request, carrier, nonce, safe_next(next), None, 200)


def _with_nonce(request: Request, response: Response, nonce: str, target: str,
                error: str | None, status: int) -> Response:
    page = render(request, None, "login.html",
                  {"next": target, "error": error, "nonce": nonce}, status=status)
    for key, value in response.headers.items():
        if key == "set-cookie":
            page.headers.append(key, value)
    return page


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await form_of(request)
    target = safe_next(form.get("next"))
    carrier = Response()
    nonce = web_session.login_nonce(request, carrier)
    if not web_session.check_login_nonce(request, form.get("csrf", "")):
        return _with_nonce(request, carrier, nonce, target,
                           "the login form expired; enter the token again", 403)
    try:
        await web_session.verify_token(request, form.get("token", ""))
    except Unauthenticated as exc:
        await run_in_threadpool(
            audit.record_denial, web_session.control(request).db, None, "web.login",
            request.url.path, str(exc), request_id=web_session.request_id(request))
        return _with_nonce(request, carrier, nonce, target, f"login failed: {exc}", 401)
    response = RedirectResponse(target, status_code=303)
    web_session.start(response, request, form.get("token", ""))
    return response


@router.post("/logout")
async def logout(request: Request, sess: SessionDep, form: FormDep) -> Response:
    response = RedirectResponse("/login", status_code=303)
    web_session.end(response)
    return response


@router.get("/ui/live")
async def live(request: Request, sess: SessionDep) -> StreamingResponse:
    """Server-Sent Events for open pages: one ``changed`` event per burst of
    new events in the organization (debounced here, so a busy scheduler costs
    each page at most about one refresh a second)."""
    db = web_session.control(request).db
    changes = web_session.control(request).changes
    org_id = sess.ctx.org_id
    topics = (events_topic(org_id),)

    def newest(after: int) -> int:
        with db.read() as s:
            return last_event_id(s, org_id, after)

    start = await run_in_threadpool(newest, 0)

    async def gen() -> AsyncIterator[str]:
        seen, sent_at = start, time.monotonic()
        yield "retry: 1000\n\n"
        while not await request.is_disconnected():
            mark = changes.mark(topics)
            latest = await run_in_threadpool(newest, seen)
            if latest > seen:
                first = time.monotonic()
                while time.monotonic() - first < MAX_DELAY_SECONDS:
                    await asyncio.sleep(QUIET_SECONDS)
                    again = await run_in_threadpool(newest, latest)
                    if again == latest:
                        break
                    latest = again
                seen, sent_at = latest, time.monotonic()
                yield f"event: changed\ndata: {latest}\n\n"
            elif time.monotonic() - sent_at > KEEPALIVE_SECONDS:
                sent_at = time.monotonic()
                yield ": keep-alive\n\n"
            await changes.wait(topics, mark, POLL_SECONDS)

    return StreamingResponse(gen(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
