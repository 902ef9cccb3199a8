"""A text value in another case than the data holds, for a parameter of too many values to list
(the schema gives a pattern and examples): a value whose pattern takes only one case is spelled
in it (said as moved_values); one the pattern takes as written but no row holds says, in the
empty result, the one value of the caller's own rows that is the same text in another case, to
call again with. Made-up data on DuckDB and PostgreSQL, a caller whose row filter hides half the
rows: the hint never names a value outside it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from conftest import call_tools, run_cli
from tether.config import load_project

# 30 depots (too many to list): mixed case, so the pattern takes either case as written;
# 20 bins, upper case only, so the pattern takes only that case
DEPOTS = [f"Hub-{i:02d}" for i in range(30)]
BINS = [f"BAY {chr(65 + i)}{chr(65 + i)}" for i in range(20)]


def _rows() -> list[tuple[Any, ...]]:
    # depot Hub-NN is held only by rows of side W when NN is even, side E when odd
    return [(i, DEPOTS[i % 30], BINS[i % 20], "W" if (i % 30) % 2 == 0 else "E", 1.5 * i)
            for i in range(600)]


COLUMNS = "parcel_no INTEGER PRIMARY KEY, depot VARCHAR, bin VARCHAR, side VARCHAR, mass DOUBLE PRECISION"


@pytest.fixture(params=["duckdb", "postgres"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    schema_args: list[str] = []
    if request.param == "duckdb":
        db = tmp_path / "parcels.duckdb"
        with duckdb.connect(str(db)) as con:
            con.execute(f"CREATE TABLE parcels ({COLUMNS})")
            con.executemany("INSERT INTO parcels VALUES (?, ?, ?, ?, ?)", _rows())
        url, drop = f"duckdb:///{db}", None
    else:
        import psycopg

        url = request.getfixturevalue("pg_url")
        schema = f"cases_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f'CREATE SCHEMA "{schema}"')
            c.execute(f'CREATE TABLE "{schema}".parcels ({COLUMNS})')
            with c.cursor() as cur:
                cur.executemany(f'INSERT INTO "{schema}".parcels VALUES (%s, %s, %s, %s, %s)',
                                _rows())
        schema_args, drop = ["--schema", schema], schema
    try:
        r = run_cli("init", "p", "--source", url, "--user", "ops", *schema_args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        path = tmp_path / "p" / "tether.yaml"
        cfg = yaml.safe_load(path.read_text())
        cfg["policies"]["roles"]["west"] = {
            "tools": ["*"], "row_filters": {"parcels": "side = {{ user.side }}"}}
        cfg["policies"]["users"]["wes"] = {"role": "west", "side": "W"}
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        for step in ("profile", "build"):
            r = run_cli(step, "--project", "p", cwd=tmp_path)
            assert r.returncode == 0, (step, r.stderr)
        yield tmp_path / "p"
    finally:
        if drop:
            import psycopg

            with psycopg.connect(url, autocommit=True) as c:
                c.execute(f'DROP SCHEMA "{drop}" CASCADE')


def _props(project: Path) -> dict[str, Any]:
    import json

    tool = json.loads((project / "tools" / "parcels_by_attributes.json").read_text())
    return tool["inputSchema"]["properties"]


def test_a_value_in_another_case(project: Path) -> None:
    props = _props(project)
    assert "enum" not in str(props["depot"]) and props["depot"].get("pattern")
    assert props["bin"].get("pattern") and "enum" not in str(props["bin"])
    loaded = load_project(project)
    spelled, mixed, none, hidden, asked_right = call_tools(loaded, "wes", [
        ("parcels_by_attributes", {"bin": "bay cc", "limit": 200}),
        ("parcels_by_attributes", {"depot": "hub-04", "limit": 5}),
        ("parcels_by_attributes", {"depot": "Hub-77", "limit": 5}),
        ("parcels_by_attributes", {"depot": "hub-05", "count_by": "bin"}),
        ("parcels_by_attributes", {"depot": "Hub-04", "limit": 5}),
    ])
    # a format of one case: spelled in it, said, and the caller's filter still applies
    assert not spelled.is_error, spelled.content[0].text
    got = spelled.structured_content
    assert got["moved_values"] == {"BAY CC": "bin"}
    assert "BAY CC read as a value of bin" in spelled.content[0].text
    assert got["total_rows"] == sum(1 for r in _rows() if r[2] == "BAY CC" and r[3] == "W")
    assert {r["side"] for r in got["rows"]} == {"W"}
    # a format that takes the case as written: no row, and the value to call again with
    assert mixed.structured_content["total_rows"] == 0
    reason = mixed.structured_content["empty_reason"]
    assert "'Hub-04' (another case) is one of its values: call again with it" in reason
    assert "call again with it" in mixed.content[0].text
    assert asked_right.structured_content["total_rows"] == 20
    # a value no row holds in any case: no hint
    assert "another case" not in none.structured_content["empty_reason"]
    # Hub-05 is held only by rows the caller may not see: never named to them
    text = hidden.content[0].text + str(hidden.structured_content)
    assert "Hub-05" not in text and "another case" not in text, text
    # the unfiltered caller gets the hint for the same call
    seen, = call_tools(loaded, "ops", [("parcels_by_attributes", {"depot": "hub-05",
                                                                  "count_by": "bin"})])
    assert "'Hub-05' (another case)" in seen.structured_content["empty_reason"]
