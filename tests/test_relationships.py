"""`tether init` finds relationships right, on DuckDB and PostgreSQL: the catalog's FOREIGN KEY
constraints first (a column named for nothing included), then names and values (a column named
as another table's key, PascalCase or prefixed, or after a role), a hierarchy (a column of
parents in its own table), and never a number that merely falls inside another table's run of
ids. A column whose name says it points at someone in a role, but names no table, is proposed
as a commented candidate with its evidence, never written. Each entry's comment says why.

The schema is an observatory of its own (sites, telescopes, astronomers, observations), in no
test warehouse's domain; the zoo's datasets and the demo are measured in tests/test_zoo.py and
below against their documented references."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from conftest import run_cli
from test_zoo import written_and_proposed

TABLES = [
    ("Site", '"SiteId" INTEGER, "Name" TEXT',
     "SELECT i, 'Site ' || i FROM range(1, 13) t(i)"),
    ("Telescope", '"TelescopeId" INTEGER, "SiteId" INTEGER, "Mirrors" INTEGER, "Aperture" DOUBLE',
     "SELECT i, 1 + i % 12, 1 + i % 12, i * 0.25 FROM range(1, 41) t(i)"),
    ("Astronomer", '"AstronomerId" INTEGER, "Name" TEXT, "MentorId" INTEGER, '
     '"HomeSiteId" INTEGER',
     "SELECT i, 'Astronomer ' || i, CASE WHEN i <= 3 THEN NULL ELSE 1 + i % 3 END, "
     "1 + i % 12 FROM range(1, 31) t(i)"),
    ("Observation", '"ObservationId" INTEGER, "TelescopeId" INTEGER, "AstronomerId" INTEGER, '
     '"ReviewedBy" INTEGER, "Exposure" INTEGER, "Night" DATE',
     "SELECT i, 1 + i % 40, 1 + i % 30, 1 + (i * 7) % 30, 1 + i % 300, "
     "DATE '2026-01-01' + CAST(i % 200 AS INTEGER) FROM range(1, 501) t(i)"),
]
KEYS = {"Site": "SiteId", "Telescope": "TelescopeId", "Astronomer": "AstronomerId",
        "Observation": "ObservationId"}
FOREIGN = [("Telescope", "SiteId", "Site", "SiteId"),
           ("Astronomer", "MentorId", "Astronomer", "AstronomerId"),
           ("Astronomer", "HomeSiteId", "Site", "SiteId"),
           ("Observation", "TelescopeId", "Telescope", "TelescopeId"),
           ("Observation", "AstronomerId", "Astronomer", "AstronomerId"),
           ("Observation", "ReviewedBy", "Astronomer", "AstronomerId")]
TRUE = {f"{c}.{col} -> {p}.{k}" for c, col, p, k in FOREIGN}
ROLE = "Observation.ReviewedBy -> Astronomer.AstronomerId"  # names a role, not a table


def _duckdb(tmp_path: Path, declared: bool) -> list[str]:
    db = tmp_path / "sky.duckdb"
    with duckdb.connect(str(db)) as con:
        for name, cols, rows in TABLES:
            extra = f', PRIMARY KEY ("{KEYS[name]}")' if declared else ""
            if declared:
                extra += "".join(f', FOREIGN KEY ("{col}") REFERENCES "{p}" ("{k}")'
                                 for c, col, p, k in FOREIGN if c == name and p != c)
            con.execute(f'CREATE TABLE "{name}" ({cols}{extra})')
            con.execute(f'INSERT INTO "{name}" {rows}')
    return ["--source", f"duckdb:///{db}"]


@pytest.fixture(params=["duckdb", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path
           ) -> Iterator[tuple[str, Callable[[bool], list[str]]]]:
    """(engine, a maker of the schema: declared keys or none -> tether init's --source args)."""
    if request.param == "duckdb":
        yield "duckdb", lambda declared: _duckdb(tmp_path, declared)
        return
    import psycopg

    url = request.getfixturevalue("pg_url")
    schema = f"sky_{uuid.uuid4().hex[:8]}"
    local = tmp_path / "rows.duckdb"

    def make(declared: bool) -> list[str]:
        with duckdb.connect(str(local)) as con, psycopg.connect(url, autocommit=True) as pg:
            pg.execute(f'CREATE SCHEMA "{schema}"')
            for name, cols, rows in TABLES:
                pgcols = cols.replace("DOUBLE", "DOUBLE PRECISION")
                extra = f', PRIMARY KEY ("{KEYS[name]}")' if declared else ""
                pg.execute(f'CREATE TABLE "{schema}"."{name}" ({pgcols}{extra})')
                values = con.execute(rows).fetchall()
                with pg.cursor() as cur:
                    cur.executemany(f'INSERT INTO "{schema}"."{name}" VALUES '
                                    f"({', '.join(['%s'] * len(values[0]))})", values)
            if declared:
                for c, col, p, k in FOREIGN:
                    pg.execute(f'ALTER TABLE "{schema}"."{c}" ADD FOREIGN KEY ("{col}") '
                               f'REFERENCES "{schema}"."{p}" ("{k}")')
        return ["--source", url, "--schema", schema]
    try:
        yield "postgres", make
    finally:
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _init(tmp_path: Path, source: list[str]) -> tuple[set[str], set[str], str]:
    r = run_cli("init", "p", *source, cwd=tmp_path, env={"TETHER_USER": "x"})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "p" / "tether.yaml").read_text()
    written, proposed = written_and_proposed(tmp_path / "p" / "tether.yaml")
    return written, proposed, text


