"""A small real HTTP API for the OpenAPI source tests: Starlette, served by uvicorn on a free port.

A help desk: tickets (cursor pages, an enum status with a documented value no ticket holds, a
per-user bearer credential: each user reads their own tickets), one ticket by id, agents (page
numbers, a top-level list), and operations that change state (create, close, delete), which a
read-only server must never offer. A fixed-window rate limit per credential answers 429 with
Retry-After; the test sets the window's size through a control route the spec does not name, and
reads what the API received (every request, with its query and headers) the same way.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

TOKENS = {"tok-ann": "ann", "tok-ben": "ben"}
STATUSES = ["open", "pending", "closed"]
DATE = "Tue, 01 Dec 2026 12:00:00 GMT"


def tickets() -> list[dict[str, Any]]:
    out = []
    for i in range(1, 46):
        owner = "ann" if i % 2 else "ben"
        out.append({"id": f"TK-{1000 + i}", "subject": f"Printer problem {i}",
                    "status": STATUSES[i % 3], "owner": owner, "amount_cents": 100 * i,
                    "opened_at": (dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
                                  + dt.timedelta(hours=i)).isoformat()})
    return out


AGENTS = [{"number": i, "login": f"agent{i}", "team": "tier1" if i % 2 else "tier2"}
          for i in range(1, 8)]


def spec(**change: Any) -> dict[str, Any]:
    """The API's OpenAPI description; ``change`` edits it as a new API version would
    (drop_field, add_status, rename_param)."""
    ticket_props: dict[str, Any] = {
        "id": {"type": "string", "description": "The ticket number.", "pattern": "^TK-[0-9]+$"},
        "subject": {"type": "string", "description": "What the requester wrote."},
        "status": {"type": "string", "enum": [*STATUSES, "void"]},
        "owner": {"type": "string", "description": "Login of the requester."},
        "amount_cents": {"type": "integer", "description": "Amount claimed, in cents."},
        "opened_at": {"type": "string", "format": "date-time"},
    }
    if change.get("drop_field"):
        del ticket_props[change["drop_field"]]
    statuses = [*STATUSES, "void"] + ([change["add_status"]] if change.get("add_status") else [])
    ticket_props["status"]["enum"] = statuses
    status_param = change.get("rename_param", "status")
    return {
        "openapi": "3.1.0",
        "info": {"title": "Help desk", "version": "1.0"},
        "servers": [{"url": "https://helpdesk.invalid/api"}],
        "security": [{"bearerAuth": []}],
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Ticket": {"type": "object", "required": ["id", "status"],
                           "properties": ticket_props},
                "Agent": {"type": "object", "properties": {
                    "number": {"type": "integer", "description": "The agent's number."},
                    "login": {"type": "string", "description": "Sign-in name."},
                    "team": {"type": "string", "description": "Support tier."}}},
            },
            "responses": {"TooMany": {"description": "Rate limited", "headers": {
                "Retry-After": {"schema": {"type": "integer"}}}}},
        },
        "paths": {
            "/tickets": {
                "get": {
                    "operationId": "listTickets", "summary": "List the caller's tickets.",
                    "description": "Tickets the caller opened, newest first.",
                    "parameters": [
                        {"name": status_param, "in": "query", "description": "Only tickets "
                         "in this state.", "schema": {"type": "string", "enum": statuses}},
                        {"name": "opened_since", "in": "query", "description": "Only tickets "
                         "opened at or after this time.",
                         "schema": {"type": "string", "format": "date-time"}},
                        {"name": "cursor", "in": "query", "schema": {"type": "string"}},
                        {"name": "limit", "in": "query",
                         "schema": {"type": "integer", "minimum": 1, "maximum": 20}},
                    ],
                    "responses": {
                        "200": {"description": "A page", "content": {"application/json": {
                            "schema": {"type": "object", "properties": {
                                "data": {"type": "array",
                                         "items": {"$ref": "#/components/schemas/Ticket"}},
                                "next_cursor": {"type": ["string", "null"]}}}}}},
                        "429": {"$ref": "#/components/responses/TooMany"},
                    },
                },
                "post": {"operationId": "createTicket", "summary": "Open a ticket.",
                         "responses": {"201": {"description": "Created"}}},
            },
            "/tickets/{ticket_id}": {
                "get": {"operationId": "getTicket", "summary": "One ticket by its number.",
                        "parameters": [{"name": "ticket_id", "in": "path", "required": True,
                                        "schema": {"type": "string"}}],
                        "responses": {"200": {"description": "The ticket", "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/Ticket"}}}}}},
                "delete": {"operationId": "deleteTicket", "summary": "Delete a ticket.",
                           "responses": {"204": {"description": "Gone"}}},
            },
            "/tickets/{ticket_id}/close": {
                "post": {"operationId": "closeTicket", "summary": "Close a ticket.",
                         "responses": {"200": {"description": "Closed"}}},
            },
            "/agents": {
                "get": {"operationId": "listAgents", "summary": "The help desk's agents.",
                        "parameters": [
                            {"name": "since", "in": "query", "description": "Only agents "
                             "numbered above this.", "schema": {"type": "integer"}},
                            {"name": "page", "in": "query",
                             "schema": {"type": "integer", "minimum": 1}},
                            {"name": "per_page", "in": "query",
                             "schema": {"type": "integer", "maximum": 3}}],
                        "responses": {"200": {"description": "Agents", "content": {
                            "application/json": {"schema": {
                                "type": "array",
                                "items": {"$ref": "#/components/schemas/Agent"}}}}}}},
            },
        },
    }


class HelpDesk:
    def __init__(self) -> None:
        self.rows = tickets()
        self.seen: list[dict[str, Any]] = []  # every request: path, query, headers
        self.rate = 1000  # requests per credential per window
        self.window = 1.0
        self.counts: dict[tuple[str, int], int] = {}
        self.lock = threading.Lock()

    def caller(self, request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        return TOKENS.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None

    def gate(self, request: Request) -> tuple[str | None, JSONResponse | None]:
        with self.lock:
            self.seen.append({"method": request.method, "path": request.url.path,
                              "query": dict(request.query_params),
                              "headers": dict(request.headers)})
        user = self.caller(request)
        if user is None:
            return None, JSONResponse({"message": "bad credential"}, status_code=401)
        slot = (user, int(time.monotonic() / self.window))
        with self.lock:
            self.counts[slot] = self.counts.get(slot, 0) + 1
            over = self.counts[slot] > self.rate
        if over:
            return None, JSONResponse({"message": "slow down"}, status_code=429,
                                      headers={"Retry-After": "1"})
        return user, None

    def app(self) -> Starlette:
        async def list_tickets(request: Request) -> JSONResponse:
            user, refused = self.gate(request)
            if refused:
                return refused
            q = request.query_params
            mine = [t for t in self.rows if t["owner"] == user
                    and (q.get("status") is None or t["status"] == q["status"])
                    and (q.get("opened_since") is None
                         or dt.datetime.fromisoformat(t["opened_at"])
                         >= dt.datetime.fromisoformat(q["opened_since"]))]
            start = int(q.get("cursor") or 0)
            size = min(int(q.get("limit") or 10), 20)
            page = mine[start:start + size]
            nxt = str(start + size) if start + size < len(mine) else None
            return JSONResponse({"data": page, "next_cursor": nxt}, headers={"Date": DATE})

        async def get_ticket(request: Request) -> JSONResponse:
            user, refused = self.gate(request)
            if refused:
                return refused
            tid = request.path_params["ticket_id"]
            found = [t for t in self.rows if t["id"] == tid and t["owner"] == user]
            if not found:
                return JSONResponse({"message": f"no ticket {tid}"}, status_code=404)
            return JSONResponse(found[0], headers={"Date": DATE})

        async def list_agents(request: Request) -> JSONResponse:
            _user, refused = self.gate(request)
            if refused:
                return refused
            page = int(request.query_params.get("page") or 1)
            per = min(int(request.query_params.get("per_page") or 3), 3)
            since = int(request.query_params.get("since") or 0)
            chosen = [a for a in AGENTS if int(a["number"]) > since]
            return JSONResponse(chosen[(page - 1) * per:page * per])

        async def mutate(request: Request) -> JSONResponse:
            self.gate(request)
            return JSONResponse({"message": "changed"}, status_code=200)

        async def control(request: Request) -> JSONResponse:
            body = await request.json()
            self.rate = int(body.get("rate", self.rate))
            self.counts.clear()
            return JSONResponse({"rate": self.rate})

        return Starlette(routes=[
            Route("/api/tickets", list_tickets, methods=["GET"]),
            Route("/api/tickets", mutate, methods=["POST"]),
            Route("/api/tickets/{ticket_id}", get_ticket, methods=["GET"]),
            Route("/api/tickets/{ticket_id}", mutate, methods=["DELETE"]),
            Route("/api/tickets/{ticket_id}/close", mutate, methods=["POST"]),
            Route("/api/agents", list_agents, methods=["GET"]),
            Route("/_control", control, methods=["POST"]),
        ])


@contextlib.contextmanager
def running(port: int) -> Iterator[HelpDesk]:
    desk = HelpDesk()
    with serving(desk.app(), port):
        yield desk


def write_project(root: Path, port: int, **change: Any) -> None:
    """A tether project over the help desk: the spec beside tether.yaml, each caller's own
    credential, samples read as ann."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "helpdesk.yaml").write_text(yaml.safe_dump(spec(**change), sort_keys=False))
    (root / "tether.yaml").write_text(f"""\
sources:
  desk:
    kind: openapi
    spec: helpdesk.yaml
    base_url: http://127.0.0.1:{port}/api
    auth: {{scheme: bearerAuth, credential: token_store, sample_as: ann}}
    sample_calls: 3
products:
  tickets:
    table: listTickets
    grain: one row per ticket
    identifiers: {{id: ticket_number}}
    columns:
      amount_cents: {{unit: USD cents}}
  ticket:
    table: getTicket
  agents:
    table: listAgents
identifier_schemes:
  ticket_number: {{pattern: "^TK-[0-9]+$", canonical: true}}
policies:
  roles:
    staff: {{tools: ["*"]}}
    outsider: {{tools: ["*"], tables: {{deny: [tickets, ticket]}}}}
  users:
    ann: {{role: staff}}
    ben: {{role: staff}}
    cyd: {{role: staff}}
    oz: {{role: outsider}}
""")


