"""The Submit form: everything ``apportion submit`` takes, a dry-run preview,
and field errors next to their field with the API's message."""

from __future__ import annotations

import shlex
from fractions import Fraction
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from apportion.domain.errors import ValidationError
from apportion.domain.host import memory_quantity
from apportion.service import dryrun, insights, org
from apportion.service import workloads as svc
from apportion.service.authz import in_scope
from apportion.service.commands import Result, execute
from apportion.service.commands import Session as DbSession
from apportion.service.context import Role
from apportion.web.deps import FormDep, SessionDep
from apportion.web.render import control, error_page, render
from apportion.web.session import Session

router = APIRouter()
FIELDS = ("name", "team", "class", "priority", "gpus", "gpu_memory_mib", "pods", "min_pods",
          "gang", "topology", "topology_mode", "pool", "gpu_type", "command", "image",
          "duration", "cpu", "memory_mib", "requeue_on_preemption")
INTS = ("priority", "gpu_memory_mib", "pods", "min_pods", "duration")
ALLOWED_FORM_MEMORY = ("MiB (4096) or a size with a unit: 64Gi, 512Mi (Ki Mi Gi Ti: powers of "
                       "1024; k M G T: powers of 1000)")


def _number(field: str, raw: str) -> float | int:
    try:
        value = Fraction(raw.strip())
    except (ValueError, ZeroDivisionError):
        raise ValidationError(field, f"must be a number, got {raw!r}",
                              "e.g. 0.25, 1/4, 1 or 8") from None
    return int(value) if value.denominator == 1 else float(value)


def _memory(raw: str) -> int | str:
    """Host memory per pod: MiB (``4096``) or a Kubernetes size (``64Gi``), as
    ``submit --memory`` takes it; MiB for the API (which checks the range)."""
    if raw.isdigit():
        return int(raw)
    if not raw[:1].isdigit() and not raw.startswith("."):
        raise ValidationError("memory_mib", f"must be MiB or a size such as 64Gi, got "
                              f"{raw!r}", ALLOWED_FORM_MEMORY)
    try:
        return memory_quantity(raw, "memory_mib")
    except ValidationError as err:
        raise ValidationError("memory_mib", err.message, ALLOWED_FORM_MEMORY) from None


def _gpu_types(raw: str) -> str | list[str]:
    """``v100-16g, v100-32g`` (any of them) → a list; one name → that name."""
    names = [part.strip() for part in raw.split(",")]
    if any(not n for n in names):
        raise ValidationError("gpu_type", f"an empty type name in {raw!r}",
                              "a GPU type, or several separated by commas")
    unique = list(dict.fromkeys(names))
    return unique[0] if len(unique) == 1 else unique


def body_from_form(form: dict[str, str]) -> dict[str, Any]:
    """The REST submit body the form describes; blank fields are left out so
    the API's defaults apply. A value of the wrong type raises the error the
    REST API would give for it, naming the field."""
    f = {k: form.get(k, "").strip() for k in FIELDS}
    body: dict[str, Any] = {"name": f["name"], "team": f["team"],
                            "class": f["class"] or "elastic"}
    for key in INTS:
        if f[key]:
            try:
                body[key] = int(f[key])
            except ValueError:
                raise ValidationError(key, f"must be an integer, got {f[key]!r}") from None
    if f["gpus"]:
        body["gpus"] = _number("gpus", f["gpus"])
    if f["cpu"]:
        raw = f["cpu"]
        # Kubernetes' millicores (500m) as well as cores (0.5, 8), as submit --cpu takes
        body["cpu"] = (_number("cpu", raw[:-1]) / 1000 if raw.endswith("m")
                       else _number("cpu", raw))
    if f["gang"] in ("yes", "no"):
        body["gang"] = f["gang"] == "yes"
    if f["topology"]:
        body["topology"] = {"level": f["topology"], "mode": f["topology_mode"] or "required"}
    if f["memory_mib"]:
        body["memory_mib"] = _memory(f["memory_mib"])
    if f["gpu_type"]:
        body["gpu_type"] = _gpu_types(f["gpu_type"])
    for key in ("pool", "image"):
        if f[key]:
            body[key] = f[key]
    if f["command"]:
        try:
            body["command"] = shlex.split(f["command"])
        except ValueError as exc:
            raise ValidationError("command", f"cannot be split into words: {exc}") from None
    body["requeue_on_preemption"] = form.get("requeue_on_preemption") == "on"
    return body


def _field_of(err: ValidationError) -> str:
    """The form field an API error belongs to (``topology.level`` -> ``topology``)."""
    head = err.field.split(".")[0].split("[")[0]
    return head if head in FIELDS else "_form"


def _choices(s: DbSession, sess: Session) -> dict[str, Any]:
    views = org.team_views(s, sess.ctx.org_id)
    parents = {v["slug"]: v["parent"] for v in views}
    actor = sess.ctx.actor
    leaves = [v["slug"] for v in views if v["is_leaf"] and (
        actor.role is Role.ORG_ADMIN
        or (actor.role in (Role.TEAM_LEAD, Role.MEMBER) and in_scope(actor, parents, v["slug"])))]
    return {"teams": sorted(leaves), "pools": insights.pool_names(s, sess.ctx.org_id),
            "may_submit": actor.role is not Role.VIEWER}


def _form_page(request: Request, sess: Session, form: dict[str, str],
               errors: dict[str, str], status: int = 200) -> Response:
    try:
        with control(request).db.read() as s:
            choices = _choices(s, sess)
    except Exception as exc:
        return error_page(request, sess, exc)
    return render(request, sess, "submit.html", {"nav": "submit", "form": form,
                                                 "errors": errors, **choices}, status=status)


@router.get("/submit")
def submit_form(request: Request, sess: SessionDep) -> Response:
    defaults = {"class": "elastic", "pods": "1", "gpus": "1", "topology_mode": "required",
                **{k: v for k, v in request.query_params.items() if k in FIELDS}}
    return _form_page(request, sess, defaults, {})


@router.post("/submit/preview")
async def preview(request: Request, sess: SessionDep, form: FormDep) -> Response:
    """The dry run of the form as it is now (nothing is stored)."""
    db = control(request).db

    def run() -> dict[str, Any]:
        body = body_from_form(form)
        spec = svc.parse_spec(body)
        with db.read() as s:
            return dryrun.dry_run(s, sess.ctx, spec)

    try:
        result = await run_in_threadpool(run)
    except ValidationError as err:
        return render(request, sess, "preview.html", {"error": err, "field": _field_of(err),
                                                      "fields": FIELDS}, status=422)
    except Exception as exc:
        return error_page(request, sess, exc)
    return render(request, sess, "preview.html", {"result": result, "error": None,
                                                  "fields": FIELDS})


@router.post("/submit")
async def submit(request: Request, sess: SessionDep, form: FormDep) -> Response:
    """The REST submit's twin: same service function, one write transaction,
    same audit entry; a bad value re-renders the form with its field error."""
    cp = control(request)

    def run() -> dict[str, Any]:
        body = body_from_form(form)
        spec = svc.parse_spec(body)
        result = execute(cp.db, sess.ctx, None, lambda s: Result(201, svc.submit(
            s, sess.ctx, spec)))
        data: dict[str, Any] = result.data
        return data

    try:
        view = await run_in_threadpool(run)
    except ValidationError as err:
        return _form_page(request, sess, form, {_field_of(err): str(err)}, status=422)
    except Exception as exc:
        return error_page(request, sess, exc)
    cp.poke()
    return RedirectResponse(f"/workloads/{view['id']}", status_code=303)
