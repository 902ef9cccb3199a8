"""Generic mode names tables and columns as SQL must write them: on PostgreSQL a mixed-case name
is folded to lower case unless quoted, so list_tables and describe_table give `write_as`
("Customer") beside the name, and a statement that wrote one without quotes fails saying so,
with the name the caller typed (before: the name was hidden and nothing said to quote). DuckDB
reads names in any case: no `write_as` there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import call_tools, duck_tables, pg_tables, run_cli
from tether.config import load_project

ROWS = [(1, "USA", "Ann"), (2, "Brazil", "Bo"), (3, "USA", "Cy")]
DDL = '"PatronId" integer PRIMARY KEY, "Country" text, first_name text'


@pytest.fixture(params=["duckdb", "postgres"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    tables = {"Patron": (DDL, ROWS)}
    if request.param == "duckdb":
        yield "duckdb", ["--source", duck_tables(tmp_path / "lib.duckdb", tables)]
        return
    url = request.getfixturevalue("pg_url")
    with pg_tables(url, "lib", tables) as schema:
        yield "postgres", ["--source", url, "--schema", schema]


def test_names_as_sql_must_write_them(source: tuple[str, list[str]], tmp_path: Path) -> None:
    engine, init = source
    assert run_cli("init", "p", *init, cwd=tmp_path, env={"TETHER_USER": "x"}).returncode == 0
    project = load_project(tmp_path / "p")
    listed, described, unquoted, quoted = call_tools(project, "x", [
        ("list_tables", {}), ("describe_table", {"table": "Patron"}),
        ("run_sql", {"sql": "SELECT count(*) AS n FROM Patron WHERE Country = 'USA'"}),
        ("run_sql", {"sql": 'SELECT count(*) AS n FROM "Patron" WHERE "Country" = \'USA\''})],
        mode="generic")
    columns = {r["column"]: r.get("write_as") for r in described.structured_content["rows"]}
    assert not quoted.is_error and quoted.structured_content["rows"][0]["n"] == 2
    if engine == "duckdb":
        assert listed.structured_content["rows"] == [{"table": "patron"}]
        assert set(columns.values()) == {None}
        assert not unquoted.is_error
        return
    assert listed.structured_content["rows"] == [{"table": "Patron", "write_as": '"Patron"'}]
    assert columns == {"PatronId": '"PatronId"', "Country": '"Country"', "first_name": None}
    said = unquoted.content[0].text
    assert unquoted.is_error and "column Country does not exist as written" in said, said
    assert 'write "Country" in double quotes' in said