class Catalog:
    """A second API, misbehaving on purpose: an API key in the query, Link-header pages that
    copy the query (the key too), a cursor that points back at itself, a rate limit that asks
    for no wait at all, an error that quotes the request, values of no declared type."""

    KEY = "sk-live-SECRET123"

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        def ok(request: Request) -> JSONResponse | None:
            self.seen.append({"path": request.url.path, "query": dict(request.query_params)})
            if request.query_params.get("api_key") != self.KEY:
                return JSONResponse({"message": "bad key"}, status_code=401)
            return None

        async def items(request: Request) -> JSONResponse:
            if (refused := ok(request)) is not None:
                return refused
            page = int(request.query_params.get("page") or 1)
            rows = [{"sku": f"S{page}{i}", "attrs": "plain text" if i else {"k": 1}, "ID": i}
                    for i in range(2)]
            headers = {}
            if page < 3:
                headers["Link"] = (f'<{request.url.scheme}://{request.url.netloc}/items?page='
                                   f'{page + 1}&api_key={self.KEY}>; rel="next"')
            return JSONResponse(rows, headers=headers)

        async def loop(request: Request) -> JSONResponse:
            if (refused := ok(request)) is not None:
                return refused
            return JSONResponse({"data": [{"sku": "same"}], "next_cursor": "again"})

        async def busy(request: Request) -> JSONResponse:
            if (refused := ok(request)) is not None:
                return refused
            return JSONResponse({"message": "slow down"}, status_code=429,
                                headers={"Retry-After": "0"})

        async def broken(request: Request) -> JSONResponse:
            if (refused := ok(request)) is not None:
                return refused
            return JSONResponse({"message": f"bad request {request.url}"}, status_code=400)

        async def slow(request: Request) -> JSONResponse:
            await anyio.sleep(3)
            return JSONResponse([])

        return Starlette(routes=[Route("/items", items), Route("/loop", loop),
                                 Route("/busy", busy), Route("/broken", broken),
                                 Route("/slow", slow)])


