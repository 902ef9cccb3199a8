"""A listing reaches through many-to-one relationships (tether/plan/paths.py), on DuckDB and
PostgreSQL, and every product on a path is read as the caller may read it: a filter, count or
sort by a parent's column gives each role exactly what the policy oracle (tests/attacks/
oracle.py, which shares no code with tether's policy path) computes over that role's entitled
relations; a parent's masked column is refused as a filter, a group and an order; a parent the
role may not read is neither reachable nor named (its paths leave the role's tool list and
errors). A label (products.P.label) matches in any case, and a result grouped by a reference
carries the referent's label beside each key.

An orchard of its own (farms, trees, pickers, harvests), in no test warehouse's domain: trees
point to farms and harvests to trees by the keys' names, harvests to pickers by a declared
relationship under another name."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from attacks.oracle import Engine, Oracle, norm
from conftest import call_tools
from tether.config import load_project
from tether.drift.publish import build

TABLES = {
    "farms": ("farm_id INTEGER PRIMARY KEY, farm_name TEXT, region TEXT, owner_email TEXT, "
              "hectares INTEGER",
              [(i, f"Farm {i:02d}", ["NORTH", "SOUTH", "EAST"][i % 3], f"owner{i}@orchard.test",
                10 + (i * 37) % 90) for i in range(1, 13)]),
    "trees": ("tree_id INTEGER PRIMARY KEY, farm_id INTEGER, species TEXT, planted INTEGER",
              [(i, 1 + i % 12, ["apple", "pear", "plum"][i % 3], 1990 + (i * 7) % 30)
               for i in range(1, 121)]),
    "pickers": ("picker_no INTEGER PRIMARY KEY, picker_name TEXT, crew TEXT",
                [(i, f"Picker {i}", ["red", "blue"][i % 2]) for i in range(1, 9)]),
    "harvests": ("harvest_id INTEGER PRIMARY KEY, tree_id INTEGER, picked_by INTEGER, "
                 "kg INTEGER, picked_on DATE",
                 [(i, 1 + (i * 7) % 120, 1 + i % 8, 5 + i % 40,
                   f"2026-{1 + i % 9:02d}-{1 + i % 27:02d}") for i in range(1, 601)]),
}
USERS = {"g.north": "grower", "a.udit": "auditor", "p.ick": "picker", "o.wner": "owner"}


def config(url: str, schema: str | None) -> dict[str, Any]:
    source: dict[str, Any] = {"url": url, **({"schema": schema} if schema else {})}
    return {
        "clock": "2026-10-01T00:00:00Z",
        "sources": {"main": source},
        "products": {
            "farms": {"table": "farms", "primary_key": ["farm_id"], "label": "farm_name"},
            "trees": {"table": "trees", "primary_key": ["tree_id"]},
            "pickers": {"table": "pickers", "primary_key": ["picker_no"],
                        "label": "picker_name"},
            "harvests": {"table": "harvests", "primary_key": ["harvest_id"],
                         "time_columns": {"picked_on": "UTC"}, "metric_time": "picked_on"}},
        "relationships": [{"from": "harvests.picked_by", "to": "pickers.picker_no",
                           "kind": "many_to_one"}],
        "policies": {
            "roles": {
                "grower": {"tools": ["*"], "row_filters": {
                    "farms": "region = {{ user.region }}"}},
                "auditor": {"tools": ["*"], "masks": {"farms.region": "redact",
                                                      "farms.owner_email": "hash",
                                                      "farms.hectares": "redact"}},
                "picker": {"tools": ["*"], "tables": {"deny": ["farms"]}},
                "owner": {"tools": ["*"]}},
            "users": {"g.north": {"role": "grower", "region": "NORTH"},
                      "a.udit": {"role": "auditor"}, "p.ick": {"role": "picker"},
                      "o.wner": {"role": "owner"}}},
    }


@dataclass
class Orchard:
    folder: Path
    oracle: Oracle


def _build(folder: Path, cfg: dict[str, Any], owner: Engine, rerun: Engine) -> Orchard:
    folder.mkdir(parents=True)
    (folder / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    build(load_project(folder))
    return Orchard(folder, Oracle(folder, owner, rerun))


@pytest.fixture(params=["duckdb", "postgres"])
def orchard(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Orchard]:
    if request.param == "duckdb":
        db = tmp_path / "orchard.duckdb"
        with duckdb.connect(str(db)) as con:
            for name, (ddl, rows) in TABLES.items():
                con.execute(f"CREATE TABLE {name} ({ddl})")
                con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})",
                                rows)
        owner, rerun = Engine("duckdb", str(db)), Engine("duckdb", str(db))
        try:
            yield _build(tmp_path / "proj", config(f"duckdb:///{db}", None), owner, rerun)
        finally:
            owner.close()
            rerun.close()
        return
    import psycopg

    url = request.getfixturevalue("pg_url")
    schema = f"orchard_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')
        for name, (ddl, rows) in TABLES.items():
            c.execute(f'CREATE TABLE "{schema}".{name} ({ddl})')
            with c.cursor() as cur:
                cur.executemany(f'INSERT INTO "{schema}".{name} VALUES '
                                f"({', '.join(['%s'] * len(rows[0]))})", rows)
    owner, rerun = Engine("postgres", url, schema), Engine("postgres", url, schema)
    try:
        yield _build(tmp_path / "proj", config(url, schema), owner, rerun)
    finally:
        owner.close()
        rerun.close()
        with contextlib.suppress(Exception), psycopg.connect(url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')


TOOL = "harvests_by_attributes"
TWO_HOPS = ("SELECT {select} FROM harvests h LEFT JOIN trees t ON t.tree_id = h.tree_id "
            "LEFT JOIN farms f ON f.farm_id = t.farm_id {where} {group}")


def _gold(o: Orchard, user: str, select: str, where: str = "", group: str = "") -> list[Any]:
    _names, rows, _capped = o.oracle.rerun(
        TWO_HOPS.format(select=select, where=where, group=group), user)
    return sorted(([norm(x) for x in r] for r in rows), key=json.dumps)


def _rows(result: Any, *cols: str) -> list[Any]:
    return sorted(([norm(r[c]) for c in cols] for r in result.structured_content["rows"]),
                  key=json.dumps)


def test_every_role_gets_what_its_policy_reads_through_the_path(orchard: Orchard) -> None:
    """Counted by a farm's region two hops away, filtered by it, and summed: each role's
    answer is the oracle's re-run over its own entitled relations (the grower sees only the
    north's farms, so the others' harvests count under no region; a south filter is outside
    the grower's scope, refused as a filter on the farms themselves is). No result names a
    value the role may not see."""
    project = load_project(orchard.folder)
    for user in ("g.north", "o.wner"):
        by, south, kg = call_tools(project, user, [
            (TOOL, {"count_by": "trees.farms.region"}),
            (TOOL, {"trees_farms_region": ["SOUTH"], "limit": 200}),
            (TOOL, {"trees_farms_region": ["NORTH"], "sum_and_average_of": "kg"})])
        for r in (by, kg) if user == "g.north" else (by, south, kg):
            assert not r.is_error, (user, r.content[0].text)
            assert not orchard.oracle.scan(user, r.content[0].text + json.dumps(
                r.structured_content), "")
        assert _rows(by, "trees.farms.region", "rows") == _gold(
            orchard, user, "f.region, count(*)", group="GROUP BY f.region")
        if user == "g.north":
            assert south.is_error and (south.meta or {})["tether/refusal"]["reason"] == (
                "outside_entitlement")
        else:
            assert south.structured_content["total_rows"] == _gold(
                orchard, user, "count(*)", "WHERE f.region = 'SOUTH'")[0][0] > 0
        assert _rows(kg, "sum_kg") == _gold(orchard, user, "sum(h.kg)",
                                            "WHERE f.region = 'NORTH'")
    grower, = call_tools(project, "g.north", [(TOOL, {"count_by": "trees.farms.region"})])
    assert {r["trees.farms.region"] for r in grower.structured_content["rows"]} == {
        "NORTH", None}
    assert "none (no row it points to, or no value there): " in grower.content[0].text


def test_a_masked_parent_column_is_refused_everywhere(orchard: Orchard) -> None:
    """The auditor's farm region is masked: a path to it is refused as a filter, a group and
    an order (each would tell the values apart); the rows themselves still answer."""
    project = load_project(orchard.folder)
    as_filter, as_group, as_order, plain = call_tools(project, "a.udit", [
        (TOOL, {"trees_farms_region": ["NORTH"]}),
        (TOOL, {"count_by": "trees.farms.region"}),
        (TOOL, {"order_by": "trees.farms.region", "limit": 3}),
        (TOOL, {"count_by": "trees.species"})])
    for r in (as_filter, as_group, as_order):
        assert r.is_error and "masked" in r.content[0].text, r.content[0].text
        assert "NORTH" not in r.content[0].text.replace('"NORTH"', "")
    assert not plain.is_error
    assert _rows(plain, "trees.species", "rows") == _gold(
        orchard, "a.udit", "t.species, count(*)", group="GROUP BY t.species")


def test_a_parent_the_role_may_not_read_is_neither_reached_nor_named(orchard: Orchard
                                                                      ) -> None:
    """The picker may not read farms: no parameter or count_by value of the harvests' tool goes
    there in the picker's list, a call naming such a path is refused without naming farms, and
    the paths that stay (trees, pickers) answer."""
    from tether.serve.server import TetherServer

    server = TetherServer(load_project(orchard.folder), stdio_user="p.ick")
    try:
        tool = next(v for v in server.visible("p.ick") if v.name == TOOL).definition
    finally:
        server.close()
    said = json.dumps(tool)
    # (trees' own farm_id stays a parameter: a column of trees, which the picker reads)
    assert "trees.farms" not in said and "trees_farms" not in said and "farm_name" not in said
    assert "farms.region" not in said
    assert "trees_species" in tool["inputSchema"]["properties"]
    project = load_project(orchard.folder)
    grouped, ordered, kept = call_tools(project, "p.ick", [
        (TOOL, {"count_by": "trees.farms.region"}),
        (TOOL, {"order_by": "trees.farms.farm_name"}),
        (TOOL, {"count_by": "pickers.crew", "order_by": "count"})])
    for r in (grouped, ordered):
        assert r.is_error
        text = r.content[0].text.replace("trees.farms.region", "").replace(
            "trees.farms.farm_name", "")
        assert "farms" not in text and "farm_name" not in text, text
    assert not kept.is_error
    assert _rows(kept, "pickers.crew", "rows") == sorted(([norm(x) for x in r] for r in
                                                         orchard.oracle.rerun(
        "SELECT p.crew, count(*) FROM harvests h LEFT JOIN pickers p "
        "ON p.picker_no = h.picked_by GROUP BY p.crew", "p.ick")[1]), key=json.dumps)


def test_labels_name_rows_and_groups(orchard: Orchard) -> None:
    """A label matches in any case (a name, not an id); grouped by a reference, each key comes
    with its referent's label, read as the caller may (the grower sees the north's farm names
    only); two hops away, a label is a count_by value of its own."""
    project = load_project(orchard.folder)
    by_name, by_picker, by_farm, grower = call_tools(project, "o.wner", [
        ("farms_by_attributes", {"farm_name": "farm 03"}),
        (TOOL, {"count_by": "picked_by", "order_by": "count", "limit": 2}),
        (TOOL, {"count_by": "trees.farms.farm_name", "order_by": "count", "limit": 3}),
        ("trees_by_attributes", {"count_by": "farm_id", "limit": 12})])
    assert [r["farm_id"] for r in by_name.structured_content["rows"]] == [3]
    rows = by_picker.structured_content["rows"]
    assert all(r["pickers.label"] == f"Picker {r['picked_by']}" for r in rows), rows
    assert "(Picker " in by_picker.content[0].text
    assert _rows(by_farm, "trees.farms.farm_name", "rows") == _gold(
        orchard, "o.wner", "f.farm_name, count(*)",
        group="GROUP BY f.farm_name ORDER BY count(*) DESC, f.farm_name LIMIT 3")
    assert all(r["farms.label"] == f"Farm {r['farm_id']:02d}"
               for r in grower.structured_content["rows"])
    north, = call_tools(project, "g.north", [("trees_by_attributes",
                                              {"count_by": "farm_id", "limit": 12})])
    labels = {r["farm_id"]: r["farms.label"] for r in north.structured_content["rows"]}
    assert all((v is not None) == (k % 3 == 0) for k, v in labels.items()), labels  # NORTH
    assert not orchard.oracle.scan("g.north", json.dumps(north.structured_content), "")


def test_rows_carry_the_name_of_what_they_point_to(orchard: Orchard) -> None:
    """A page of rows: each reference to a labelled product is followed by that row's label,
    as the caller may read it (the grower's south and east farms have none; the picker, who
    may not read farms, gets no such field at all)."""
    project = load_project(orchard.folder)
    harvests, trees = call_tools(project, "o.wner", [(TOOL, {"limit": 5}),
                                                     ("trees_by_attributes", {"limit": 12})])
    rows = harvests.structured_content["rows"]
    assert rows and all(r["pickers.label"] == f"Picker {r['picked_by']}" for r in rows), rows
    assert list(rows[0]).index("pickers.label") == list(rows[0]).index("picked_by") + 1
    assert all(r["farms.label"] == f"Farm {r['farm_id']:02d}"
               for r in trees.structured_content["rows"])
    north, = call_tools(project, "g.north", [("trees_by_attributes", {"limit": 24})])
    got = {r["farm_id"]: r["farms.label"] for r in north.structured_content["rows"]}
    assert all((v is not None) == (k % 3 == 0) for k, v in got.items()), got  # NORTH only
    assert not orchard.oracle.scan("g.north", json.dumps(north.structured_content), "")
    denied, = call_tools(project, "p.ick", [("trees_by_attributes", {"limit": 5})])
    assert denied.structured_content["rows"]
    assert not any("farms.label" in r for r in denied.structured_content["rows"])


def test_a_name_filter_matches_a_part_between_stars(orchard: Orchard) -> None:
    """``*part*`` matches the names that hold it in any case (``part*`` those that start so),
    among the rows the caller may read, through a path too; ``%`` and ``_`` are text, never
    wildcards (a name is matched as written)."""
    project = load_project(orchard.folder)
    part, start, literal, through = call_tools(project, "o.wner", [
        ("farms_by_attributes", {"farm_name": "*RM 1*"}),
        ("farms_by_attributes", {"farm_name": "farm 0*", "limit": 20}),
        ("farms_by_attributes", {"farm_name": "farm_0%"}),
        (TOOL, {"trees_farms_farm_name": "*m 1*", "limit": 1})])
    assert [r["farm_id"] for r in part.structured_content["rows"]] == [10, 11, 12]
    assert [r["farm_id"] for r in start.structured_content["rows"]] == list(range(1, 10))
    assert literal.structured_content["total_rows"] == 0
    assert through.structured_content["total_rows"] == _gold(
        orchard, "o.wner", "count(*)", where="WHERE f.farm_name LIKE '%m 1%'")[0][0]
    north, = call_tools(project, "g.north", [("farms_by_attributes", {"farm_name": "*rm 1*"})])
    assert [r["farm_id"] for r in north.structured_content["rows"]] == [12]  # NORTH only
    props = json.loads((orchard.folder / "tools" / "farms_by_attributes.json").read_text()
                       )["inputSchema"]["properties"]
    assert "*part* for names containing it" in props["farm_name"]["description"]


def test_an_empty_name_says_the_names_the_caller_may_see(orchard: Orchard) -> None:
    """A name that matches nothing says the names that hold its words, among the rows the
    caller may see only (the grower asking for a south farm is offered north farms, never
    it)."""
    project = load_project(orchard.folder)
    near, = call_tools(project, "o.wner", [("farms_by_attributes", {"farm_name": "farm 3"})])
    assert near.structured_content["total_rows"] == 0
    assert "'Farm 03'" in near.structured_content["empty_reason"]
    south, through = call_tools(project, "g.north", [
        ("farms_by_attributes", {"farm_name": "Farm 1"}),
        (TOOL, {"trees_farms_farm_name": "farm 4"})])
    said = south.structured_content["empty_reason"]
    assert "'Farm 01'" not in said and "'Farm 12'" in said, said  # Farm 01, 10: south
    assert not orchard.oracle.scan("g.north", json.dumps(south.structured_content), "Farm 1")
    assert through.structured_content["total_rows"] == 0
    assert "'Farm 04'" not in json.dumps(through.structured_content)



def test_a_grouped_answer_pages_past_its_limit(orchard: Orchard) -> None:
    """More groups than a page holds: next_cursor continues where the page stopped (the
    order is total), every group exactly once across the pages, counts as the oracle has them
    for the caller."""
    import anyio
    from mcp import Client

    from tether.serve.server import TetherServer

    server = TetherServer(load_project(orchard.folder), stdio_user="g.north")

    async def pages() -> list[Any]:
        out = []
        async with Client(server.server) as c:
            args: dict[str, Any] = {"count_by": "tree_id", "limit": 50}
            while True:
                r = await c.call_tool(TOOL, args)
                assert not r.is_error, r.content[0].text
                out.append(r.structured_content)
                if not r.structured_content["next_cursor"]:
                    return out
                args = {**args, "cursor": r.structured_content["next_cursor"]}
    try:
        got = anyio.run(pages)
    finally:
        server.close()
    assert len(got) == 3 and [p["truncated"] for p in got] == [True, True, False]
    groups = [(r["tree_id"], r["rows"]) for p in got for r in p["rows"]]
    assert len(groups) == len({g for g, _ in groups}) == 120
    _names, want, _capped = orchard.oracle.rerun(
        "SELECT tree_id, count(*) FROM harvests GROUP BY tree_id", "g.north")
    assert sorted(groups) == sorted((int(a), int(b)) for a, b in want)
    assert {p["total_rows"] for p in got} == {600}


def _listed(project: Any, user: str) -> dict[str, Any]:
    """{tool name: definition} as ``user``'s MCP client lists them."""
    import anyio
    from mcp import Client

    from tether.serve.server import TetherServer

    server = TetherServer(project, stdio_user=user)

    async def go() -> dict[str, Any]:
        async with Client(server.server) as c:
            return {t.name: t for t in (await c.list_tools()).tools}
    try:
        return anyio.run(go)
    finally:
        server.close()


