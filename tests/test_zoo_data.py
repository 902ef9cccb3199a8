"""The zoo's datasets (tests/zoo.py), each loaded into DuckDB and copied into PostgreSQL: both
engines hold the same tables, rows and column names as the files, and every question's gold SQL
returns its stored answer on both. The PostgreSQL half runs when TETHER_TEST_PG_URL is set."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

import zoo

NAMES = sorted(zoo.DATASETS)


@pytest.fixture(scope="module", params=NAMES)
def loaded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[str, Path, dict[str, int]]:
    """(dataset, DuckDB file, {table: rows}), loaded once per dataset."""
    name: str = request.param
    d = tmp_path_factory.mktemp(name)
    db = d / f"{name}.duckdb"
    t0 = time.monotonic()
    counts = zoo.load_duckdb(name, db, d / "files")
    print(f"\n{name}: DuckDB load {time.monotonic() - t0:.1f} s, {sum(counts.values())} rows")
    return name, db, counts


@pytest.fixture(scope="module")
def loaded_pg(loaded: tuple[str, Path, dict[str, int]], pg_url: str
              ) -> Iterator[tuple[str, dict[str, int]]]:
    """(schema, {table: rows}) of the same dataset copied into a new PostgreSQL schema."""
    name, db, _ = loaded
    schema = f"zoo_{name}_{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    try:
        counts = zoo.load_postgres(db, pg_url, schema)
        print(f"\n{name}: PostgreSQL load {time.monotonic() - t0:.1f} s")
        yield schema, counts
    finally:
        zoo.drop_postgres(pg_url, schema)


def _questions(name: str) -> list[dict[str, Any]]:
    return yaml.safe_load(zoo.questions_file(name).read_text())  # type: ignore[no-any-return]


def _plain(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, dt.date | dt.datetime | dt.time):
        return v.isoformat()
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def _shape(rows: list[tuple[Any, ...]]) -> Any:
    """A result as questions.yaml stores it: a scalar for one value, else a list of rows."""
    out = [[_plain(v) for v in row] for row in rows]
    return out[0][0] if len(out) == 1 and len(out[0]) == 1 else out


def _same(got: Any, want: Any) -> bool:
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    numbers = (int, float)
    if (isinstance(got, numbers) and isinstance(want, numbers)
            and not isinstance(got, bool) and not isinstance(want, bool)):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-6)
    return bool(got == want)


def _check_answers(name: str, run: Any) -> None:
    wrong = []
    for q in _questions(name):
        got = _shape(run(q["gold_sql"]))
        want = _plain(q["answer"])
        if not _same(got, want):
            wrong.append(f"{q['id']}: got {got!r}, stored {want!r}")
    assert not wrong, "\n".join(wrong)


def _header(name: str, path: Path) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return f.readline().rstrip("\r\n").split(zoo.DATASETS[name].delim)


@pytest.mark.parametrize("name", NAMES)
def test_questions_file(name: str) -> None:
    qs = _questions(name)
    assert len(qs) >= 12
    ids = [q["id"] for q in qs]
    assert len(ids) == len(set(ids)), ids
    for q in qs:
        assert set(q) == {"id", "question", "gold_sql", "answer"}, q["id"]
        assert q["question"].strip() and q["gold_sql"].strip(), q["id"]
        assert ";" not in q["gold_sql"].strip().rstrip(";"), f"{q['id']}: one statement"


def test_duckdb_tables(loaded: tuple[str, Path, dict[str, int]], tmp_path: Path) -> None:
    """Every table the registry names, with its rows, and the files' headers as column names."""
    name, db, counts = loaded
    assert counts == dict(zoo.DATASETS[name].tables)
    files = zoo.data_files(name, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        for table, path in files.items():
            cols = [c[0] for c in con.execute(f"DESCRIBE {zoo.ident(table)}").fetchall()]
            assert cols == _header(name, path), table


def test_duckdb_answers(loaded: tuple[str, Path, dict[str, int]]) -> None:
    name, db, _ = loaded
    with duckdb.connect(str(db), read_only=True) as con:
        _check_answers(name, lambda sql: con.execute(sql).fetchall())


@pytest.mark.postgres
def test_postgres_tables(loaded: tuple[str, Path, dict[str, int]],
                         loaded_pg: tuple[str, dict[str, int]], pg_url: str) -> None:
    """The same tables, rows, column names (in order) and faithfully mapped types."""
    import psycopg

    _, db, counts = loaded
    schema, pg_counts = loaded_pg
    assert pg_counts == counts
    with duckdb.connect(str(db), read_only=True) as con, \
            psycopg.connect(pg_url, autocommit=True) as pg:
        for table in counts:
            n = pg.execute(f"SELECT count(*) FROM {zoo.ident(schema)}.{zoo.ident(table)}").fetchone()
            assert n is not None and n[0] == counts[table], table
            want = [(c[0], c[1]) for c in con.execute(f"DESCRIBE {zoo.ident(table)}").fetchall()]
            got = pg.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                             "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped "
                             "ORDER BY attnum", (f"{zoo.ident(schema)}.{zoo.ident(table)}",)).fetchall()
            assert [c for c, _ in got] == [c for c, _ in want], table
            assert [t for _, t in got] == [zoo.pg_type(t) for _, t in want], table


@pytest.mark.postgres
def test_postgres_answers(loaded: tuple[str, Path, dict[str, int]],
                          loaded_pg: tuple[str, dict[str, int]], pg_url: str) -> None:
    import psycopg

    name = loaded[0]
    schema = loaded_pg[0]
    with psycopg.connect(pg_url, autocommit=True) as pg:
        pg.execute(f"SET search_path TO {zoo.ident(schema)}")
        _check_answers(name, lambda sql: pg.execute(sql).fetchall())