def catalog_spec() -> dict[str, Any]:
    item = {"type": "object", "properties": {
        "sku": {"type": "string"}, "attrs": {}, "ID": {"type": "integer"},
        "id": {"type": "integer"}}}

    def op(op_id: str, body: dict[str, Any], params: list[dict[str, Any]] | None = None,
           headers: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"get": {"operationId": op_id, "parameters": params or [], "responses": {
            "200": {"description": "ok", "headers": headers or {},
                    "content": {"application/json": {"schema": body}}},
            "429": {"description": "slow down"}}}}

    return {
        "openapi": "3.0.3", "info": {"title": "Catalog", "version": "1"},
        "security": [{"key": []}],
        "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "query",
                                                   "name": "api_key"}}},
        "paths": {
            "/items": op("listItems", {"type": "array", "items": item},
                         [{"name": "page", "in": "query", "schema": {"type": "integer"}}],
                         {"Link": {"schema": {"type": "string"}}}),
            "/loop": op("listLoop", {"type": "object", "properties": {
                "data": {"type": "array", "items": item}, "next_cursor": {"type": "string"}}},
                [{"name": "cursor", "in": "query", "schema": {"type": "string"}}]),
            "/busy": op("listBusy", {"type": "array", "items": item}),
            "/broken": op("listBroken", {"type": "array", "items": item}),
            "/slow": op("listSlow", {"type": "array", "items": item}),
        },
    }


