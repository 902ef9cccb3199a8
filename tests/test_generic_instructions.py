"""Generic mode says what it is and promises nothing its results do not keep: its instructions
name its three tools and as_of, never the grounded server's units and identifier schemes (an
agent read that promise and looked for them); a statement's as_of comes with what it is
(as_of_basis: the newest value of which time column; of several tables, the stalest one's,
named)."""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp import Client

from conftest import call_tools, duck_tables, run_cli
from tether.config import load_project
from tether.serve.server import TetherServer

TABLES = {"visits": ("visit_id integer PRIMARY KEY, visited_at TIMESTAMPTZ, pages integer",
                     [(1, "2026-03-01 10:00:00+00", 3), (2, "2026-03-04 12:30:00+00", 5)]),
          "signups": ("signup_id integer PRIMARY KEY, signed_at TIMESTAMPTZ",
                      [(1, "2026-02-01 09:00:00+00")])}


def _instructions(project: object, mode: str) -> str:
    server = TetherServer(project, mode=mode, stdio_user="x")  # type: ignore[arg-type]

    async def go() -> str:
        async with Client(server.server) as c:
            return str(c.instructions)
    try:
        return anyio.run(go)
    finally:
        server.close()


def test_generic_says_what_it_is_and_what_as_of_is(tmp_path: Path) -> None:
    db = duck_tables(tmp_path / "site.duckdb", TABLES)
    assert run_cli("init", "p", "--source", db, cwd=tmp_path,
                   env={"TETHER_USER": "x"}).returncode == 0
    assert run_cli("build", "--project", "p", cwd=tmp_path).returncode == 0
    project = load_project(tmp_path / "p")
    generic = _instructions(project, "generic")
    assert "run_sql" in generic and "as_of" in generic
    assert "units" not in generic and "scheme" not in generic
    assert "units" in _instructions(project, "grounded")
    ran, = call_tools(project, "x", [("run_sql", {"sql": "SELECT sum(pages) AS n FROM visits"})],
                      mode="generic")
    out = ran.structured_content
    assert out["rows"] == [{"n": 8}] and out["as_of"].startswith("2026-03-04T12:30")
    assert out["as_of_basis"] == "the newest visited_at", out
    # of two tables, as_of is the stalest one's newest time, and the basis names that table
    both, = call_tools(project, "x", [("run_sql", {"sql": "SELECT count(*) AS n FROM visits, "
                                                   "signups"})], mode="generic")
    out = both.structured_content
    assert out["as_of"].startswith("2026-02-01T09:00"), out
    assert out["as_of_basis"] == ("the newest signed_at of signups, the stalest of the 2 "
                                  "tables read"), out
