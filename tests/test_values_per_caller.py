"""Values per caller: a filter of too many values to list (24 countries) says example values to
each caller as their role reads the product: the most frequent over every row to a role that
reads it whole, whatever another role's filter; the values of their own rows to a role whose
filter narrows it (never another region's); none where the column is masked. An empty result
for a value that matches none of theirs says the values they may see ("United States" is no
country of theirs; "USA" is), instead of a bare zero. DuckDB and PostgreSQL. A chain of shops,
in no test warehouse's domain."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client

from conftest import call_tools, duck_tables, pg_tables
from tether.config import load_project
from tether.drift.publish import build
from tether.serve.server import TetherServer

NORTH = ["USA", "Canada", "Mexico", "Cuba", "Haiti", "Panama"]
SOUTH = ["Peru", "Chile", "Brazil", "Bolivia", "Uruguay", "Paraguay", "Ecuador", "Colombia",
         "Venezuela", "Guyana", "Suriname", "Argentina", "Belize", "Jamaica", "Honduras",
         "Nicaragua", "Guatemala", "Bahamas"]
# every country a different number of shops: the most frequent are the south's
SHOPS = [(i, c, "south" if c in SOUTH else "north")
         for i, c in enumerate([c for n, c in enumerate(SOUTH + NORTH)
                                for _ in range(30 - n)], 1)]


def _config(url: str, schema: str | None) -> dict[str, Any]:
    return {
        "sources": {"main": {"url": url, **({"schema": schema} if schema else {})}},
        "products": {"shops": {"table": "shops", "primary_key": ["shop_id"]}},
        "policies": {
            "roles": {"head": {"tools": ["*"], "reviewer": True},
                      "regional": {"tools": ["*"], "row_filters": {
                          "shops": "region = {{ user.region }}"}},
                      "auditor": {"tools": ["*"], "masks": {"shops.country": "redact"}}},
            "users": {"h.ead": {"role": "head"}, "n.orth": {"role": "regional",
                                                           "region": "north"},
                      "a.udit": {"role": "auditor"}}},
    }


TABLES = {"shops": ("shop_id integer PRIMARY KEY, country text, region text", SHOPS)}


@pytest.fixture(params=["duckdb", "postgres"])
def shops(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "p"
    folder.mkdir()
    if request.param == "duckdb":
        url = duck_tables(tmp_path / "shops.duckdb", TABLES)
        (folder / "tether.yaml").write_text(yaml.safe_dump(_config(url, None)))
        build(load_project(folder))
        yield folder
        return
    url = request.getfixturevalue("pg_url")
    with pg_tables(url, "shops", TABLES) as schema:
        (folder / "tether.yaml").write_text(yaml.safe_dump(_config(url, schema)))
        build(load_project(folder))
        yield folder


def _country(folder: Path, user: str) -> dict[str, Any]:
    server = TetherServer(load_project(folder), stdio_user=user)

    async def go() -> dict[str, Any]:
        async with Client(server.server) as c:
            tool = next(t for t in (await c.list_tools()).tools
                        if t.name == "shops_by_attributes")
            return dict(tool.input_schema["properties"]["country"])
    try:
        return anyio.run(go)
    finally:
        server.close()


def test_each_caller_sees_the_values_their_role_reads(shops: Path) -> None:
    head, north, audit = (_country(shops, u) for u in ("h.ead", "n.orth", "a.udit"))
    assert head["examples"] == ["Peru", "Chile", "Brazil"]  # the most frequent, every row
    assert "e.g. Peru, Chile, Brazil" in head["description"]
    assert set(north["examples"]) <= set(NORTH) and north["examples"]  # their own rows only
    assert not set(north["examples"]) & set(SOUTH)
    assert not any(c in north["description"] for c in SOUTH)
    assert "examples" not in audit and "e.g." not in audit.get("description", "")

    project = load_project(shops)
    refused, near = call_tools(project, "n.orth", [
        ("shops_by_attributes", {"country": "United States"}),  # not the values' shape
        ("shops_by_attributes", {"country": "Germany"})])
    # the refusal says the caller's own examples, never another region's
    assert refused.is_error and "e.g. " in refused.content[0].text
    assert not any(c in refused.content[0].text for c in SOUTH), refused.content[0].text
    said = near.structured_content["empty_reason"]
    assert near.structured_content["total_rows"] == 0
    assert "the values you may see: " in said and "'USA'" in said, said
    assert not any(f"'{c}'" in said for c in SOUTH), said  # never another region's
    typo, = call_tools(project, "h.ead", [("shops_by_attributes", {"country": "Brasil"})])
    assert "the nearest values you may see: 'Brazil'" in typo.structured_content[
        "empty_reason"]
