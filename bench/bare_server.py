"""The comparison for bench/serve.py: a bare MCP SDK server (low-level Server, stdio) whose one
tool runs the same query tether's items_in_an_order runs, with nothing else: no policy, no
validation, no as_of, no call log. Usage: python bench/bare_server.py WAREHOUSE.duckdb"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import duckdb
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

SQL = ("SELECT order_id, line_no, sku, quantity, unit_price_cents, line_amount_cents "
       "FROM order_lines WHERE order_id = $order_id ORDER BY order_id, line_no LIMIT 51")
con = duckdb.connect(sys.argv[1], read_only=True)


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(
        name="items_in_an_order", description="Items of an order.",
        input_schema={"type": "object", "properties": {"order_id": {"type": "integer"}}})])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                    ) -> types.CallToolResult:
    cur = con.cursor()
    cur.execute(SQL, {"order_id": (params.arguments or {}).get("order_id")})
    names = [d[0] for d in cur.description or []]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    data = {"rows": rows, "row_count": len(rows)}
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(data))],
                                structured_content=data)


async def main() -> None:
    server: Server[Any] = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
