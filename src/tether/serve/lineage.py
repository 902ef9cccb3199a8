"""`POST /api/v1/lineage`: the OpenLineage HTTP transport's path on tether's HTTP server.

A runner or admin token (`tether token add NAME --admin`) may post run events (one JSON object,
an array, or JSON lines); they are folded into the openlineage import layer as `tether import
openlineage` would, and the next `tether check` sees the edges and schemas. No token, 401; then
the Host and Origin are checked as the MCP endpoint checks them (:mod:`tether.httpguard`, the
same lists): a foreign Host, 421; a foreign Origin, 403; a user's token is refused (403); an
invalid event (not JSON, nested too deep, not a run event, dated after the project clock),
400 naming the line, and nothing is imported.
Any other failure (the project does not load with the events folded in) is the server's: its
paragraph, which names the project's files, goes to the server's log, and the sender gets a 500
that names no path.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tether.errors import TetherError
from tether.httpguard import Allowed
from tether.imports.openlineage import InvalidEvents
from tether.profiling.layers import post_openlineage
from tether.serve.identity import ADMIN_SCOPE, RUNNER_SCOPE

log = logging.getLogger("tether.serve.lineage")
PATH = "/api/v1/lineage"
MAX_BODY = 16 * 1024 * 1024
"""Largest request accepted (a batch of run events is kilobytes)."""


def lineage_route(root: Path, allowed: Allowed | None = None) -> Route:
    """The route; ``allowed``: the Hosts and Origins the server answers (those its MCP endpoint
    is given); by default the loopback names, as the MCP endpoint's defaults on loopback."""
    guard = allowed or Allowed.for_server("127.0.0.1")

    async def endpoint(request: Request) -> Any:
        token: Any = getattr(request.user, "access_token", None) if "user" in request.scope \
            else None
        if token is None:  # first, as the MCP endpoint answers a request without a token
            return JSONResponse({"error": "a bearer token is required (tether token add NAME "
                                 "--admin)"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        refusal = guard.refusal(request.headers)
        if refusal is not None:
            return refusal
        if not {RUNNER_SCOPE, ADMIN_SCOPE} & set(token.scopes or []):
            return JSONResponse({"error": "this token may not post lineage: it needs a runner "
                                 "or admin token (tether token add NAME --admin)"},
                                status_code=403)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY:  # refused before it is read
            return JSONResponse({"error": f"the body is over {MAX_BODY} bytes"}, status_code=413)
        body = b""
        async for chunk in request.stream():  # a body without a length is read up to the cap
            body += chunk
            if len(body) > MAX_BODY:
                break
        if len(body) > MAX_BODY:
            return JSONResponse({"error": f"the body is over {MAX_BODY} bytes"}, status_code=413)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return JSONResponse({"error": "the body must be UTF-8 JSON"}, status_code=400)

        try:
            count = await anyio.to_thread.run_sync(post_openlineage, root, text)
        except InvalidEvents as e:  # names the body's line only
            return JSONResponse({"error": e.paragraph()}, status_code=400)
        except TetherError as e:
            log.error("POST %s: the events could not be folded in: %s", PATH, e.paragraph())
            return JSONResponse({"error": "the events are valid, but the server could not fold "
                                 "them into its lineage layer (the project does not load with "
                                 "them); its log says why"}, status_code=500)
        return JSONResponse({"accepted": count}, status_code=200)

    return Route(PATH, endpoint=endpoint, methods=["POST"])
