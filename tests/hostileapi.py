"""A hostile HTTP API for the attack tests: Starlette on a free port, as tests/apiserver.py.

It echoes the caller's credential back in the encodings a server can send it in (as sent,
upper case, base64, URL-encoded): in an error message whose first 190 characters are filler
(a cut at 200 would keep the secret's start), in a row's field, and in the next-page link it
hands out. Another route serves 50 pages of one 8 MiB row each (a page bomb). The secret is
read from the request's own Authorization header (bearer, or basic's ``user:password``), so
whatever tether sends is what comes back.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote, quote_plus

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

BOMB_ROW_BYTES = 8 << 20
BOMB_PAGES = 50


def encoded(secret: str, form: str) -> str:
    """``secret`` as a server would echo it in ``form``."""
    return {"sent": secret, "upper": secret.upper(), "lower": secret.lower(),
            "base64": base64.b64encode(secret.encode()).decode(),
            "url": quote(secret, safe=""), "plus": quote_plus(secret),
            "password": secret.partition(":")[2] or secret}[form]


def secret_of(request: Request) -> str:
    """The credential the request carries, as tether holds it (basic: ``user:password``)."""
    auth = request.headers.get("authorization", "")
    if auth.startswith("Basic "):
        return base64.b64decode(auth[6:]).decode()
    return auth.removeprefix("Bearer ")


class Hostile:
    def __init__(self) -> None:
        self.bomb_pages = 0
        blob = b"a" * BOMB_ROW_BYTES
        self._bomb = (b'{"data": [{"id": %d, "blob": "' , blob, b'"}], "next_cursor": %s}')

    def app(self) -> Starlette:
        async def error(request: Request) -> JSONResponse:
            echo = encoded(secret_of(request), request.query_params.get("form", "sent"))
            return JSONResponse({"message": "x" * 190 + echo}, status_code=400)

        async def rows(request: Request) -> JSONResponse:
            form = request.query_params.get("form", "sent")
            echo = encoded(secret_of(request), form)
            page = int(request.query_params.get("page") or 1)
            nxt = None
            if page == 1:  # the next page's link carries the secret too
                nxt = (f"{request.url.scheme}://{request.url.netloc}{request.url.path}?"
                       f"form={quote(form)}&page=2&echo={quote(echo, safe='')}")
            return JSONResponse({"data": [{"id": page, "note": f"you sent {echo}",
                                           "tags": {echo: [echo]}}],
                                 "next": nxt})

        async def bomb(request: Request) -> Response:
            page = int(request.query_params.get("cursor") or 0)
            self.bomb_pages += 1
            head, blob, tail = self._bomb
            nxt = b'"%d"' % (page + 1) if page + 1 < BOMB_PAGES else b"null"
            return Response(head % page + blob + tail % nxt, media_type="application/json")

        return Starlette(routes=[Route("/echo/error", error), Route("/echo/rows", rows),
                                 Route("/bomb", bomb)])


def hostile_spec(scheme: str = "bearer") -> dict[str, Any]:
    """The API's description: three read operations, one security scheme (bearer or basic)."""
    form = {"name": "form", "in": "query", "schema": {"type": "string", "enum": [
        "sent", "upper", "lower", "base64", "url", "plus", "password"]}}

    def op(op_id: str, item: dict[str, Any], params: list[dict[str, Any]],
           extra: dict[str, Any]) -> dict[str, Any]:
        return {"get": {"operationId": op_id, "summary": f"The {op_id} answer.",
                        "parameters": params, "responses": {"200": {
                            "description": "ok", "content": {"application/json": {"schema": {
                                "type": "object", "properties": {
                                    "data": {"type": "array", "items": item}, **extra}}}}}}}}

    echo_item = {"type": "object", "properties": {
        "id": {"type": "integer"}, "note": {"type": "string"}, "tags": {"type": "object"}}}
    bomb_item = {"type": "object", "properties": {
        "id": {"type": "integer"}, "blob": {"type": "string"}}}
    return {
        "openapi": "3.1.0", "info": {"title": "Hostile", "version": "1"},
        "security": [{"auth": []}],
        "components": {"securitySchemes": {"auth": {"type": "http", "scheme": scheme}}},
        "paths": {
            "/echo/error": op("echoError", echo_item, [form], {}),
            "/echo/rows": op("echoRows", echo_item, [form], {
                "next": {"type": ["string", "null"], "format": "uri"}}),
            "/bomb": op("bombRows", bomb_item, [
                {"name": "cursor", "in": "query", "schema": {"type": "string"}}],
                {"next_cursor": {"type": ["string", "null"]}}),
        },
    }
