"""The write story for `make demo`: a regional manager puts an order on hold through the
`hold_order` write tool (a dry run, then the confirmation it returned), replays it (applied once),
is refused an order of another region and a move no action allows, sees what cancelling would do
to the backlog, is refused a release to a state the order never came from, and undoes the hold
with the calls the result names. On a copy of the demo
project and its warehouse (demo-out/writes), so the rest of the demo reads the data as it was.
Run: python -m tether.demo.write_tour PROJECT_DIR"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import duckdb
from mcp import Client

from tether.config import load_project
from tether.drift.publish import build
from tether.registry import open_registry
from tether.registry.writes import writes
from tether.serve.server import TetherServer
from tether.sources.duckdb import READ_ONLY_CONFIG

MANAGER = "mgr.emea"


def _copy(demo: Path) -> Path:
    d = demo / "writes"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    for name in ("tether.yaml", "warehouse.duckdb"):
        shutil.copy(demo / name, d / name)
    build(load_project(d))
    return d


def _pick(d: Path) -> dict[str, int]:
    """An EMEA order that may be held, an AMER one, an EMEA one that has shipped."""
    with duckdb.connect(str(d / "warehouse.duckdb"), read_only=True,
                        config=dict(READ_ONLY_CONFIG)) as con:
        def first(where: str) -> int:
            return int(con.execute(f"SELECT min(order_id) FROM orders WHERE {where}"
                                   ).fetchall()[0][0])
        return {"hold": first("sales_region = 'EMEA' AND status = 'NEW' AND amount_cents > 0"),
                "other": first("sales_region = 'AMER' AND status IN ('NEW', 'PAID')"),
                "shipped": first("sales_region = 'EMEA' AND status = 'SHIPPED'")}


def _said(result: Any) -> str:
    return str(result.content[0].text)


def _data(result: Any) -> dict[str, Any]:
    return dict(result.structured_content or {})


def story(project_dir: str) -> None:
    d = _copy(Path(project_dir).resolve())
    ids = _pick(d)
    server = TetherServer(load_project(d), stdio_user=MANAGER)
    hold = {"order_id": ids["hold"]}

    async def go() -> None:
        async with Client(server.server) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            t = tools["hold_order"]
            hint = t.annotations.destructive_hint if t.annotations else None
            print(f"  {MANAGER} sees hold_order (destructiveHint {hint}): "
                  f"{'. '.join((t.description or '').split('. ')[:3])}.")
            dry = await c.call_tool("hold_order", hold)
            row = _data(dry)["changes"][0]
            print(f"  dry run: {_said(dry)}\n    order {row['key']['order_id']}: "
                  f"{row['before']} -> {row['after']}; preconditions "
                  f"{[p['rule'] + ': ' + p['after'] for p in _data(dry)['preconditions']]}")
            for said in _data(dry)["consequences"]:
                print(f"    downstream: {said}")
            bare = await c.call_tool("hold_order", {**hold, "dry_run": False})
            print(f"  without the confirmation: {_said(bare)[:110]}...")
            token = _data(dry)["confirmation"]
            done = await c.call_tool("hold_order", {**hold, "dry_run": False,
                                                    "confirmation": token})
            print(f"  with it: {_said(done)}")
            again = await c.call_tool("hold_order", {**hold, "dry_run": False,
                                                     "confirmation": token})
            print(f"  the same confirmation again: {_said(again)}")
            other = await c.call_tool("hold_order", {"order_id": ids["other"]})
            print(f"  an AMER order: {_said(other)[:110]}")
            shipped = await c.call_tool("cancel_order", {"order_id": ids["shipped"]})
            print(f"  cancel a shipped order: {_said(shipped)[:150]}")
            cancel = await c.call_tool("cancel_order", hold)
            print(f"  what cancelling the held order would do (a dry run): "
                  f"{'; '.join(_data(cancel)['consequences'][:1])}")
            elsewhere = await c.call_tool("release_order", {**hold, "status": "PAID"})
            print(f"  release it to PAID, a state it never came from: {_said(elsewhere)[:170]}")
            for u in _data(done)["undo"]:
                d1 = await c.call_tool(u["tool"], u["arguments"])
                d2 = await c.call_tool(u["tool"], {**u["arguments"], "dry_run": False,
                                                   "confirmation": _data(d1)["confirmation"]})
                print(f"  undo ({u['tool']} {u['arguments']}): {_said(d2)}; order "
                      f"{ids['hold']} is {_data(d2)['changes'][0]['after']} again")

    try:
        anyio.run(go)
    finally:
        server.close()
    registry = open_registry(load_project(d))
    try:
        kept = writes(registry)
    finally:
        registry.close()
    print(f"  the registry's writes: {len(kept)} applied, each with its rows before and after "
          f"({', '.join(w['tool'] + ' ' + w['write_id'] for w in reversed(kept))})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tether.demo.write_tour PROJECT_DIR")
    story(sys.argv[1])
