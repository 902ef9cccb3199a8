"""The schema fingerprint: sensitive to each schema change, blind to rows. DuckDB and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from tether.config import load_project
from tether.profiling import profile_product

CREATE = "CREATE TABLE t (id INTEGER NOT NULL, status VARCHAR, amount_cents BIGINT)"
CHANGES = {
    "rename": "ALTER TABLE t RENAME COLUMN status TO state",
    "drop": "ALTER TABLE t DROP COLUMN amount_cents",
    "retype": "ALTER TABLE t ALTER COLUMN amount_cents TYPE INTEGER",
    "nullability": "ALTER TABLE t ALTER COLUMN status SET NOT NULL",
    "add": "ALTER TABLE t ADD COLUMN note VARCHAR",
}
ROW_CHANGES = [
    "INSERT INTO t VALUES (1, 'NEW', 100), (2, 'PAID', 250)",
    "UPDATE t SET status = 'SHIPPED' WHERE id = 1",
    "DELETE FROM t WHERE id = 2",
]

Exec = Callable[[str], None]


def _project(root: Path, url: str, schema: str | None = None) -> Path:
    extra = f", schema: {schema}" if schema else ""
    (root / "tether.yaml").write_text(
        f'sources:\n  main: {{url: "{url}"{extra}}}\nproducts:\n  t: {{table: t}}\n'
    )
    return root


@pytest.fixture(params=["duckdb", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, Exec]]:
    if request.param == "duckdb":
        db = tmp_path / "fp.duckdb"

        def run(sql: str) -> None:
            with duckdb.connect(str(db)) as c:
                c.execute(sql)

        run(CREATE)
        yield _project(tmp_path, f"duckdb:///{db}"), run
        return
    pg_url = request.getfixturevalue("pg_url")
    import psycopg

    schema = f"tether_fp_{uuid.uuid4().hex[:8]}"

    def run_pg(sql: str) -> None:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'SET search_path TO "{schema}"')
            c.execute(sql)  # type: ignore[arg-type]

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
    run_pg(CREATE)
    try:
        yield _project(tmp_path, pg_url, schema), run_pg
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]


def fingerprint(root: Path) -> str:
    return profile_product(load_project(root), "t").fingerprint


def test_stable_and_blind_to_rows(engine: tuple[Path, Exec]) -> None:
    root, run = engine
    first = fingerprint(root)
    assert fingerprint(root) == first
    for sql in ROW_CHANGES:
        run(sql)
        assert fingerprint(root) == first, sql


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_schema_change_changes_it(engine: tuple[Path, Exec], change: str) -> None:
    root, run = engine
    before = fingerprint(root)
    run(CHANGES[change])
    after = fingerprint(root)
    assert after != before, change


def test_column_order_does_not_matter(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d, ddl in ((a, "CREATE TABLE t (x INTEGER, y VARCHAR)"),
                   (b, "CREATE TABLE t (y VARCHAR, x INTEGER)")):
        d.mkdir()
        with duckdb.connect(str(d / "w.duckdb")) as c:
            c.execute(ddl)
        _project(d, f"duckdb:///{d / 'w.duckdb'}")
    assert fingerprint(a) == fingerprint(b)
