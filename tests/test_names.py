"""Names as they are, on DuckDB and PostgreSQL: a column is one identifier unless the engine says
it is a STRUCT's field. Columns with a dot (``bin.key``), a space, upper case and a reserved word
are profiled, built and served (filters, counts, key lookups, paging) from the starter with no
hand edit; parameters are names every model API takes; a STRUCT's fields keep working. One
product the engine cannot read is reported with its name and column and skipped; the others
build. The data is made here, in shapes no dataset of the project has."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from conftest import call_tools, run_cli, scratch_schema
from tether.config import load_project
from tether.context.names import ref, ref_column, ref_parts

USER = "names.reader"
ROWS = [(2000 + i % 5, f"B{i // 5}", ("North", "South", "East")[i % 3], i * 10, f"Bin {i // 5}")
        for i in range(40)]
DDL = ('("slot.key" INTEGER, "bin.key" VARCHAR, "Group" VARCHAR, "select" INTEGER, '
       '"bin label" VARCHAR)')


@pytest.fixture(params=["duckdb", "postgres"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """(init arguments, engine) for a source holding ``BinPlacements`` and ``bins``."""
    if request.param == "duckdb":
        path = tmp_path / "names.duckdb"
        with duckdb.connect(str(path)) as con:
            con.execute(f'CREATE TABLE "BinPlacements" {DDL}')
            con.executemany('INSERT INTO "BinPlacements" VALUES (?, ?, ?, ?, ?)', ROWS)
            con.execute('ALTER TABLE "BinPlacements" ADD COLUMN info STRUCT(kind VARCHAR, size INT)')
            con.execute("""UPDATE "BinPlacements" SET info = {'kind': CASE WHEN "select" % 20 = 0
                           THEN 'a' ELSE 'b' END, 'size': "select" // 10}""")
            con.execute('CREATE TABLE bins AS SELECT DISTINCT "bin.key", "bin label" '
                        'FROM "BinPlacements"')
            con.execute("CREATE TABLE raw_counts (label VARCHAR, txt VARCHAR)")
            con.execute("INSERT INTO raw_counts VALUES ('a', '1'), ('b', 'x')")
            # a view the engine cannot read: one value fails its cast
            con.execute("CREATE VIEW broken_counts AS SELECT label, CAST(txt AS INTEGER) AS n "
                        "FROM raw_counts")
        yield "duckdb", ["--source", f"duckdb:///{path}"]
        return
    import psycopg

    url = request.getfixturevalue("pg_url")
    with scratch_schema(url, "names", DDL.replace("VARCHAR", "text"), ROWS,
                        "BinPlacements") as schema:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f'CREATE TABLE "{schema}".bins AS SELECT DISTINCT "bin.key", "bin label" '
                      f'FROM "{schema}"."BinPlacements"')
        yield "postgres", ["--source", url, "--schema", schema]


