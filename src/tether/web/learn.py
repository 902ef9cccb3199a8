"""/learn: what `tether learn` proposed, with its evidence; apply and dismiss.

The evidence is calls as callers made them (every user's arguments) and evaluation cases, so
only a reviewer reads these pages, as with traces; applying and dismissing go through
:func:`tether.learn.apply.apply` and :func:`tether.learn.apply.dismiss`, the functions the CLI
calls, as the signed-in reviewer, with the session's CSRF value.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from tether.errors import ConfigError
from tether.learn.apply import apply, dismiss
from tether.learn.model import Proposal
from tether.learn.propose import from_row
from tether.registry import proposals as stored
from tether.web.console import Console, Forbidden, Viewer, id_in_url, shared_registry

STATUSES = ("open", "applied", "dismissed")


def _require_reviewer(v: Viewer) -> None:
    if not v.reviewer:
        raise Forbidden("Proposals hold the calls every user made, so only a reviewer (a role "
                        "with reviewer: true) reads and decides them.")


def _lists(v: Viewer) -> dict[str, Any]:
    rows = stored.proposals(shared_registry(v.project))
    return {s: [from_row(r) for r in reversed(rows) if r["status"] == s] for s in STATUSES}


def read_mark(p: Proposal) -> str:
    """What the form carries of the proposal as the reviewer read it: its status, sentence,
    place and support."""
    text = "\x1f".join([p.status, p.change.where(), p.change.sentence, str(p.support)])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _decide(v: Viewer, pid: int, choice: str) -> dict[str, str]:
    assert v.user is not None
    if choice == "apply":
        done = apply(v.as_written, pid, v.user)
        out = {"decided": "applied", "exit": str(done.exit_code)}
        if done.proposal.publication is not None:
            out["publication"] = str(done.proposal.publication)
        return out
    dismiss(v.as_written, pid, v.user)
    return {"decided": "dismissed"}


def routes(console: Console) -> list[Route]:
    def index(request: Request) -> Response:
        v = console.signed_in(request)
        _require_reviewer(v)
        return console.page(request, "learn.html", **_lists(v))

    def show(request: Request) -> Response:
        v = console.signed_in(request)
        _require_reviewer(v)
        pid = id_in_url(request.path_params["pid"], "proposal")
        row = stored.proposal(shared_registry(v.project), pid)
        if row is None:
            raise HTTPException(404, f"There is no proposal {pid}.")
        q = request.query_params  # fixed words and numbers only: the page never echoes text
        outcome = {"decided": q.get("decided") if q.get("decided") in ("applied", "dismissed")
                   else None,
                   "publication": q.get("publication") if q.get("publication", "").isdigit()
                   else None,
                   "exit": q.get("exit") if q.get("exit", "").isdigit() else None}
        p = from_row(row)
        return console.page(request, "proposal.html", p=p, outcome=outcome, read=read_mark(p))

    async def decide_post(request: Request) -> Response:
        form = await request.form()
        v = await run_in_threadpool(console.signed_in, request)
        console.check_form(v, form)
        _require_reviewer(v)
        pid = id_in_url(request.path_params["pid"], "proposal")
        choice = form.get("decision")
        if choice not in ("apply", "dismiss"):
            raise ConfigError("choose apply or dismiss.")
        row = stored.proposal(shared_registry(v.project), pid)
        if row is None:
            raise HTTPException(404, f"There is no proposal {pid}.")
        if form.get("read") != read_mark(from_row(row)):  # decide what the reviewer read
            raise ConfigError(f"proposal {pid} changed since this page was loaded (new "
                              "evidence, or someone decided it).",
                              hint="Reload the page, read it again, and decide.")
        outcome = await run_in_threadpool(_decide, v, pid, str(choice))
        return RedirectResponse(f"/learn/{pid}?{urlencode(outcome)}", status_code=303)

    return [Route("/learn", index, methods=["GET"]),
            Route("/learn/{pid}", show, methods=["GET"]),
            Route("/learn/{pid}/decide", decide_post, methods=["POST"])]
