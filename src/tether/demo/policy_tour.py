"""The policy-review story for `make demo`: a regional manager widens his own row filter in
tether.yaml; `tether check` holds it for a reviewer (exit 11); his running server and a new one
keep the approved policy; he cannot approve it; a reviewer does, and the server that was running
all along enforces it without a restart. On a copy of the demo project (its own registry), so the
rest of the demo keeps the demo's policy.
Run: python -m tether.demo.policy_tour PROJECT_DIR"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from tether.config import load_project
from tether.drift.check import check, decide
from tether.drift.publish import build
from tether.errors import TetherError
from tether.registry import open_registry
from tether.serve.server import TetherServer

MANAGER, REVIEWER = "mgr.emea", "fin.ana"
TOOL, ARGS = "customers_by_region_and_segment", {"count_by": "segment"}
FILTER = 'customers: "sales_region = {{ user.region }}"'
WIDER = "customers: \"sales_region = {{ user.region }} OR segment = 'SMB'\""


def _copy(demo: Path) -> Path:
    """The demo's tether.yaml beside a registry of its own, over the same warehouse file."""
    d = demo / "policy-review"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    text = (demo / "tether.yaml").read_text().replace(
        "duckdb:///warehouse.duckdb", f"duckdb:///{demo / 'warehouse.duckdb'}")
    (d / "tether.yaml").write_text(text)
    build(load_project(d))
    return d


def _counts(result: Any) -> str:
    if result.is_error:
        return str(result.content[0].text)[:120]
    return str(result.content[0].text).split(";")[0]


def story(project_dir: str) -> None:
    d = _copy(Path(project_dir).resolve())
    server = TetherServer(load_project(d), stdio_user=MANAGER)

    async def go() -> None:
        async with Client(server.server) as c, anyio.create_task_group() as tg:
            tg.start_soon(server.watch, 0.2)
            print(f"  {MANAGER}'s server, started now: {_counts(await c.call_tool(TOOL, ARGS))}"
                  f" (policy {server.policy_version})")
            path = d / "tether.yaml"
            path.write_text(path.read_text().replace(FILTER, WIDER))
            print(f"  {MANAGER} edits tether.yaml: {WIDER}")
            result = await anyio.to_thread.run_sync(
                lambda: check(load_project(d), author=MANAGER))
            policy = next(o for o in result.outcomes if o.tool == "policy")
            print(f"  tether check --as {MANAGER}: exit {result.exit_code}; policy "
                  f"{policy.version} {policy.outcome} (review {policy.review}): "
                  f"{policy.change_note}")
            await anyio.sleep(0.6)
            print(f"  his running server meanwhile: {_counts(await c.call_tool(TOOL, ARGS))}")
            fresh = TetherServer(load_project(d), stdio_user=MANAGER)
            async with Client(fresh.server) as c2:
                print(f"  a server started after the edit: "
                      f"{_counts(await c2.call_tool(TOOL, ARGS))}")
            fresh.close()
            rid = int(policy.review or 0)
            try:
                decide(load_project(d), rid, True, MANAGER)
            except TetherError as e:
                print(f"  {MANAGER} approves it himself: refused ({e.message[:90]}...)")
            await anyio.to_thread.run_sync(lambda: decide(load_project(d), rid, True, REVIEWER))
            print(f"  {REVIEWER} approves review {rid}")
            deadline = time.monotonic() + 10
            while server.policy_version != policy.version and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            print(f"  the same running server, no restart: "
                  f"{_counts(await c.call_tool(TOOL, ARGS))} (policy {server.policy_version})")
            tg.cancel_scope.cancel()

    try:
        anyio.run(go)
    finally:
        server.close()
    registry = open_registry(load_project(d))
    try:
        versions = [v.version for v in registry.versions("policy")]
    finally:
        registry.close()
    print(f"  tether versions policy: {', '.join(versions)} (in {d})")


if __name__ == "__main__":
    story(sys.argv[1] if len(sys.argv) > 1 else ".")