def _comment(text: str, entry: str) -> str:
    """The comment of the written or proposed line for ``child.col -> parent.key``."""
    child, parent = entry.split(" -> ")
    line = next(x for x in text.splitlines() if f"from: {child}," in x and f"to: {parent}," in x)
    return line.split("}  # ", 1)[1]


def test_names_values_and_a_hierarchy(engine: tuple[str, Callable[[bool], list[str]]],
                                      tmp_path: Path) -> None:
    """No key declared: each column named for a key (the same PascalCase name, or after a role:
    HomeSiteId) with its values there is written; a mentor column pointing into its own table,
    with roots, is a hierarchy; a reviewer (a role that names no table) is the first
    candidate, not written; a count whose values fall inside every run of ids is nothing."""
    _name, make = engine
    written, proposed, text = _init(tmp_path, make(False))
    assert written == TRUE - {ROLE}, sorted(written ^ (TRUE - {ROLE}))
    assert ROLE in proposed
    first = next(x for x in text.splitlines() if "# - {from: Observation.ReviewedBy" in x)
    assert "to: Astronomer.AstronomerId" in first  # ranked first: it holds all of its keys
    assert _comment(text, "Telescope.SiteId -> Site.SiteId") == (
        "inferred: name and values (SiteId holds 12 of Site's 12 keys)")
    assert _comment(text, "Astronomer.MentorId -> Astronomer.AstronomerId").startswith(
        "inferred: a hierarchy (MentorId holds 3 of Astronomer's 30 keys")
    assert "3 rows have none, the roots" in text
    for trap in ("Mirrors", "Exposure"):  # numbers inside a run of ids: no evidence
        assert f"from: Telescope.{trap}" not in text and f"from: Observation.{trap}" not in text


def test_declared_foreign_keys_come_first(engine: tuple[str, Callable[[bool], list[str]]],
                                          tmp_path: Path) -> None:
    """Keys declared in the catalog: every FOREIGN KEY is written as declared, the reviewer's
    too (no name says where it points; the constraint does)."""
    name, make = engine
    written, _proposed, text = _init(tmp_path, make(True))
    declared = TRUE if name == "postgres" else {  # DuckDB declares no key to its own table
        e for e in TRUE if "MentorId" not in e}
    assert declared <= written and written <= TRUE, sorted(written ^ TRUE)
    for entry in declared:
        assert _comment(text, entry) == "declared: a FOREIGN KEY in the source"


def test_the_demo_warehouse(demo_dir: Path, tmp_path: Path) -> None:
    """The demo's warehouse: its references to a table's key are written (a 1:1 crosswalk to the
    table its key names), none else."""
    written, _proposed, text = _init(tmp_path, ["--source",
                                                f"duckdb:///{demo_dir / 'warehouse.duckdb'}"])
    assert written == {"customer_crosswalk.customer_id -> customers.customer_id",
                       "order_lines.order_id -> orders.order_id",
                       "support_tickets.customer_id -> customers.customer_id"}, written
    assert "range" not in text.split("relationships:", 1)[1]
