"""The demo warehouse: deterministic, and every trap docs/demo.md promises is really in the data."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tether.config import load_project
from tether.demo import init_demo
from tether.demo.warehouse import CLOCK, COINCIDENCE, GOVERNED_ACTIVE_SQL, TABLES
from tether.errors import ProjectExistsError


@pytest.fixture
def con(demo_dir: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    # one per test: DuckDB refuses a second connection to the file in this process with another
    # configuration (tether's own, READ_ONLY_CONFIG) while this one is open
    c = duckdb.connect(str(demo_dir / "warehouse.duckdb"), read_only=True)
    c.execute("SET TimeZone = 'UTC'")
    yield c
    c.close()


def one(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> object:
    return con.execute(sql, params).fetchall()[0][0]


def content_digest(path: Path) -> dict[str, str]:
    c = duckdb.connect(str(path), read_only=True)
    try:
        return {
            t: str(one(c, f"SELECT md5(string_agg(CAST(x AS VARCHAR), '|' ORDER BY CAST(x AS VARCHAR))) "
                          f"FROM {t} x"))
            for t in TABLES
        }
    finally:
        c.close()


def test_same_seed_same_data_different_seed_different(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    init_demo(a, scale=0.05)
    init_demo(b, scale=0.05)
    init_demo(c, scale=0.05, seed=8)
    da, db, dc = (content_digest(p / "warehouse.duckdb") for p in (a, b, c))
    assert da == db
    assert da["orders"] != dc["orders"]
    assert (a / "tether.yaml").read_text() == (b / "tether.yaml").read_text()


def test_refuses_to_overwrite_without_force(demo_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "d"
    init_demo(d, scale=0.05)
    (d / "tether.yaml").write_text("# edited by a person\n" + (d / "tether.yaml").read_text())
    before = (d / "tether.yaml").read_text()
    with pytest.raises(ProjectExistsError):
        init_demo(d, scale=0.05)
    assert (d / "tether.yaml").read_text() == before
    init_demo(d, scale=0.05, force=True)
    assert not (d / "tether.yaml").read_text().startswith("# edited")


def test_scale_one_sizes_and_speed(tmp_path: Path) -> None:
    started = dt.datetime.now()
    res = init_demo(tmp_path / "s1", scale=1)
    assert (dt.datetime.now() - started).total_seconds() < 60
    assert 190_000 <= res.rows["order_lines"] <= 230_000
    assert 250_000 <= sum(res.rows.values()) <= 350_000


def _quarters() -> list[tuple[dt.date, dt.date]]:
    out, start = [], dt.date(2023, 2, 1)
    while start < CLOCK.date():
        m = start.month + 3
        end = dt.date(start.year + (m - 1) // 12, (m - 1) % 12 + 1, 1)
        out.append((start, end))
        start = end
    return out


def test_is_active_disagrees_mostly_but_matches_by_coincidence(con: duckdb.DuckDBPyConnection
                                                               ) -> None:
    matches, total = [], 0
    for region in ("EMEA", "AMER", "APAC"):
        legacy = one(con, "SELECT count(*) FROM customers WHERE is_active AND sales_region = $r",
                     {"r": region})
        for q_start, q_end in _quarters():
            governed = one(con, GOVERNED_ACTIVE_SQL,
                           {"q_start": q_start, "q_end": q_end, "region": region})
            total += 1
            if governed == legacy:
                matches.append((region, q_start))
    assert (COINCIDENCE[0], COINCIDENCE[1]) in matches
    assert len(matches) <= total // 4, "the legacy flag must disagree in most region-quarters"
    # the same count, different customers: right by accident
    region, q_start, q_end = COINCIDENCE
    differing = one(con, """
        SELECT count(*) FROM customers c WHERE c.sales_region = $r AND c.is_active <> EXISTS (
          SELECT 1 FROM customer_crosswalk x JOIN subscriptions s USING (billing_account_no)
          WHERE x.customer_id = c.customer_id AND s.status IN ('ACTIVE','PAUSED_BILLING')
            AND s.period_start < $e AND (s.period_end IS NULL OR s.period_end > $s))
    """, {"r": region, "s": q_start, "e": q_end})
    assert isinstance(differing, int) and differing > 0


def test_middle_east_region_codes_start_with_eu(con: duckdb.DuckDBPyConnection) -> None:
    rows = dict(con.execute(
        "SELECT country, min(region_code) FROM customers WHERE country IN ('AE','SA','IL','ZA') "
        "GROUP BY 1").fetchall())
    assert rows["AE"].startswith("EU-") and rows["SA"].startswith("EU-")
    assert rows["ZA"].startswith("AF-")
    # so region_code LIKE 'EU%' is not EMEA and not Europe
    assert one(con, "SELECT count(*) FROM customers WHERE region_code LIKE 'EU%' "
                    "AND sales_region <> 'EMEA'") == 0
    assert one(con, "SELECT count(*) FROM customers WHERE sales_region = 'EMEA' "
                    "AND region_code NOT LIKE 'EU%'") > 0
    assert sorted(r[0] for r in con.execute(
        "SELECT DISTINCT sales_region FROM customers").fetchall()) == ["AMER", "APAC", "EMEA"]


def test_three_identifier_schemes_and_crosswalk(con: duckdb.DuckDBPyConnection) -> None:
    assert one(con, "SELECT count(*) FROM customer_crosswalk WHERE NOT regexp_full_match("
                    "crm_account_id, 'A-\\d{7}') OR NOT regexp_full_match(billing_account_no, "
                    "'40\\d{8}')") == 0
    assert one(con, "SELECT count(*) FROM orders o LEFT JOIN customer_crosswalk x "
                    "ON x.crm_account_id = o.customer_ref WHERE x.customer_id IS NULL") == 0
    # tickets key on the canonical id only: a CRM id finds nothing there
    cols = {r[0] for r in con.execute("DESCRIBE support_tickets").fetchall()}
    assert "customer_id" in cols and not {"crm_account_id", "customer_ref"} & cols
    assert one(con, "SELECT count(*) FROM support_tickets t JOIN customer_crosswalk x "
                    "ON x.crm_account_id = t.customer_id") == 0


def test_orders_statuses_cents_and_fan_out(con: duckdb.DuckDBPyConnection) -> None:
    statuses = sorted(r[0] for r in con.execute("SELECT DISTINCT status FROM orders").fetchall())
    assert statuses == ["CANCELLED", "NEW", "PAID", "SHIPPED"]
    assert one(con, "SELECT count(*) FROM orders o JOIN (SELECT order_id, sum(line_amount_cents) s "
                    "FROM order_lines GROUP BY 1) l USING (order_id) WHERE l.s <> o.amount_cents") == 0
    true_total = one(con, "SELECT sum(amount_cents) FROM orders")
    fanned = one(con, "SELECT sum(o.amount_cents) FROM orders o JOIN order_lines l USING (order_id)")
    assert isinstance(true_total, int) and isinstance(fanned, int) and fanned > 2 * true_total


def test_deals_stages_pipelines_and_midnight_close(con: duckdb.DuckDBPyConnection) -> None:
    stages = dict(con.execute("SELECT stage, max(created_at) FROM deals GROUP BY 1").fetchall())
    assert len(stages) == 9
    cutoff = CLOCK - dt.timedelta(days=548)  # 18 months
    dormant = {s for s, newest in stages.items() if newest < cutoff}
    assert dormant == {"LEGAL_REVIEW", "VERBAL_COMMIT"}
    assert sorted(r[0] for r in con.execute("SELECT DISTINCT pipeline FROM deals").fetchall()) == [
        "default", "enterprise", "partner"]
    assert one(con, "SELECT count(*) FROM deals WHERE closed_at IS NOT NULL AND "
                    "CAST(closed_at AT TIME ZONE 'UTC' AS TIME) <> TIME '00:00:00'") == 0
    assert one(con, "SELECT count(*) FROM deals WHERE closed_at IS NOT NULL") > 0


def test_snapshot_is_fourteen_hours_old(con: duckdb.DuckDBPyConnection) -> None:
    newest = one(con, "SELECT max(loaded_at) FROM pipeline_snapshot")
    assert isinstance(newest, dt.datetime)
    assert CLOCK - newest == dt.timedelta(hours=14)


def test_roles_fiscal_calendar_and_restricted_column(demo_dir: Path) -> None:
    c = load_project(demo_dir).config
    roles = {u.role for u in c.policies.users.values()}
    assert roles == {"finance_analyst", "regional_manager", "support_agent"}
    assert c.calendars["fiscal"].start_month != 1
    assert c.products["customers"].columns["tax_id"].classification == "restricted"


def test_the_policy_review_stage_tells_its_story(demo_dir: Path, capsys: pytest.CaptureFixture[str]
                                                 ) -> None:
    """make demo's stage 8: the widening waits (exit 11), both servers keep the approved
    policy, the author is refused, and the running server enforces the approved change."""
    import re

    from tether.demo.policy_tour import story

    story(str(demo_dir))
    said = capsys.readouterr().out
    assert "exit 11; policy 2.0.0 pending" in said and "approves it himself: refused" in said
    counts = [int(n) for n in re.findall(r"(\d+) matching rows", said)]
    assert len(counts) == 4 and counts[0] == counts[1] == counts[2] < counts[3], said
    assert "tether versions policy: 1.0.0, 2.0.0" in said
