"""Top N in one call, on DuckDB and PostgreSQL: a listing's rows sorted by any of its columns
(`order_by`, `order`), pushed down, NULLs last, the key breaking ties in the same direction,
and keyset paging that continues exactly under the order (through ties and NULLs) to the last
row; counts and totals sorted by value with `limit` groups and the whole count kept; a masked
column refused as a sort key; an unknown one named with what the tool takes. Every answer is
compared with the engine's own SQL over the same data. The data is made here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from conftest import call_tools, run_cli, scratch_schema
from tether.config import load_project

USER = "order.reader"
MASKED = "order.masked"
# (unit_code, round_no, zone, score, weight): a composite key; scores with ties and NULLs
ROWS = [(f"U{u:02d}", r, ("north", "south", "east")[(u + r) % 3],
         None if (u * 7 + r) % 11 == 0 else (u * 13 + r * 5) % 17, round(0.25 * u + r, 2))
        for u in range(1, 25) for r in (1, 2, 3)]
DDL = ('(unit_code VARCHAR, round_no INTEGER, zone VARCHAR, score BIGINT, '
       'weight DOUBLE PRECISION)')


@pytest.fixture(params=["duckdb", "postgres"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A starter project over ``tallies`` (one masked user added) and a way to run SQL."""
    if request.param == "duckdb":
        path = tmp_path / "order.duckdb"
        with duckdb.connect(str(path)) as con:
            con.execute(f"CREATE TABLE tallies {DDL}")
            con.executemany("INSERT INTO tallies VALUES (?, ?, ?, ?, ?)", ROWS)
        init = ["--source", f"duckdb:///{path}"]

        def sql(q: str) -> list[tuple[Any, ...]]:
            with duckdb.connect(str(path), read_only=True) as c:
                return c.execute(q).fetchall()
        yield _starter(tmp_path, init), sql
        return
    import psycopg

    url = request.getfixturevalue("pg_url")
    with scratch_schema(url, "order", DDL.replace("VARCHAR", "text"), ROWS, "tallies") as schema:
        def pg(q: str) -> list[tuple[Any, ...]]:
            with psycopg.connect(url, autocommit=True) as c:
                c.execute(f'SET search_path TO "{schema}"')
                return c.execute(q).fetchall()
        yield _starter(tmp_path, ["--source", url, "--schema", schema]), pg