def test_a_key_at_the_end_of_the_reach_is_named(orchard: Orchard, tmp_path: Path) -> None:
    """With paths one hop long (serve.max_path_hops: 1), harvests counted by their tree's farm
    key carry each farm's name: the label of a key at the end of the reach is joined, read as
    the caller may read it (the grower: the north's farms only; the picker, who may not read
    farms, no such field), though no filter or order reaches past the end."""
    cfg = yaml.safe_load((orchard.folder / "tether.yaml").read_text())
    cfg["serve"] = {"max_path_hops": 1}
    short = _build(tmp_path / "short", cfg, orchard.oracle.owner, orchard.oracle.rerun_engine)
    project = load_project(short.folder)
    by_farm, past = call_tools(project, "o.wner", [
        (TOOL, {"count_by": "trees.farm_id", "limit": 12}),
        (TOOL, {"order_by": "trees.farms.farm_name", "limit": 1})])
    rows = by_farm.structured_content["rows"]
    assert len(rows) == 12 and all(
        r["trees.farms.label"] == f"Farm {r['trees.farm_id']:02d}" for r in rows), rows
    assert _rows(by_farm, "trees.farm_id", "rows") == _gold(
        orchard, "o.wner", "t.farm_id, count(*)", group="GROUP BY t.farm_id")
    assert past.is_error and "trees.farms.farm_name" in past.content[0].text
    north, = call_tools(project, "g.north", [(TOOL, {"count_by": "trees.farm_id", "limit": 12})])
    got = {r["trees.farm_id"]: r["trees.farms.label"] for r in north.structured_content["rows"]}
    assert got and all((v is not None) == (k % 3 == 0) for k, v in got.items()), got  # NORTH
    assert not short.oracle.scan("g.north", json.dumps(north.structured_content), "")
    denied, = call_tools(project, "p.ick", [(TOOL, {"count_by": "trees.farm_id", "limit": 12})])
    assert not denied.is_error, denied.content[0].text
    assert not any("trees.farms.label" in r for r in denied.structured_content["rows"])