def _built(tmp_path: Path, init: list[str]) -> tuple[Path, Any]:
    env = {"TETHER_USER": USER}
    r = run_cli("init", "proj", *init, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    project = tmp_path / "proj"
    r = run_cli("build", "--project", str(project), "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return project, json.loads(r.stdout)


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return dict(result.structured_content)


def test_references_keep_a_dotted_name_whole() -> None:
    assert ref("t", "bin.key") == 't."bin.key"'
    assert ref_parts(ref("t", "bin.key")) == ["t", "bin.key"]
    assert ref_parts("t.info.kind") == ["t", "info", "kind"]  # a STRUCT's field, as written
    assert ref_column(ref("t", 'a"b.c', "d")) == ("t", 'a"b.c.d')
    assert ref_parts(ref("t", "plain")) == ["t", "plain"]


def test_names_of_any_shape_build_and_serve(source: tuple[str, list[str]],
                                            tmp_path: Path) -> None:
    engine, init = source
    project, built = _built(tmp_path, init)
    tools = {p.stem: json.loads(p.read_text()) for p in (project / "tools").glob("*.json")}
    listing = tools["BinPlacements_by_attributes"]
    props = listing["inputSchema"]["properties"]
    # every parameter is a name model APIs accept (letters, digits, _)
    for d in tools.values():
        for name in d["inputSchema"].get("properties", {}):
            assert re.fullmatch(r"[A-Za-z0-9_]{1,64}", name), (d["name"], name)
    assert {"Group", "bin_key", "bin_label"} <= set(props), sorted(props)
    assert set(props["count_by"]["enum"]) >= {"Group", "bin_label"}
    # a PascalCase name is said as its words; the key is the slot and the bin (a unique number
    # whose name says nothing, `select`, is a measure by chance, not the key)
    assert listing["description"].startswith(
        "Which rows of Bin Placements match: one row per slot and bin"), listing["description"]
    cfg = yaml.safe_load((project / "tether.yaml").read_text())
    assert cfg["products"]["bins"]["primary_key"] == ["bin.key"]

    proj = load_project(project)
    page, east, counts, one, next_page = call_tools(proj, USER, [
        ("BinPlacements_by_attributes", {"limit": 3}),
        ("BinPlacements_by_attributes", {"Group": ["East"], "limit": 50}),
        ("BinPlacements_by_attributes", {"count_by": "bin_label"}),
        ("bins_by_attributes", {"bin_key": "B3"}),
        ("BinPlacements_by_attributes", {"limit": 40}),
    ])
    first = _ok(page)
    assert set(first["rows"][0]) >= {"slot.key", "bin.key", "Group", "select", "bin label"}
    assert first["total_rows"] == 40 and first["next_cursor"]
    want_east = sorted(r[3] for r in ROWS if r[2] == "East")
    assert sorted(r["select"] for r in _ok(east)["rows"]) == want_east
    got_counts = {r["bin_label"]: r["rows"] for r in _ok(counts)["rows"]}
    assert got_counts == {f"Bin {b}": 5 for b in range(8)}
    assert _ok(one)["rows"] == [{"bin.key": "B3", "bin label": "Bin 3"}]
    assert len(_ok(next_page)["rows"]) == 40
    # the cursor of a page keyed on the dotted key continues where it stopped
    follow = call_tools(proj, USER, [("BinPlacements_by_attributes",
                                      {"limit": 3, "cursor": first["next_cursor"]})])[0]
    assert [r["select"] for r in _ok(follow)["rows"]] == [150, 200, 250]
    if engine == "duckdb":  # a STRUCT's field is still a field
        assert "info_kind" in props
        kinds = _ok(call_tools(proj, USER, [("BinPlacements_by_attributes",
                                             {"info_kind": ["a"], "limit": 50})])[0])
        assert sorted(r["select"] for r in kinds["rows"]) == list(range(0, 400, 20))
        # the view the engine cannot read: reported with its column, the others built
        assert any("'broken_counts'" in s and "'n'" in s for s in built["skipped"]), built
        assert "broken_counts_by_attributes" not in tools
        assert "raw_counts_by_attributes" in tools


def test_a_product_that_cannot_be_read_is_named_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE raw_counts AS SELECT 'a' AS label, 'x' AS txt")
        con.execute("CREATE TABLE fine AS SELECT 1 AS n")
        con.execute("CREATE VIEW broken_counts AS SELECT label, CAST(txt AS INTEGER) AS n "
                    "FROM raw_counts")
    r = run_cli("init", "proj", "--source", f"duckdb:///{path}", cwd=tmp_path,
                env={"TETHER_USER": USER})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "proj" / "tether.yaml").read_text()
    assert "could not read it" in text and "Conversion Error" in text
    r = run_cli("profile", "--project", str(tmp_path / "proj"), "--json", cwd=tmp_path)
    assert r.returncode == 2
    assert "product 'broken_counts': column 'n' cannot be read" in " ".join(r.stderr.split())
    assert "Traceback" not in r.stderr
    assert {p["product"] for p in json.loads(r.stdout)} == {"raw_counts", "fine"}


def test_every_reserved_word_of_both_engines_is_quoted_in_a_table_name(
        request: pytest.FixtureRequest) -> None:
    """The list a table name is checked against holds every word either engine reserves, read
    from the engines themselves (a table named ``user`` is the current user on PostgreSQL)."""
    from tether.sources.base import RESERVED, table_ref

    with duckdb.connect() as con:
        words = {w.upper() for (w,) in con.execute(
            "SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved'"
        ).fetchall()}
    assert words <= RESERVED, sorted(words - RESERVED)
    assert table_ref("user", "postgres").sql("postgres") == '"user"'
    assert table_ref("orders", "postgres").sql("postgres") == "orders"
    import os

    if os.environ.get("TETHER_TEST_PG_URL"):
        import psycopg

        with psycopg.connect(request.getfixturevalue("pg_url")) as c:
            pg = {w.upper() for (w,) in c.execute(
                "SELECT word FROM pg_get_keywords() WHERE catcode = 'R'").fetchall()}
        assert pg <= RESERVED, sorted(pg - RESERVED)


CLASH_DDL = ('("shelf_no" INTEGER, "order" VARCHAR, "period" VARCHAR, "a b" VARCHAR, '
             '"a_b" VARCHAR, "placed_on" DATE)')
CLASH_ROWS = [(i, ("first", "second", "third")[i % 3], ("early", "late")[i % 2],
               ("p", "q")[i % 2], ("r", "s", "t")[i % 3],
               dt.date(2024, 1 + i % 6, 1 + i % 20)) for i in range(60)]


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_columns_named_like_the_tools_own_parameters_or_each_other_stay_apart(
        engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A column named `order` or `period` never takes the listing's own parameter, and two
    columns whose names become the same parameter (`a b`, `a_b`) get two: each filters and
    counts its own column, and `period` still bounds the time column."""
    with contextlib.ExitStack() as stack:
        if engine == "duckdb":
            path = tmp_path / "clash.duckdb"
            with duckdb.connect(str(path)) as con:
                con.execute(f'CREATE TABLE "Shelves" {CLASH_DDL}')
                con.executemany('INSERT INTO "Shelves" VALUES (?, ?, ?, ?, ?, ?)', CLASH_ROWS)
            init = ["--source", f"duckdb:///{path}"]
        else:
            url = request.getfixturevalue("pg_url")
            schema = stack.enter_context(scratch_schema(
                url, "clash", CLASH_DDL.replace("VARCHAR", "text"), CLASH_ROWS, "Shelves"))
            init = ["--source", url, "--schema", schema]
        project, _ = _built(tmp_path, init)
        listing = json.loads((project / "tools" / "Shelves_by_attributes.json").read_text())
        props = listing["inputSchema"]["properties"]
        assert {"order_value", "period_value", "a_b", "a_b_2", "period", "order"} <= set(props)
        assert props["order"]["enum"] == ["desc", "asc"]  # still the direction of order_by
        assert "Bounds placed_on" in props["period"]["description"]
        args = listing["_meta"]["tether/context"]["fields"]["arguments"]
        assert (args["a_b"], args["a_b_2"]) == ("Shelves.a b", "Shelves.a_b")
        got = call_tools(load_project(project), USER, [
            ("Shelves_by_attributes", {"order_value": "second", "limit": 1}),
            ("Shelves_by_attributes", {"period_value": "late", "period": "2024-03", "limit": 1}),
            ("Shelves_by_attributes", {"count_by": "a_b_2"}),
            ("Shelves_by_attributes", {"count_by": "a_b"}),
        ])
        assert _ok(got[0])["total_rows"] == sum(1 for r in CLASH_ROWS if r[1] == "second")
        assert _ok(got[1])["total_rows"] == sum(
            1 for r in CLASH_ROWS if r[2] == "late" and r[5].month == 3)
        assert {r["a_b_2"]: r["rows"] for r in _ok(got[2])["rows"]} == {"r": 20, "s": 20, "t": 20}
        assert {r["a_b"]: r["rows"] for r in _ok(got[3])["rows"]} == {"p": 30, "q": 30}