def _starter(tmp_path: Path, init: list[str]) -> Path:
    r = run_cli("init", "proj", *init, cwd=tmp_path, env={"TETHER_USER": USER})
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "proj"
    cfg = yaml.safe_load((folder / "tether.yaml").read_text())
    assert cfg["products"]["tallies"]["primary_key"] == ["unit_code", "round_no"]
    cfg["policies"]["roles"]["masked"] = {"tools": ["*"], "masks": {"tallies.score": "null"}}
    cfg["policies"]["users"][MASKED] = {"role": "masked"}
    # a metric by an integer dimension: its rows carry the integers the column holds
    cfg["metrics"] = {"score_by_round": {
        "description": "Total score of each round.", "measure": "sum(tallies.score)",
        "dimensions": ["tallies.round_no"], "window": "current", "unit": "none",
        "tool": {"name": "score_by_round"}}}
    (folder / "tether.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = run_cli("build", "--project", str(folder), cwd=tmp_path, env={"TETHER_USER": USER})
    assert r.returncode == 0, (r.stdout, r.stderr)
    return folder


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return dict(result.structured_content)


def _all_pages(proj: Any, args: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cursor = None
    while True:
        got = _ok(call_tools(proj, USER, [("tallies_by_attributes",
                                           {**args, **({"cursor": cursor} if cursor else {})})])[0])
        assert got["total_rows"] == len(ROWS) or "zone" in args
        rows += got["rows"]
        cursor = got["next_cursor"]
        if cursor is None:
            return rows


def test_top_n_in_one_call_matches_the_engine(project: tuple[Path, Any]) -> None:
    folder, sql = project
    proj = load_project(folder)
    schema = next(p for p in (folder / "tools").glob("tallies_by_attributes.json"))
    props = yaml.safe_load(schema.read_text())["inputSchema"]["properties"]
    assert props["order"]["enum"] == ["desc", "asc"] and "order_by" in props
    top, low, east = call_tools(proj, USER, [
        ("tallies_by_attributes", {"order_by": "score", "order": "desc", "limit": 5}),
        ("tallies_by_attributes", {"order_by": "weight", "limit": 3}),
        ("tallies_by_attributes", {"order_by": "score", "order": "desc", "limit": 4,
                                   "zone": ["east"]}),
    ])
    want = sql("SELECT unit_code, round_no, score FROM tallies ORDER BY score DESC NULLS LAST, "
               "unit_code DESC, round_no DESC LIMIT 5")
    assert [(r["unit_code"], r["round_no"], r["score"]) for r in _ok(top)["rows"]] == \
        [tuple(w) for w in want]
    assert _ok(top)["total_rows"] == len(ROWS)
    want = sql("SELECT unit_code FROM tallies ORDER BY weight, unit_code, round_no LIMIT 3")
    assert [r["unit_code"] for r in _ok(low)["rows"]] == [w[0] for w in want]
    want = sql("SELECT unit_code, round_no FROM tallies WHERE zone = 'east' ORDER BY score DESC "
               "NULLS LAST, unit_code DESC, round_no DESC LIMIT 4")
    assert [(r["unit_code"], r["round_no"]) for r in _ok(east)["rows"]] == [tuple(w) for w in want]


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_keyset_paging_under_an_order_reaches_every_row_once(project: tuple[Path, Any],
                                                             order: str) -> None:
    folder, sql = project
    rows = _all_pages(load_project(folder), {"order_by": "score", "order": order, "limit": 7})
    got = [(r["unit_code"], r["round_no"]) for r in rows]
    want = sql(f"SELECT unit_code, round_no FROM tallies ORDER BY score {order} NULLS LAST, "
               f"unit_code {order}, round_no {order}")
    assert got == [tuple(w) for w in want]  # every row once, in the engine's own order
    assert sum(r["score"] is None for r in rows) == sum(1 for r in ROWS if r[3] is None) > 0
    assert all(r["score"] is None for r in rows[-3:])  # NULLs last, whatever the direction


def test_counts_and_totals_sorted_by_value(project: tuple[Path, Any]) -> None:
    folder, sql = project
    proj = load_project(folder)
    counts, sums, by_name = call_tools(proj, USER, [
        ("tallies_by_attributes", {"count_by": "zone", "order_by": "count", "limit": 2}),
        ("tallies_by_attributes", {"count_by": "zone", "sum_and_average_of": "weight",
                                   "order_by": "sum_of_weight", "order": "asc"}),
        ("tallies_by_attributes", {"count_by": "zone", "order_by": "zone", "order": "desc"}),
    ])
    want = sql("SELECT zone, COUNT(*) FROM tallies GROUP BY zone ORDER BY COUNT(*) DESC, zone "
               "LIMIT 2")
    c = _ok(counts)
    assert [(r["zone"], r["rows"]) for r in c["rows"]] == [tuple(w) for w in want]
    assert c["truncated"] is True and c["total_rows"] == len(ROWS)  # the whole count kept
    # a sum of integers is an integer on every engine (PostgreSQL's SUM(bigint) is numeric)
    whole = _ok(call_tools(proj, USER, [("tallies_by_attributes",
                                         {"sum_and_average_of": "score"})])[0])["rows"][0]
    assert whole["sum_score"] == sql("SELECT SUM(score) FROM tallies")[0][0]
    assert type(whole["sum_score"]) is int, whole
    want = sql("SELECT zone FROM tallies GROUP BY zone ORDER BY SUM(weight), zone")
    assert [r["zone"] for r in _ok(sums)["rows"]] == [w[0] for w in want]
    assert [r["zone"] for r in _ok(by_name)["rows"]] == ["south", "north", "east"]


def test_bad_and_masked_orders_are_refused_with_what_to_do(project: tuple[Path, Any]) -> None:
    folder, _sql = project
    proj = load_project(folder)
    unknown, measure, lonely = call_tools(proj, USER, [
        ("tallies_by_attributes", {"order_by": "points"}),
        ("tallies_by_attributes", {"order_by": "count"}),
        ("tallies_by_attributes", {"order": "desc"}),
    ])
    for r, says in ((unknown, "it takes unit_code, round_no, zone, score, weight"),
                    (measure, "with count_by or sum_and_average_of"),
                    (lonely, "order needs order_by")):
        assert r.is_error and says in r.content[0].text, r.content
    masked = call_tools(proj, MASKED, [("tallies_by_attributes",
                                        {"order_by": "score", "order": "desc", "limit": 3})])[0]
    assert masked.is_error and "score is masked" in masked.content[0].text


def test_order_without_order_by_sorts_the_measure_asked_for(project: tuple[Path, Any]) -> None:
    """``order`` alone (as models write it) sorts the one measure the call asked for: the total
    of sum_and_average_of, else the count of count_by; the result says how it read it. On rows
    it stays an error (which column?)."""
    folder, sql = project
    proj = load_project(folder)
    summed, counted = call_tools(proj, USER, [
        ("tallies_by_attributes", {"count_by": "zone", "sum_and_average_of": "weight",
                                   "order": "desc", "limit": 2}),
        ("tallies_by_attributes", {"count_by": "zone", "order": "asc", "limit": 1})])
    want = sql("SELECT zone FROM tallies GROUP BY zone ORDER BY SUM(weight) DESC, zone LIMIT 2")
    assert [r["zone"] for r in _ok(summed)["rows"]] == [w[0] for w in want]
    assert _ok(summed)["aggregate"]["order_by"] == "sum_of_weight"
    assert "order without order_by read as order_by sum_of_weight" in summed.content[0].text
    want = sql("SELECT zone FROM tallies GROUP BY zone ORDER BY count(*), zone LIMIT 1")
    assert [r["zone"] for r in _ok(counted)["rows"]] == [w[0] for w in want]


def test_a_metric_by_an_integer_dimension_returns_integers(project: tuple[Path, Any]) -> None:
    """The metric's output schema types an integer dimension as an integer (the official client
    validates every result against it: a dimension declared a string failed every call) and a
    sum of integers comes back an integer, on both engines."""
    folder, sql = project
    proj = load_project(folder)
    tool = yaml.safe_load((folder / "tools" / "score_by_round.json").read_text())
    rows = tool["outputSchema"]["properties"]["rows"]["items"]["properties"]
    assert rows["round_no"]["type"] in ("integer", ["integer", "null"])
    got = _ok(call_tools(proj, USER, [("score_by_round", {})])[0])
    want = sql("SELECT round_no, sum(score) FROM tallies GROUP BY 1 ORDER BY 1")
    assert [[r["round_no"], r["score_by_round"]] for r in sorted(
        got["rows"], key=lambda r: r["round_no"])] == [[a, int(b)] for a, b in want]
    assert all(type(r["round_no"]) is int and type(r["score_by_round"]) is int
               for r in got["rows"])
