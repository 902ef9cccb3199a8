"""The profiler, on a real DuckDB file and on the real PostgreSQL, over the same demo data."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from tether.config import load_project
from tether.context.profile import ProductProfile
from tether.profiling import profile_product
from tether.profiling.formats import unit_from_name
from tether.sources import open_product_source


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def project_dir(request: pytest.FixtureRequest) -> Path:
    name = "demo_dir" if request.param == "duckdb" else "pg_demo_dir"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def profiles(project_dir: Path) -> dict[str, ProductProfile]:
    project = load_project(project_dir)
    return {n: profile_product(project, n) for n in project.config.products}


def distinct_values(project_dir: Path, product: str, column: str) -> set[Any]:
    project = load_project(project_dir)
    table = project.config.products[product].table
    with open_product_source(project, product) as src:
        expr = column
        if "." in column:  # a nested field: DuckDB struct access, jsonb in PostgreSQL
            head, field = column.split(".")
            expr = f"{head}.{field}" if src.dialect == "duckdb" else f"{head}->>'{field}'"
        rows = src.run(f"SELECT DISTINCT {expr} FROM {table} WHERE {expr} IS NOT NULL")
    return {r[0] for r in rows}


def test_every_enum_equals_the_observed_distinct_values(
    project_dir: Path, profiles: dict[str, ProductProfile]
) -> None:
    checked = 0
    for name, p in profiles.items():
        for c in p.columns:
            if c.enum is None:
                continue
            observed = distinct_values(project_dir, name, c.column.name)
            assert {e.value for e in c.enum} == observed, f"{name}.{c.column.name}"
            assert sum(e.count for e in c.enum) == c.non_null_count
            checked += 1
    assert checked >= 12
    got = {(n, c.column.name) for n, p in profiles.items() for c in p.columns if c.enum}
    assert {("orders", "status"), ("deals", "stage"), ("deals", "pipeline"),
            ("customers", "sales_region"), ("subscriptions", "status")} <= got
    # identifiers and unique columns are never enums
    assert ("customers", "customer_id") not in got and ("orders", "customer_ref") not in got


def test_the_two_dormant_deal_stages_are_deprecated(profiles: dict[str, ProductProfile]) -> None:
    stage = profiles["deals"].column("stage")
    assert stage.enum is not None and len(stage.enum) == 9
    assert {e.value for e in stage.enum if e.deprecated} == {"LEGAL_REVIEW", "VERBAL_COMMIT"}
    assert all(e.last_seen is not None for e in stage.enum)


def test_row_count_nulls_min_max(project_dir: Path, profiles: dict[str, ProductProfile]) -> None:
    orders = profiles["orders"]
    project = load_project(project_dir)
    with open_product_source(project, "orders") as src:
        n, lo, hi = src.run("SELECT count(*), min(amount_cents), max(amount_cents) FROM orders")[0]
    assert orders.row_count == n
    amount = orders.column("amount_cents")
    assert (amount.min, amount.max) == (lo, hi)
    assert amount.never_negative is True and amount.null_fraction == 0
    closed = profiles["deals"].column("closed_at")
    assert closed.null_fraction is not None and 0 < closed.null_fraction < 1
    assert profiles["orders"].column("status").distinct_exact


def test_formats_and_units(profiles: dict[str, ProductProfile]) -> None:
    assert "uuid" in profiles["customers"].column("customer_id").formats
    assert "email" in profiles["customers"].column("email").formats
    assert "currency_code" in profiles["orders"].column("currency").formats
    assert "datetime_midnight_utc" in profiles["deals"].column("closed_at").formats
    assert "datetime_midnight_utc" not in profiles["deals"].column("created_at").formats
    assert "date" in profiles["subscriptions"].column("period_start").formats
    assert profiles["orders"].column("amount_cents").unit_hint == "USD_cents"
    quantity = profiles["order_lines"].column("quantity")
    assert (quantity.unit_hint, quantity.unit_evidence) == ("count", "config")


@pytest.mark.parametrize(("name", "unit"), [
    ("amount_cents", "cents"), ("price_usd", "USD"), ("price", "currency"), ("mrr", "currency"),
    ("duration_seconds", "seconds"), ("latency_ms", "milliseconds"), ("order_count", "count"),
    ("discount_pct", "percent"),
    # a money word beside a time or counting word, or not a whole word: no unit is claimed
    ("arr_time", None), ("sched_arr_time", None), ("arr_delay", None), ("cost_count", "count"),
    ("subtotal", None), ("amounts_id", None), ("temp", None), ("year", None), ("lat", None),
])
def test_units_from_whole_words_only(name: str, unit: str | None) -> None:
    assert unit_from_name(name) == unit


def test_unit_hint_from_name_and_values(tmp_path: Path, demo_dir: Path) -> None:
    # without the configured unit, the name says cents and the currency column says USD
    text = (demo_dir / "tether.yaml").read_text().replace(
        "amount_cents: {unit: USD_cents, description: Order total in US cents.}",
        "amount_cents: {description: Order total.}",
    ).replace("duckdb:///warehouse.duckdb", f"duckdb:///{demo_dir / 'warehouse.duckdb'}")
    (tmp_path / "tether.yaml").write_text(text)
    c = profile_product(load_project(tmp_path), "orders").column("amount_cents")
    assert c.unit_hint == "USD_cents"
    assert c.unit_evidence is not None and c.unit_evidence.startswith("name")


def test_nested_fields(demo_dir: Path) -> None:
    p = profile_product(load_project(demo_dir), "orders")
    ship_to = next(c for c in p.columns if c.column.name == "ship_to.country")
    assert ship_to.column.kind == "string"
    assert ship_to.enum is not None and {e.value for e in ship_to.enum} >= {"US", "DE", "JP"}


def test_fingerprint_is_stable_and_shown(project_dir: Path,
                                         profiles: dict[str, ProductProfile]) -> None:
    again = profile_product(load_project(project_dir), "orders")
    assert again.fingerprint == profiles["orders"].fingerprint
    assert again.fingerprint.startswith("sha256:") and len(again.fingerprint) == 71
    assert len({p.fingerprint for p in profiles.values()}) == len(profiles)


def test_sql_product(tmp_path: Path, demo_dir: Path) -> None:
    text = (demo_dir / "tether.yaml").read_text().replace(
        "duckdb:///warehouse.duckdb", f"duckdb:///{demo_dir / 'warehouse.duckdb'}")
    text = text.replace("products:\n", "products:\n  backlog:\n    sql: \"SELECT order_id, status "
                        "FROM orders WHERE status IN ('NEW', 'PAID')\"\n", 1)
    (tmp_path / "tether.yaml").write_text(text)
    p = profile_product(load_project(tmp_path), "backlog")
    status = p.column("status")
    assert status.enum is not None and {e.value for e in status.enum} == {"NEW", "PAID"}


def test_missing_table_is_a_clear_product_error(project_dir: Path, tmp_path: Path) -> None:
    from tether.errors import ProductError

    text = (project_dir / "tether.yaml").read_text().replace("    table: deals\n", "    table: deal\n")
    text = text.replace("duckdb:///warehouse.duckdb", f"duckdb:///{project_dir / 'warehouse.duckdb'}")
    (tmp_path / "tether.yaml").write_text(text)
    with pytest.raises(ProductError) as e:
        profile_product(load_project(tmp_path), "deals")
    assert "does not exist" in e.value.message and "Did you mean 'deals'" in (e.value.hint or "")
    assert e.value.where is not None and e.value.where.startswith("tether.yaml:")


def test_format_needs_every_value_not_just_the_ends(tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "f.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute("CREATE TABLE t (a VARCHAR, b VARCHAR, ts TIMESTAMPTZ)")
        c.execute("""INSERT INTO t VALUES
            ('00000000-0000-4000-8000-000000000000', 'a@x.com', TIMESTAMPTZ '2026-01-01 00:00:00+00'),
            ('5-not-a-uuid', 'b@y.org', TIMESTAMPTZ '2026-01-02 00:00:01+00'),
            ('ffffffff-ffff-4fff-8fff-ffffffffffff', 'c@z.net', TIMESTAMPTZ '2026-01-03 00:00:00+00')""")
    (tmp_path / "tether.yaml").write_text(
        f'sources:\n  main: {{url: "duckdb:///{db}"}}\nproducts:\n  t: {{table: t}}\n')
    p = profile_product(load_project(tmp_path), "t")
    assert "uuid" not in p.column("a").formats  # min and max are UUIDs, a middle value is not
    assert "email" in p.column("b").formats
    assert "datetime_midnight_utc" not in p.column("ts").formats


def test_as_of_comes_from_the_freshness_column(profiles: dict[str, ProductProfile]) -> None:
    import datetime as dt

    from tether.demo.warehouse import CLOCK

    assert profiles["pipeline_snapshot"].as_of == CLOCK - dt.timedelta(hours=14)
    orders = profiles["orders"].as_of
    assert orders is not None and dt.timedelta(minutes=5) <= CLOCK - orders < dt.timedelta(hours=2)
    assert profiles["order_lines"].as_of is None  # freshness: {load_time: true}


def _dormant(project_dir: Path, clock: str | None, tmp: Path) -> dict[tuple[str, str], set[Any]]:
    """{(product, column): values marked deprecated} with the project's clock replaced."""
    text = (project_dir / "tether.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("clock:")]
    if clock:
        lines.insert(0, f"clock: {clock}")
    shutil.copytree(project_dir, tmp, ignore=shutil.ignore_patterns(".tether", "tools"))
    (tmp / "tether.yaml").write_text("\n".join(lines) + "\n")
    project = load_project(tmp)
    out: dict[tuple[str, str], set[Any]] = {}
    for name in project.config.products:
        for c in profile_product(project, name).columns:
            dormant = {e.value for e in c.enum or [] if e.deprecated}
            if dormant:
                out[(name, c.column.name)] = dormant
    return out


@pytest.mark.parametrize("which", ["demo", "second"])
def test_dormancy_counts_from_the_data_not_the_wall_clock(
        which: str, demo_dir: Path, second_dir: Path, tmp_path: Path) -> None:
    """Moving the clock years past the data (or using the wall clock) marks nothing more dormant:
    dormancy counts from the earlier of the clock and each product's newest time."""
    project_dir = demo_dir if which == "demo" else second_dir
    text = (project_dir / "tether.yaml").read_text()
    clock = next(ln.split(":", 1)[1].split("#")[0].strip() for ln in text.splitlines()
                 if ln.startswith("clock:"))
    at_clock = _dormant(project_dir, clock, tmp_path / "a")
    assert _dormant(project_dir, "2036-01-01T00:00:00Z", tmp_path / "b") == at_clock
    assert _dormant(project_dir, None, tmp_path / "c") == at_clock  # the wall clock
    if which == "demo":
        assert at_clock[("deals", "stage")] == {"LEGAL_REVIEW", "VERBAL_COMMIT"}


def _members(tmp_path: Path, columns: str) -> tuple[Any, dict[str, Any]]:
    """A starter over 3,000 members, one joining every third day from 2000, with ``columns``
    (SQL over ``i``, the member's number) beside them; the project and its column profiles."""
    import duckdb

    db = tmp_path / "members.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"""CREATE TABLE members AS SELECT i AS member_no,
            DATE '2000-01-01' + CAST(i * 3 AS INTEGER) AS joined_on, {columns}
            FROM range(3000) t(i)""")
    r = run_cli("init", "p", "--source", f"duckdb:///{db}", cwd=tmp_path,
                env={"TETHER_USER": "x"})
    assert r.returncode == 0, r.stderr
    project = load_project(tmp_path / "p")
    return project, {c.column.name: c for c in profile_product(project, "members").columns}


def test_a_column_that_stopped_being_filled_marks_no_value_dormant(tmp_path: Path) -> None:
    """Dormant means replaced: a value that stopped while others go on is deprecated; a column
    none of whose values is recent (a closing place filled only for rows that started long
    ago, NULL on every recent one) marks none of them, whatever their age."""
    project, prof = _members(tmp_path, """
            CASE WHEN i < 2000 THEN ['north', 'south', 'east'][i % 3 + 1] END AS closed_in,
            CASE WHEN i < 1500 THEN ['old_a', 'old_b'][i % 2 + 1]
                 ELSE ['new_a', 'new_b'][i % 2 + 1] END AS tier""")
    assert project.config.products["members"].metric_time == "joined_on"
    assert not [e.value for e in prof["closed_in"].enum or [] if e.deprecated]
    assert {e.value for e in prof["tier"].enum or [] if e.deprecated} == {"old_a", "old_b"}


def test_a_rare_value_or_one_from_history_is_not_dormant(tmp_path: Path) -> None:
    """Absence is evidence only where the value was due: a value seen a handful of times over
    the whole span (one member in a thousand with a rare tier, the last of them years before the
    data ends) is not deprecated, nor is one that stopped in the first third of the span (a
    tier of the founding years, asked about by date); a common value that stopped while others
    go on still is."""
    # 'rare' on 3 of the 3,000 members (about 25 years), the last in year 16
    _, prof = _members(tmp_path, """
            CASE WHEN i IN (100, 900, 1900) THEN 'rare'
                 WHEN i < 400 THEN 'founding'
                 WHEN i < 2500 THEN ['std', 'old'][i % 2 + 1]
                 ELSE 'std' END AS tier""")
    assert {e.value for e in prof["tier"].enum or [] if e.deprecated} == {"old"}
