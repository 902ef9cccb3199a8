"""The MCP Inspector CLI (0.15, the last release that runs on Node 20) against `tether serve`
over stdio. It sends no headers and every --tool-arg as a string, so stdio with --as-user it is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_project
from tether.config import load_project
from tether.drift.publish import build

CACHE = Path(os.environ.get("TETHER_TEST_CACHE", Path.home() / ".cache" / "tether-tests"))
VERSION = "0.15.0"


@pytest.fixture(scope="module")
def inspector() -> Path:
    if shutil.which("npm") is None or shutil.which("npx") is None:
        pytest.skip("npm/npx not installed: the Inspector CLI test needs Node 20 and npm")
    folder = CACHE / f"inspector-{VERSION}"
    if not (folder / "node_modules" / ".bin" / "mcp-inspector").exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent",
                        f"@modelcontextprotocol/inspector@{VERSION}"], cwd=folder, check=True,
                       capture_output=True, timeout=600)
    return folder


def inspect(folder: Path, project: Path, user: str, *method: str) -> dict:  # type: ignore[type-arg]
    tether = str(Path(sys.executable).parent / "tether")
    res = subprocess.run(
        ["npx", "@modelcontextprotocol/inspector", "--cli", tether, "serve", "--project",
         str(project), "--as-user", user, *method],
        cwd=folder, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_inspector_lists_and_calls_tools(inspector: Path, demo_dir: Path, tmp_path: Path) -> None:
    d = copy_project(demo_dir, tmp_path / "insp")
    build(load_project(d))
    listed = inspect(inspector, d, "sup.sam", "--method", "tools/list")
    names = [t["name"] for t in listed["tools"]]
    assert names == sorted(names) and len(names) == 5
    assert all(t["annotations"]["readOnlyHint"] for t in listed["tools"])
    called = inspect(inspector, d, "mgr.emea", "--method", "tools/call", "--tool-name",
                     "deals_by_stage_and_pipeline", "--tool-arg", "stage=CLOSED_WON",
                     "--tool-arg", "pipeline=partner")
    rows = called["structuredContent"]["rows"]
    assert rows and {r["sales_region"] for r in rows} == {"EMEA"}
    assert {r["stage"] for r in rows} == {"CLOSED_WON"}
    bad = inspect(inspector, d, "mgr.emea", "--method", "tools/call", "--tool-name",
                  "deals_by_stage_and_pipeline", "--tool-arg", "stage=WON")
    assert bad["isError"] is True and "allowed values" in bad["content"][0]["text"]
