"""Dependencies of the page routes: the session (or a redirect to log in) and
checked forms (CSRF)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response

from apportion.web.render import PageError, error_page, form_of, to_login
from apportion.web.session import Session, check_csrf, current


class LoginRequired(Exception):
    """No valid session: the page answers with a redirect to /login."""


class CsrfRejected(Exception):
    """A form without the session's CSRF token (403, nothing done)."""


async def session(request: Request) -> Session:
    sess = await current(request)
    if sess is None:
        raise LoginRequired
    return sess


SessionDep = Annotated[Session, Depends(session)]


async def checked_form(request: Request, sess: SessionDep) -> dict[str, str]:
    """The posted form, once its CSRF token has been checked."""
    form = await form_of(request)
    if not check_csrf(request, sess, form):
        raise CsrfRejected
    return form


FormDep = Annotated[dict[str, str], Depends(checked_form)]


def install(app: FastAPI) -> None:
    @app.exception_handler(LoginRequired)
    async def h_login(request: Request, exc: LoginRequired) -> Response:
        return to_login(request)

    @app.exception_handler(CsrfRejected)
    async def h_csrf(request: Request, exc: CsrfRejected) -> Response:
        sess = await current(request)
        return error_page(request, sess, PageError(
            403, "Not allowed",
            "the form's CSRF token is missing or wrong; reload the page and try again"))
