"""The comparison for bench/run_sql.py: a bare MCP SDK server (low-level Server, stdio) whose one
tool, run_sql, runs exactly the statement tether sends to the engine for the benchmark's query
(read from a JSON file: the SQL text and its bound parameters; a leading comment in the call's
text is ignored), with nothing else: no parsing, no policy, no call log.
Usage: python bench/bare_sql_server.py WAREHOUSE.duckdb STATEMENT.json"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import duckdb
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

con = duckdb.connect(sys.argv[1], read_only=True)
with open(sys.argv[2], encoding="utf-8") as f:
    STATEMENTS: dict[str, dict[str, Any]] = json.load(f)


def plain(v: Any) -> Any:
    return v if isinstance(v, int | float | str | bool) or v is None else str(v)


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(
        name="run_sql", description="Run a SQL query.",
        input_schema={"type": "object", "properties": {"sql": {"type": "string"}}})])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                    ) -> types.CallToolResult:
    text = str((params.arguments or {})["sql"])
    stmt = STATEMENTS[text.split("*/", 1)[1].strip() if text.startswith("/*") else text]
    cur = con.cursor()
    cur.execute(stmt["sql"], stmt["params"] or None)
    names = [d[0] for d in cur.description or []]
    rows = [dict(zip(names, map(plain, r), strict=True)) for r in cur.fetchall()]
    data = {"rows": rows, "row_count": len(rows)}
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(data))],
                                structured_content=data)


async def main() -> None:
    server: Server[Any] = Server("bare-sql", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
