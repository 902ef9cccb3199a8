"""The comparison for bench/serve.py: a bare MCP SDK server (low-level Server, stdio) that runs
exactly the statements tether ran, and nothing else: no argument validation, no policy, no SQL
building, no call log.

STATEMENTS.json (written by bench/serve.py from the evidence of real tether calls) maps a tool
name (one per benchmarked path) to {canonical JSON of the call's arguments: statement}, where a
statement is {sql, params, as_of_sql, as_of_params}: the statement tether sent to the engine with
its bound values (the mask key filled in), the number of rows tether returned (`keep`: tether
fetches one row more than a page to know whether there is a next page), and the statement behind
the result's as_of. A call runs `sql` with `params` and returns its first `keep` rows as JSON,
with as_of from `as_of_sql`, which it runs at most once per AS_OF_TTL seconds per statement and
parameters, as tether caches as_of (none when as_of_sql is null: tether then takes as_of from the
database file's time).

STATEMENTS.json may also hold `_schemas`: {path: the output schema tether's tool declares}; such
a path is served with that schema (the client then checks the same rows on both sides) and again
as PATH_plain without one.

Usage: python bench/bare_server.py WAREHOUSE.duckdb STATEMENTS.json [--http PORT]"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import sys
import time
import uuid
from typing import Any

import anyio
import duckdb
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

TOTAL = "tether_total_rows"
AS_OF_TTL = 2.0  # seconds, as tether's Executor.freshness_ttl

con = duckdb.connect(sys.argv[1], read_only=True)
with open(sys.argv[2], encoding="utf-8") as f:
    STATEMENTS: dict[str, dict[str, dict[str, Any]]] = json.load(f)
# optional: the output schema the benchmarked tether tool declares, per path, so that the client
# checks the same rows against the same schema on both sides (then the ratio is the servers');
# each such path is also served as PATH_plain with none, as a schema-less server would be
SCHEMAS: dict[str, dict[str, Any]] = STATEMENTS.pop("_schemas", {})  # type: ignore[assignment]
as_of_cache: dict[str, tuple[float, str | None]] = {}


def plain(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return (v if v.tzinfo else v.replace(tzinfo=dt.UTC)).isoformat()
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    return v


def as_of(stmt: dict[str, Any]) -> str | None:
    if not stmt["as_of_sql"]:
        return None
    key = stmt["as_of_key"]
    cached = as_of_cache.get(key)
    if cached and time.monotonic() < cached[0]:
        return cached[1]
    cur = con.cursor()
    cur.execute(stmt["as_of_sql"], stmt["as_of_params"] or None)
    raw = cur.fetchall()[0][0]
    cur.close()
    value = plain(raw) if isinstance(raw, dt.datetime) else None
    as_of_cache[key] = (time.monotonic() + AS_OF_TTL, value)
    return value


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    tools = [types.Tool(name=name, description=f"The {name} benchmark call.",
                        input_schema={"type": "object"}, output_schema=SCHEMAS.get(name))
             for name in STATEMENTS]
    tools += [types.Tool(name=f"{name}_plain", description=f"The {name} benchmark call.",
                         input_schema={"type": "object"}) for name in SCHEMAS]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                    ) -> types.CallToolResult:
    stmt = STATEMENTS[params.name.removesuffix("_plain")][
        json.dumps(params.arguments or {}, sort_keys=True)]
    cur = con.cursor()
    cur.execute(stmt["sql"], stmt["params"] or None)
    names = [d[0] for d in cur.description or []]
    rows = [dict(zip(names, map(plain, r), strict=True)) for r in cur.fetchall()[:stmt["keep"]]]
    cur.close()
    data: dict[str, Any] = {"rows": rows, "row_count": len(rows), "as_of": as_of(stmt)}
    if rows and TOTAL in rows[0]:  # the window count tether's listing statement carries
        data["total_rows"] = rows[0][TOTAL]
    for r in rows:  # and the totals beside it (tether_total_rows_0, ...), as tether drops them
        for k in [k for k in r if k.startswith(TOTAL)]:
            del r[k]
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(data))],
                                structured_content=data)


async def main() -> None:
    server: Server[Any] = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main_http(port: int) -> None:
    """The same server over streamable HTTP on 127.0.0.1 (no auth), for bench/scale.py."""
    import uvicorn

    server: Server[Any] = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)
    uvicorn.run(server.streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=port,
                log_level="warning")


if len(sys.argv) > 4 and sys.argv[3] == "--http":
    main_http(int(sys.argv[4]))
else:
    anyio.run(main)
