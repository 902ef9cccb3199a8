"""`tether init` on names and keys of any shape, on DuckDB and PostgreSQL: identifiers in
camelCase, PascalCase and snake_case; composite keys (the smallest unique, non-null set of at
most three columns, found by the engine in at most three statements) and the grain they say;
a table with no key at all left without one. The data is made here, in shapes no dataset of
the project has, and loaded by each engine."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from conftest import run_cli
from tether.config import SourceConfig
from tether.context.names import (
    bare_name,
    column_prefix,
    identifier_like,
    key_grain,
    name_words,
    subject,
)
from tether.profiling.starter import infer_products
from tether.sources import open_source

DAY0 = dt.date(2024, 3, 1)


def _rows() -> dict[str, tuple[list[tuple[str, str]], list[tuple[Any, ...]]]]:
    """Tables: (columns with SQL types, rows)."""
    stations = [(f"S{i:03d}", f"Station {i}") for i in range(1, 13)]
    readings = [(s, DAY0 + dt.timedelta(days=d), seq, 0.5 * (d + seq))
                for s, _ in stations for d in range(6) for seq in (1, 2, 3)]
    stats = [(f"pl{p:02d}", 2001 + y, stint, (p + y) % 3, ("East", "West")[p % 2], p % 5,
              1000 * (p + 1))
             for p in range(20) for y in range(4) for stint in ((1, 2) if p % 4 == 0 else (1,))]
    events = [("open", 1), ("open", 1), ("close", 2)]  # a duplicated row: no key at all
    return {
        "Stations": ([("StationKey", "VARCHAR"), ("label", "VARCHAR")], stations),
        "Readings": ([("StationKey", "VARCHAR"), ("readingDay", "DATE"), ("seq", "INTEGER"),
                      ("value", "DOUBLE PRECISION")], readings),
        "season_stats": ([("playerId", "VARCHAR"), ("yearNum", "INTEGER"), ("stint", "INTEGER"),
                          ("hits", "INTEGER"), ("leagueName", "VARCHAR"),
                          ("venueID", "INTEGER"), ("salary", "INTEGER")], stats),
        "events": ([("kind", "VARCHAR"), ("n", "INTEGER")], events),
    }


def _load(execute: Any) -> None:
    for table, (cols, rows) in _rows().items():
        execute(f'CREATE TABLE "{table}" (' + ", ".join(f'"{c}" {t}' for c, t in cols) + ")",
                None)
        marks = ", ".join(["%s"] * len(cols))
        for row in rows:
            execute(f'INSERT INTO "{table}" VALUES ({marks})', row)


@pytest.fixture(params=["duckdb", "postgres"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    if request.param == "duckdb":
        path = tmp_path / "shapes.duckdb"
        con = duckdb.connect(str(path))
        _load(lambda sql, row: con.execute(sql.replace("%s", "?"), row))
        con.close()
        yield f"duckdb:///{path}", None
        return
    import psycopg

    url = request.getfixturevalue("pg_url")
    schema = f"shapes_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')
        c.execute(f'SET search_path TO "{schema}"')
        _load(lambda sql, row: c.execute(sql, row))
    try:
        yield url, schema
    finally:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_names_are_split_into_their_words() -> None:
    assert name_words("playerID") == ["player", "id"]
    assert name_words("StationKey") == ["station", "key"]
    assert name_words("HallOfFame") == ["hall", "of", "fame"]
    assert name_words("HTTPServer2") == ["http", "server", "2"]
    assert name_words("park.key") == name_words("park key") == ["park", "key"]
    assert all(identifier_like(n) for n in ("id", "ID", "order_id", "playerID", "ParkKey",
                                            "line_no", "teamCode"))
    assert not any(identifier_like(n) for n in ("idea", "valid", "kidney", "stint", "Width"))
    assert subject("playerID") == "player" and subject("seq") == "seq"
    assert key_grain(["playerID", "yearNum", "stint"]) == (
        "one row per player, year num and stint")
    assert key_grain([]) is None
    # a table that prefixes its own columns: the prefix set aside, an identifier word run into
    # the word before it split off (never from a word too short to be one: "valid", "humid")
    assert column_prefix(["bs_boxkey", "bs_slotNumber", "bs_fill"]) == ["bs"]
    assert column_prefix(["box_id", "box"]) == [] and column_prefix(["a_x"]) == []
    assert key_grain(["bs_boxkey", "bs_slotNumber"], ["bs"]) == "one row per box and slot"
    assert [subject(n, []) for n in ("valid", "humid", "userid")] == ["valid", "humid", "user"]
    assert bare_name("bx_ShelfNum", ["bx"]) == bare_name("sh_shelfnum", ["sh"]) == "shelfnum"
    # search reads names as words too: "hall of fame" finds a table named HallOfFame
    from tether.serve.discovery import words

    assert words("HallOfFame") == words("hall of fame") == {"hall", "fame"}


def test_keys_of_any_case_style_and_composite_ones(source: tuple[str, str | None],
                                                   tmp_path: Path) -> None:
    url, schema = source
    with open_source("main", SourceConfig(url=url, schema=schema), tmp_path) as src:
        found = {p.table.rsplit(".", 1)[-1]: p for p in infer_products(src)}
    assert found["Stations"].primary_key == ["StationKey"]
    assert found["Readings"].primary_key == ["StationKey", "readingDay", "seq"]
    assert found["season_stats"].primary_key == ["playerId", "yearNum", "stint"]
    assert found["events"].primary_key == []
    # a PascalCase identifier is an identifier: its one value shape becomes a scheme
    assert found["Stations"].identifiers == {"StationKey": "^S\\d{3}$"}
    assert all(p.pk_inferred for name, p in found.items() if name != "events")


def test_the_starter_serves_a_composite_key(source: tuple[str, str | None],
                                            tmp_path: Path) -> None:
    """init, profile, build: the composite key is written (marked for a person); the listing
    tool says the grain it makes (a sentence whose source is the schema) and takes its
    integer and identifier columns as parameters."""
    url, schema = source
    args = ["init", "proj", "--source", url, "--user", "ana"] + (
        ["--schema", schema] if schema else [])
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "proj" / "tether.yaml").read_text()
    assert ("primary_key: [playerId, yearNum, stint]  # inferred: confirm (unique and non-null "
            "in the data)") in text
    products = yaml.safe_load(text)["products"]
    assert "primary_key" not in products["events"]
    for step in ("profile", "build"):
        r = run_cli(step, "--project", str(tmp_path / "proj"), cwd=tmp_path)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (step, r.stderr)
    r = run_cli("tools", "--project", str(tmp_path / "proj"), "--as-user", "ana", "--json")
    assert r.returncode == 0, r.stderr
    import json

    tools = {t["name"]: t for t in json.loads(r.stdout)}
    listing = next(t for n, t in tools.items() if n.startswith("season_stats"))
    # the year is the key's time part: asked for as a period of whole years
    assert {"playerId", "stint", "period"} <= set(listing["inputSchema"]["properties"])
    assert listing["inputSchema"]["properties"]["period"]["description"].startswith(
        "Bounds yearNum (whole years")
    said = "one row per player, year num and stint"
    assert said in listing["description"]
    sources = listing["_meta"]["tether/context"]["sources"]
    assert [v for k, v in sources.items() if said in k] == ["schema"]
    stint = listing["inputSchema"]["properties"]["stint"]
    assert stint["type"] == "integer" and stint["description"].startswith("Key part")
    # a number whose name says it is an identifier is no quantity: never summed
    assert listing["inputSchema"]["properties"]["sum_and_average_of"]["enum"] == [
        "hits", "salary"]
    # a salary is money (its currency unknown); a count of hits has no known unit: said so,
    # never "no amounts"
    text = listing["description"].lower()
    assert "the currency of salary is not stated in the data" in text
    assert "no known unit for hits" in text and "amounts are in currency" not in text
    salary = listing["outputSchema"]["properties"]["rows"]["items"]["properties"]["salary"]
    assert "a currency the data does not name" in salary["description"]
    assert "no amounts" not in text
    _counts_keep_the_columns_case(tmp_path / "proj", listing["name"])


def _counts_keep_the_columns_case(project: Path, tool: str) -> None:
    """count_by on a mixed-case column: the rows keep the column's name and the sentence its
    values, on both engines (PostgreSQL folds an unquoted alias to lower case)."""
    import anyio
    from mcp import Client

    from tether.config import load_project
    from tether.serve.server import TetherServer

    server = TetherServer(load_project(project), stdio_user="ana")

    async def go() -> Any:
        async with Client(server.server) as c:
            return (await c.call_tool(tool, {"count_by": "leagueName"}),
                    await c.call_tool(tool, {"sum_and_average_of": "hits", "period": "2002"}))

    try:
        counted, summed = anyio.run(go)
    finally:
        server.close()
    assert not counted.is_error, counted.content[0].text
    stats = _rows()["season_stats"][1]  # gold from the rows themselves
    east = sum(1 for r in stats if r[4] == "East")
    rows = counted.structured_content["rows"]
    assert rows == [{"leagueName": "East", "rows": east},
                    {"leagueName": "West", "rows": len(stats) - east}]
    assert f"East: {east} rows, West: {len(stats) - east} rows" in counted.content[0].text
    hits = [r[3] for r in stats if r[1] == 2002]
    [got] = summed.structured_content["rows"]
    assert got["rows"] == len(hits) and got["sum_hits"] == sum(hits)
    assert isinstance(got["sum_hits"], int)  # a sum of integers is an integer on both engines
    assert f"total hits {sum(hits)}" in summed.content[0].text


def test_a_row_filter_that_misses_a_mixed_case_column_says_to_quote_it(
        source: tuple[str, str | None], tmp_path: Path) -> None:
    """`leagueName = {{ user.league }}` unquoted: PostgreSQL reads leaguename and the build
    stops naming the file, the filter and the name to write; DuckDB matches names without
    regard to case and builds."""
    url, schema = source
    args = ["init", "proj", "--source", url, "--user", "ana"] + (
        ["--schema", schema] if schema else [])
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    yml = tmp_path / "proj" / "tether.yaml"
    data = yaml.safe_load(yml.read_text())
    data["policies"]["roles"]["east"] = {
        "tools": ["*"], "row_filters": {"season_stats": "leagueName = {{ user.league }}"}}
    data["policies"]["users"]["eve"] = {"role": "east", "league": "East"}
    yml.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_cli("build", "--project", str(tmp_path / "proj"))
    assert "Traceback" not in r.stderr
    if schema is None:  # DuckDB
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the row filter on season_stats does not compile" in r.stderr
    assert 'write "leagueName" in double quotes' in r.stderr and "tether.yaml:" in r.stderr


def test_a_shape_of_any_length_is_one_scheme_only_for_columns_of_one_name() -> None:
    """An exact shape in two tables is one scheme (they join); a shape of any length
    (letters then digits) is shared only by columns of one name, since unrelated ids fit it;
    scheme names are parameter names, made unique."""
    from tether.profiling.shapes import candidates, fixed, loosened, runs
    from tether.profiling.starter import _scheme

    loose = runs("widget01")
    assert loose == r"^[a-z]+\d+$" and runs("widget") is None and runs("2001") is None
    # codes of one length: letters, then letters or digits (a middle value may hold one)
    assert fixed("ALT", "WSU") == ["^[A-Z]{3}$", "^[A-Z0-9]{3}$"] and fixed("A1", "ABC") == []
    assert candidates("ALT", "WSU", loose=False) == []
    assert candidates("A-0012", "A-9931") == [r"^A-\d{4}$"]  # a dash is no metacharacter
    # published with runs of any length: a key added since (A-10000) still fits
    assert loosened(r"^A-\d{4}$") == r"^A-\d+$" and loosened("^[A-Z0-9]{3}$") == "^[A-Z0-9]+$"
    schemes: dict[tuple[str, str], str] = {}
    assert _scheme(schemes, r"^CRM-\d{5}$", "customer_ref") == "customer_ref"
    assert _scheme(schemes, r"^CRM-\d{5}$", "crm_id") == "customer_ref"
    assert _scheme(schemes, r"^[A-Z]+\d+$", "batchID") == "batchID"
    assert _scheme(schemes, r"^[A-Z]+\d+$", "bin.key") == "bin_key"
    assert _scheme(schemes, r"^[A-Z]+\d+$", "BatchId") == "batchID"  # one name, any case
    assert _scheme(schemes, r"^B\d{2}$", "batchID") == "batchID_2"


def test_a_column_holding_another_tables_key_is_a_relationship(tmp_path: Path) -> None:
    """A column whose values are another table's key under another name is written as a
    many-to-one relationship (a few orphans among many values allowed, as lookups that lag
    have), and its listing takes it as a parameter that names the key and counts by it; a
    column with too many orphans, or a number that only fits inside a run of ids, is none."""
    import duckdb

    db = tmp_path / "legs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE ports AS SELECT 'P' || lpad(CAST(i AS VARCHAR), 2, '0') "
                    "AS code, 'port ' || i AS label FROM range(40) t(i)")
        # 30 distinct arrivals, one of them no port (an orphan); departures: 10 of 20 orphans
        con.execute("""CREATE TABLE legs AS SELECT i AS leg_no,
            CASE WHEN i % 30 = 29 THEN 'P99' ELSE 'P' || lpad(CAST(i % 30 AS VARCHAR), 2, '0')
                 END AS arrives,
            'P' || lpad(CAST(20 + i % 20 AS VARCHAR), 2, '0') AS departs,
            i % 7 + 1 AS crew
            FROM range(300) t(i)""")
        con.execute("UPDATE legs SET departs = 'Q' || substr(departs, 2) WHERE leg_no % 20 < 10")
    r = run_cli("init", "p", "--source", f"duckdb:///{db}", cwd=tmp_path,
                env={"TETHER_USER": "x"})
    assert r.returncode == 0, r.stderr
    cfg = yaml.safe_load((tmp_path / "p" / "tether.yaml").read_text())
    assert cfg["relationships"] == [
        {"from": "legs.arrives", "to": "ports.code", "kind": "many_to_one"}]
    for step in (("profile",), ("build",)):
        assert run_cli(*step, "--project", "p", cwd=tmp_path).returncode == 0
    tool = json.loads((tmp_path / "p" / "tools" / "legs_by_attributes.json").read_text())
    props = tool["inputSchema"]["properties"]
    assert "ports.code" in props["arrives"]["description"]
    assert "arrives" in props["count_by"]["enum"]
    assert "ports.code" not in props["departs"].get("description", "")  # a few-valued enum
    assert "crew" not in props  # no parameter: it names no key (no relationship either)
    assert "crew" in props["count_by"]["enum"]  # a number of seven values, counted by as one


def _init_tables(tmp_path: Path, db: Path, statements: list[str]) -> dict[str, Any]:
    """A DuckDB file made by ``statements``, `tether init` on it in ``tmp_path / "p"``, and the
    tether.yaml it wrote."""
    with duckdb.connect(str(db)) as con:
        for sql in statements:
            con.execute(sql)
    r = run_cli("init", "p", "--source", f"duckdb:///{db}", cwd=tmp_path,
                env={"TETHER_USER": "x"})
    assert r.returncode == 0, r.stderr
    loaded: dict[str, Any] = yaml.safe_load((tmp_path / "p" / "tether.yaml").read_text())
    return loaded


def test_tables_that_prefix_their_own_columns(tmp_path: Path) -> None:
    """Where each table prefixes its columns with a word of its own (``bx_shelfnum`` in one
    table, ``sh_shelfnum`` the other's key), a column named for another table's key without
    either prefix, whose values are that key's, is a relationship, whatever the number of its
    values (a lookup of six shelves); a counter of the same range under its own name is none.
    Its listing takes it as a parameter (by the other product's name too) and counts by it, never
    totals it, and the grain reads without the prefixes."""
    db = tmp_path / "prefixed.duckdb"
    cfg = _init_tables(tmp_path, db, [
        "CREATE TABLE shelf AS SELECT i AS sh_shelfnum, 'aisle ' || (i % 3) AS sh_aisle "
        "FROM range(1, 7) t(i)",
        "CREATE TABLE box AS SELECT i AS bx_boxkey, 1 + i % 6 AS bx_shelfnum, 1 + i % 5 AS "
        "bx_tier, i * 1.5 AS bx_mass FROM range(1, 301) t(i)",
        "CREATE TABLE box_slot AS SELECT b AS bs_boxkey, s AS bs_slotnumber, (b * s) % 9 AS "
        "bs_fill FROM range(1, 301) t(b), range(1, 4) u(s)"])
    assert cfg["products"]["box_slot"]["primary_key"] == ["bs_boxkey", "bs_slotnumber"]
    assert sorted(cfg["relationships"], key=lambda x: x["from"]) == [
        {"from": "box.bx_shelfnum", "to": "shelf.sh_shelfnum", "kind": "many_to_one"},
        {"from": "box_slot.bs_boxkey", "to": "box.bx_boxkey", "kind": "many_to_one"}]
    assert run_cli("build", "--project", "p", cwd=tmp_path).returncode == 0
    tool = json.loads((tmp_path / "p" / "tools" / "box_by_attributes.json").read_text())
    props = tool["inputSchema"]["properties"]
    assert "shelf.sh_shelfnum" in props["bx_shelfnum"]["description"]
    assert "bx_shelfnum" in props["count_by"]["enum"]
    assert props["sum_and_average_of"]["enum"] == ["bx_tier", "bx_mass"]
    slots = json.loads((tmp_path / "p" / "tools" / "box_slot_by_attributes.json").read_text())
    assert "one row per box and slot," in slots["description"]

    from conftest import call_tools
    from tether.config import load_project

    project = load_project(tmp_path / "p")
    named, = call_tools(project, "x", [("box_by_attributes", {"shelf": 2, "limit": 200})])
    assert not named.is_error, named.content[0].text
    got = named.structured_content
    assert got["interpreted"] == {"shelf": "bx_shelfnum"}
    with duckdb.connect(str(db), read_only=True) as con:
        want = con.execute("SELECT count(*) FROM box WHERE bx_shelfnum = 2").fetchone()[0]
    assert got["total_rows"] == want == 50
    assert {row["bx_shelfnum"] for row in got["rows"]} == {2}


def test_a_reference_is_checked_in_one_join_on_postgresql(pg_url: str, monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The inclusion check is one join, not a look-up per value: on PostgreSQL, with no index on
    a key `tether init` inferred, 40,000 values against 40,000 keys are decided well inside the
    check's time limit (a NOT EXISTS per value ran as a subplan, scanning the keys' table once
    for each value, and gave up: no relationship)."""
    import psycopg

    from tether.profiling import joins

    schema = f"refs_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')
        c.execute(f'CREATE TABLE "{schema}".hulls AS SELECT i AS hu_hullkey, i % 7 AS hu_deck '
                  "FROM generate_series(1, 40000) i")
        c.execute(f'CREATE TABLE "{schema}".rivets AS SELECT i AS rv_rivetkey, '
                  "1 + (i * 7919) % 40000 AS rv_hullkey FROM generate_series(1, 80000) i")
    try:
        monkeypatch.setattr(joins, "TIMEOUT", 5.0)
        config = SourceConfig.model_validate({"url": pg_url, "schema": schema})
        with open_source("main", config, Path(".")) as src:
            products = infer_products(src)
            found = [(r.child.table, r.column, r.parent.table, r.key)
                     for r in joins.infer_references(src, products)]
        assert found == [("rivets", "rv_hullkey", "hulls", "hu_hullkey")]
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_two_tables_own_ids_are_not_named_for_each_other(tmp_path: Path) -> None:
    """Each table prefixing its own columns and keyed by its own ``<prefix>_id``: a part of one
    table's composite key, ``lt_id`` (1..10), is not named for another table's ``vt_id`` (1..40)
    by the bare word "id" they share; as a number low in that key's run it is no relationship."""
    cfg = _init_tables(tmp_path, tmp_path / "ids.duckdb", [
        "CREATE TABLE vat AS SELECT i AS vt_id, 'vat ' || i AS vt_label FROM range(1, 41) t(i)",
        "CREATE TABLE lot AS SELECT i AS lt_id, s AS lt_step, i * s * 0.5 AS lt_mass "
        "FROM range(1, 11) t(i), range(1, 4) u(s)"])
    assert cfg["products"]["lot"]["primary_key"] == ["lt_id", "lt_step"]
    assert "relationships" not in cfg
