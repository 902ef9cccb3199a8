"""A short tour of `tether serve` on the demo, as MCP clients see it (used by `make demo`).

Starts the server over stdio once per user with the official SDK client, and shows what the
same calls return to different people: identity, row filters, masks, as_of, units, errors.
Run: python -m tether.demo.tour PROJECT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

TETHER = str(Path(sys.executable).parent / "tether")


async def _session(project: str, user: str, calls: list[tuple[str, dict[str, Any]]]
                   ) -> list[Any]:
    params = StdioServerParameters(command=TETHER, args=["serve", "--project", project,
                                                         "--as-user", user],
                                   env={"PATH": os.environ.get("PATH", "")})
    async with Client(params) as c:
        return [await c.call_tool(name, args) for name, args in calls]


def _show(user: str, tool: str, result: Any, pick: Any) -> None:
    if result.is_error:
        print(f"  {user:9} {tool}: error (the model can act on it): {result.content[0].text}")
        return
    print(f"  {user:9} {tool}: {pick(result.structured_content)}")


def tour(project: str) -> None:
    Step = tuple[str, dict[str, Any]]
    active: Step = ("active_customers_by_region_and_fiscal_quarter",
                    {"period": "FY2027-Q1"})
    customers: Step = ("customers_by_region_and_segment", {"limit": 3})
    snapshot: Step = ("open_pipeline_by_stage_last_night", {"limit": 1})
    bad: Step = ("deals_by_stage_and_pipeline", {"stage": "WON"})
    steps: list[Step] = [active, customers, snapshot, bad]
    for user in ("fin.ana", "mgr.emea", "sup.sam"):
        results = anyio.run(_session, project, user, steps)
        _show(user, active[0], results[0], lambda d: json.dumps(
            {r["sales_region"]: r["active_customers"] for r in d["rows"]}))
        _show(user, customers[0], results[1], lambda d: json.dumps(
            [(r["sales_region"], r["email"]) for r in d["rows"]]))
        _show(user, snapshot[0], results[2], lambda d: f"as_of {d['as_of']} (the clock is "
              "2026-08-20T09:00Z: a nightly snapshot, 14 hours old)")
        _show(user, bad[0], results[3], lambda d: d)


if __name__ == "__main__":
    tour(sys.argv[1] if len(sys.argv) > 1 else ".")