def test_only_a_filtered_caller_is_told_a_referent_may_be_unseen(orchard: Orchard) -> None:
    """The note that a row whose referent the caller may not see has no value there reaches a
    caller whose role filters a product a path reaches (the grower: farms), never one who reads
    every referent whole (the owner), where it would only send them to check again."""
    project = load_project(orchard.folder)
    note = "a row whose referent you may not see has no value there"
    assert note in _listed(project, "g.north")[TOOL].description
    owner = _listed(project, "o.wner")[TOOL].description
    assert note not in owner and "count_by and order_by take PATH.column." in owner


def test_a_range_bounds_numbers_of_the_rows_and_of_what_they_point_to(orchard: Orchard
                                                                      ) -> None:
    """``range`` bounds a number of the rows (kg) or of a row they point to, one or two hops
    away (a tree's planting year, its farm's hectares), ends included or left open, in one
    statement: each role gets what the oracle computes over its entitled relations (the
    grower's southern farms have no hectares to bound); a masked parent column is refused; a
    path through a product the role may not read is neither taken nor named; a bound that is
    no number says the forms it takes."""
    project = load_project(orchard.folder)
    for user in ("o.wner", "g.north"):
        own, far, both = call_tools(project, user, [
            (TOOL, {"range": {"kg": "10..20"}, "limit": 1}),
            (TOOL, {"range": {"trees.farms.hectares": ">50"}, "count_by": "picked_by"}),
            (TOOL, {"range": {"kg": "<12", "trees.planted": "2000.."}, "limit": 1})])
        for got, where in ((own, "h.kg >= 10 AND h.kg <= 20"),
                           (both, "h.kg < 12 AND t.planted >= 2000")):
            assert not got.is_error, got.content[0].text
            assert [[got.structured_content["total_rows"]]] == _gold(
                orchard, user, "count(*)", f"WHERE {where}"), (user, where)
        assert _rows(far, "picked_by", "rows") == _gold(
            orchard, user, "h.picked_by, count(*)", "WHERE f.hectares > 50",
            "GROUP BY h.picked_by"), user
    masked, denied, bad = [
        *call_tools(project, "a.udit", [(TOOL, {"range": {"trees.farms.hectares": ">50"}})]),
        *call_tools(project, "p.ick", [(TOOL, {"range": {"trees.farms.hectares": ">50"}}),
                                       (TOOL, {"range": {"kg": "heavy"}})])]
    assert masked.is_error and "masked for your role" in masked.content[0].text
    said = denied.content[0].text
    assert denied.is_error and "it bounds kg" in said and "farms." not in said.split("bounds", 2)[2]
    assert bad.is_error and "'heavy' is no number" in bad.content[0].text
    key, = call_tools(project, "o.wner", [(TOOL, {"range": {"harvest_id": "1..5"}})])
    assert key.is_error and "not a number this tool bounds" in key.content[0].text  # a key


