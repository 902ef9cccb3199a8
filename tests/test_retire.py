"""Retiring and rolling back tools: a tool that leaves tether.yaml is retired through a review,
served with its reason for the deprecation window, then gone; `tether retire` and `tether
rollback` go through the same gate with `tether check`'s exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import copy_project, run_cli
from tether.config import load_project
from tether.drift.publish import build
from tether.serve.server import TetherServer

OLD, NEW = "items_in_an_order", "items_of_an_order"


@pytest.fixture
def demo(demo_dir: Path, tmp_path: Path) -> Path:
    d = copy_project(demo_dir, tmp_path / "retire")
    build(load_project(d))
    return d


def _set_clock(d: Path, clock: str) -> None:
    p = d / "tether.yaml"
    lines = p.read_text().splitlines()
    p.write_text("\n".join(f"clock: {clock}" if ln.startswith("clock:") else ln
                           for ln in lines) + "\n")


def _listed_and_call(d: Path, name: str, args: dict[str, Any]) -> tuple[dict[str, str], Any]:
    server = TetherServer(load_project(d), stdio_user="fin.ana")

    async def go() -> tuple[dict[str, str], Any]:
        async with Client(server.server) as c:
            tools = {t.name: t.description or "" for t in (await c.list_tools()).tools}
            return tools, await c.call_tool(name, args)

    try:
        return anyio.run(go)
    finally:
        server.close()


def _versions(d: Path, tool: str) -> list[dict[str, Any]]:
    r = run_cli("versions", tool, "--project", str(d), "--json")
    assert r.returncode == 0, r.stderr
    rows: list[dict[str, Any]] = json.loads(r.stdout)
    return rows


def test_a_renamed_tool_is_retired_through_a_review_then_gone(demo: Path) -> None:
    p = demo / "tether.yaml"
    p.write_text(p.read_text().replace(f"name: {OLD},", f"name: {NEW},"))
    r = run_cli("check", "--project", str(demo), "--json")
    assert r.returncode == 11, r.stdout + r.stderr  # the new name published, the old waits
    result = json.loads(r.stdout)
    by_tool = {t["tool"]: t for t in result["tools"]}
    assert by_tool[NEW]["outcome"] == "published"
    old = by_tool[OLD]
    assert (old["outcome"], old["version"], old["change_kind"]) == ("pending", "2.0.0",
                                                                    "breaking")
    # until a person decides, the old tool is served as it was
    listed, res = _listed_and_call(demo, OLD, {"order_id": 1})
    assert OLD in listed and "Retired" not in listed[OLD] and not res.is_error
    # a second check does not ask twice
    again = json.loads(run_cli("check", "--project", str(demo), "--json").stdout)
    assert {t["tool"]: t["review"] for t in again["tools"]}[OLD] == old["review"]
    assert len(again["reviews"]) == 0
    r = run_cli("review", "approve", str(old["review"]), "--as", "fin.ana", "--project", str(demo))
    assert r.returncode == 0, r.stderr
    listed, res = _listed_and_call(demo, OLD, {"order_id": 1})
    assert "Retired in 2.0.0" in listed[OLD] and "Served until 2026-09-19" in listed[OLD]
    assert not res.is_error  # still answers during the window
    assert _versions(demo, OLD)[-1]["status"] == "retired"
    assert (demo / "tools" / f"{OLD}.json").exists()
    # the window is over: not listed, and a call says when and why
    _set_clock(demo, "2026-09-20T09:00:00Z")
    listed, res = _listed_and_call(demo, OLD, {"order_id": 1})
    assert OLD not in listed and NEW in listed
    text = res.content[0].text
    assert res.is_error and "retired on 2026-09-19" in text and "no longer generated" in text
    assert run_cli("check", "--project", str(demo)).returncode in (0, 10)
    assert not (demo / "tools" / f"{OLD}.json").exists()


def test_retire_and_rollback_commands(demo: Path) -> None:
    tool = "deals_by_stage_and_pipeline"
    r = run_cli("retire", tool, "--reason", "replaced by the pipeline metrics",
                "--project", str(demo), "--json")
    assert r.returncode == 11, r.stdout + r.stderr
    review = json.loads(r.stdout)["reviews"][0]
    assert run_cli("review", "approve", str(review), "--as", "fin.ana", "--project",
                   str(demo)).returncode == 0
    listed, _ = _listed_and_call(demo, tool, {"limit": 1})
    assert "Retired in 2.0.0: replaced by the pipeline metrics" in listed[tool]
    again = run_cli("retire", tool, "--project", str(demo))
    assert again.returncode == 2 and "already retired" in again.stderr
    # bringing it back: the 1.0.0 definition as 2.1.0, published at once (it adds a tool back)
    r = run_cli("rollback", tool, "--to", "1.0.0", "--project", str(demo), "--json")
    assert r.returncode == 10, r.stdout + r.stderr
    listed, res = _listed_and_call(demo, tool, {"limit": 1})
    assert "Retired" not in listed[tool] and not res.is_error
    assert "Rolled back to the definition of 1.0.0" in listed[tool]
    assert [v["version"] for v in _versions(demo, tool)] == ["1.0.0", "2.0.0", "2.1.0"]
    # errors name what is missing, exit 2, nothing published
    for args, says in ((("rollback", tool, "--to", "9.9.9"), "has no version 9.9.9"),
                       (("rollback", "nope", "--to", "1.0.0"), "no published tool 'nope'"),
                       (("retire", "nope"), "no published tool 'nope'")):
        bad = run_cli(*args, "--project", str(demo))
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr
    assert [v["version"] for v in _versions(demo, tool)] == ["1.0.0", "2.0.0", "2.1.0"]