@contextlib.contextmanager
def serving(app: Starlette, port: int) -> Iterator[None]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def hostile_spec() -> dict[str, Any]:
    """A spec whose words try to speak to the model (tests/attacks/spec_injection.py): its
    title, an operation's summary and description, a parameter's and a field's description. A
    one-word operation (getBomb, no parameter) is the one a title could once name."""
    from attacks.spec_injection import PAYLOAD, TITLE

    item = {"type": "object", "properties": {
        "name": {"type": "string", "description": PAYLOAD},
        "colour": {"type": "string"}}}
    ok = {"200": {"description": "ok", "content": {"application/json": {
        "schema": {"type": "array", "items": item}}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": TITLE, "version": "1", "description": PAYLOAD},
        "servers": [{"url": "https://gadgets.invalid"}],
        "paths": {
            "/bomb": {"get": {"operationId": "getBomb", "summary": PAYLOAD,
                              "description": PAYLOAD, "responses": ok}},
            "/gadgets": {"get": {"operationId": "listGadgets", "summary": "Gadgets in stock.",
                                 "description": PAYLOAD, "parameters": [
                                     {"name": "colour", "in": "query", "description": PAYLOAD,
                                      "schema": {"type": "string"}}],
                                 "responses": ok}},
        },
    }


def write_hostile_project(root: Path) -> Path:
    """A tether project over the hostile spec: a shared credential-less API, not sampled (the
    tools are what the spec says)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "gadgets.json").write_text(json.dumps(hostile_spec()))
    (root / "tether.yaml").write_text("""\
sources:
  shop:
    kind: openapi
    spec: gadgets.json
    sample_calls: 0
products:
  bomb: {table: getBomb}
  gadgets: {table: listGadgets}
policies:
  roles: {all: {tools: ["*"]}}
  users: {amy: {role: all}}
""")
    return root