def test_a_number_of_few_values_is_counted_by(orchard: Orchard) -> None:
    """A number of few values that repeat (kg, a tree's planting year two hops from nothing
    else) is a count_by of its own and through a path, under the caller's policy."""
    project = load_project(orchard.folder)
    for user in ("o.wner", "g.north"):
        kg, planted = call_tools(project, user, [
            (TOOL, {"count_by": "kg", "limit": 50}),
            (TOOL, {"count_by": "trees.planted", "limit": 50})])
        assert _rows(kg, "kg", "rows") == _gold(orchard, user, "h.kg, count(*)",
                                                 group="GROUP BY h.kg"), user
        assert _rows(planted, "trees.planted", "rows") == _gold(
            orchard, user, "t.planted, count(*)", group="GROUP BY t.planted"), user


def test_a_result_field_sorts_as_its_order_by_name(orchard: Orchard) -> None:
    """order_by takes a grouped result's own field names (average_kg, rows) as it takes
    avg_of_kg and count: an agent that read the result's fields sorts by them."""
    project = load_project(orchard.folder)
    asked = {"count_by": "picked_by", "sum_and_average_of": "kg", "limit": 3}
    by_name, by_field, by_rows, by_count = call_tools(project, "o.wner", [
        (TOOL, {**asked, "order_by": "avg_of_kg"}), (TOOL, {**asked, "order_by": "average_kg"}),
        (TOOL, {**asked, "order_by": "rows"}), (TOOL, {**asked, "order_by": "count"})])
    assert not by_field.is_error, by_field.content[0].text
    assert by_field.structured_content["rows"] == by_name.structured_content["rows"]
    assert by_rows.structured_content["rows"] == by_count.structured_content["rows"]
