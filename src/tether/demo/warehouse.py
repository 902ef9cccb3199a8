"""The embedded demo warehouse: a fictional company whose data holds the traps agents fall into.

Everything is generated inside DuckDB from a seeded integer hash (no Python loops over rows), so
the same seed and scale give the same rows on every machine and DuckDB version, fast: scale 1
(about 300k rows; 200k order lines) in a few seconds, scale 50 (10.5M order lines) in about a
minute. The traps are described in docs/demo.md; their table and column names are fixed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

CLOCK = dt.datetime(2026, 8, 20, 9, 0, tzinfo=dt.UTC)
"""The demo's fixed 'now'. The pipeline snapshot's newest load is 14 hours before it."""
HISTORY_START = "2023-02-01"  # first day of fiscal year 2024 (fiscal years start in February)
COINCIDENCE = ("EMEA", dt.date(2026, 2, 1), dt.date(2026, 5, 1))
"""(region, quarter start, quarter end exclusive): FY2027 Q1 in EMEA, where the legacy
``is_active`` count equals the governed active-customer count by coincidence."""
DORMANT_STAGES = ("LEGAL_REVIEW", "VERBAL_COMMIT")
TABLES = (
    "customers", "customer_crosswalk", "subscriptions", "orders", "order_lines", "deals",
    "support_tickets", "pipeline_snapshot",
)

Step = Callable[[str], None]


@dataclass(frozen=True)
class Sizes:
    customers: int
    orders: int
    deals: int
    tickets: int

    @classmethod
    def for_scale(cls, scale: float) -> Sizes:
        def n(base: int, floor: int) -> int:
            return max(floor, round(base * scale))

        return cls(n(4000, 60), n(60000, 300), n(6000, 120), n(10000, 100))


_MACROS = """
CREATE OR REPLACE TEMP MACRO _h1(x) AS (xor(x >> 16, x) * 73244475) & 4294967295;
CREATE OR REPLACE TEMP MACRO _h(x) AS xor(_h1(_h1(x)) >> 16, _h1(_h1(x)));
CREATE OR REPLACE TEMP MACRO rnd(i, salt) AS
    _h((i::BIGINT * 2654435761 + salt::BIGINT * 97531 + {seed}) & 4294967295) / 4294967296.0;
CREATE OR REPLACE TEMP MACRO pick(i, salt, arr) AS
    arr[1 + floor(rnd(i, salt) * len(arr))::INTEGER];
CREATE OR REPLACE TEMP MACRO crm_id(c) AS
    'A-' || lpad(((c * 7919) % 9000000 + 1000000)::VARCHAR, 7, '0');
CREATE OR REPLACE TEMP MACRO billing_no(c) AS
    '40' || lpad(((c * 104729) % 90000000 + 10000000)::VARCHAR, 8, '0');
CREATE OR REPLACE TEMP MACRO canonical_id(c) AS printf('%08x-%04x-4%03x-a%03x-%012x',
    (rnd(c, 1) * 4294967295)::BIGINT, (rnd(c, 2) * 65535)::BIGINT,
    (rnd(c, 3) * 4095)::BIGINT, (rnd(c, 4) * 4095)::BIGINT, c + 1);
"""

_GEO = """
CREATE TEMP TABLE geo AS SELECT * FROM (VALUES
  ('DE','EMEA','EU-DE', 9), ('GB','EMEA','EU-GB', 8), ('FR','EMEA','EU-FR', 6),
  ('NL','EMEA','EU-NL', 4), ('ES','EMEA','EU-ES', 3),
  ('AE','EMEA','EU-AE', 3), ('SA','EMEA','EU-SA', 2), ('IL','EMEA','EU-IL', 2),
  ('ZA','EMEA','AF-ZA', 2), ('NG','EMEA','AF-NG', 1),
  ('US','AMER','NA-US', 25), ('CA','AMER','NA-CA', 4), ('BR','AMER','LA-BR', 4),
  ('MX','AMER','LA-MX', 2),
  ('JP','APAC','AP-JP', 7), ('AU','APAC','AP-AU', 7), ('IN','APAC','AP-IN', 6),
  ('SG','APAC','AP-SG', 5)
) v(country, sales_region, region_code, weight);
CREATE TEMP TABLE geo_cum AS
SELECT *, (sum(weight) OVER (ORDER BY region_code ROWS UNBOUNDED PRECEDING) - weight) / 100.0 AS lo,
          sum(weight) OVER (ORDER BY region_code ROWS UNBOUNDED PRECEDING) / 100.0 AS hi
FROM geo;
"""

_CUSTOMERS = """
CREATE TABLE customers AS
WITH b AS (
  SELECT i, rnd(i, 11) AS u_geo,
    TIMESTAMPTZ '2022-06-01 00:00:00+00'
      + to_seconds((rnd(i, 13) * (epoch(TIMESTAMPTZ '{clock}') - 1654041600 - 20 * 86400))::BIGINT)
      AS created_at
  FROM range({n}) r(i)
)
SELECT
  canonical_id(i) AS customer_id,
  pick(i, 14, ['Acme','Globex','Initech','Umbrella','Stark','Wayne','Hooli','Vandelay',
               'Soylent','Tyrell','Cyberdyne','Wonka','Gringotts','Aperture','Oscorp','Massive'])
    || ' ' || pick(i, 15, ['Labs','Systems','Foods','Logistics','Health','Bank','Media','Energy',
               'Robotics','Retail','Analytics','Works']) || ' ' || (i + 1)::VARCHAR AS name,
  'ap' || (i + 1)::VARCHAR || '@' || pick(i, 16, ['acme','globex','initech','hooli','tyrell'])
    || '-corp.example.com' AS email,
  g.country, g.sales_region, g.region_code,
  pick(i, 17, ['SMB','SMB','SMB','MID_MARKET','MID_MARKET','ENTERPRISE']) AS segment,
  FALSE AS is_active,
  'TX-' || lpad(((i * 48271) % 1000000000)::VARCHAR, 9, '0') AS tax_id,
  b.created_at,
  TIMESTAMPTZ '{clock}' - INTERVAL 25 MINUTE AS loaded_at
FROM b JOIN geo_cum g ON b.u_geo >= g.lo AND b.u_geo < g.hi
ORDER BY i;
ALTER TABLE customers ADD PRIMARY KEY (customer_id);
CREATE TEMP TABLE cust_idx AS
SELECT (row_number() OVER (ORDER BY rowid) - 1)::BIGINT AS i, customer_id, sales_region, country,
       created_at FROM customers;
"""

_CROSSWALK = """
CREATE TABLE customer_crosswalk AS
SELECT customer_id, crm_id(i) AS crm_account_id, billing_no(i) AS billing_account_no
FROM cust_idx ORDER BY i;
ALTER TABLE customer_crosswalk ADD PRIMARY KEY (customer_id);
"""

# Each subscription is a sequence of status spells [period_start, period_end); the last is open.
_SUBSCRIPTIONS = """
CREATE TABLE subscriptions AS
WITH s AS (
  SELECT c.i, k, c.i * 2 + k AS sid, billing_no(c.i) AS billing_account_no,
    c.created_at::DATE + (3 + floor(rnd(c.i * 2 + k, 51) * 40))::INTEGER
      + CASE WHEN k = 2 THEN (120 + floor(rnd(c.i, 52) * 480))::INTEGER ELSE 0 END AS start_day,
    rnd(c.i * 2 + k, 53) AS u_path,
    pick(c.i * 2 + k, 54, ['STARTER','STARTER','GROWTH','GROWTH','ENTERPRISE']) AS plan
  FROM cust_idx c, range(1, 3) r(k)
  WHERE k = 1 OR rnd(c.i, 55) < 0.3
), p AS (
  SELECT *,
    CASE WHEN u_path < 0.35 THEN ['TRIAL','ACTIVE']
         WHEN u_path < 0.55 THEN ['TRIAL','ACTIVE','CANCELLED']
         WHEN u_path < 0.72 THEN ['TRIAL','ACTIVE','PAUSED_BILLING','ACTIVE']
         WHEN u_path < 0.87 THEN ['TRIAL','ACTIVE','PAUSED_BILLING','CANCELLED']
         ELSE ['TRIAL','EXPIRED'] END AS statuses,
    [14 + floor(rnd(sid, 56) * 16), 45 + floor(rnd(sid, 57) * 500),
     20 + floor(rnd(sid, 58) * 70), 60 + floor(rnd(sid, 59) * 400)]::INTEGER[] AS lengths
  FROM s
), spells AS (
  SELECT sid, billing_account_no, plan, statuses[sk] AS status, sk AS spell, len(statuses) AS n,
    start_day + coalesce(list_sum(lengths[1:sk - 1]), 0)::INTEGER AS period_start,
    start_day + list_sum(lengths[1:sk])::INTEGER AS natural_end
  FROM p, generate_series(1, len(statuses)) g(sk)
)
SELECT
  'SUB-' || lpad(sid::VARCHAR, 8, '0') AS subscription_id, spell AS spell_no, billing_account_no,
  plan, status, period_start,
  CASE WHEN spell = n OR natural_end > DATE '{today}' THEN NULL ELSE natural_end END AS period_end,
  CASE plan WHEN 'STARTER' THEN 4900 WHEN 'GROWTH' THEN 19900 ELSE 99900 END AS mrr_cents,
  TIMESTAMPTZ '{clock}' - INTERVAL 1 HOUR AS loaded_at
FROM spells
WHERE period_start <= DATE '{today}'
ORDER BY sid, spell;
ALTER TABLE subscriptions ADD PRIMARY KEY (subscription_id, spell_no);
"""

# The legacy flag: what the old CRM synced on 2025-06-30 (ACTIVE then, PAUSED_BILLING not
# counted), plus drift since. The coincidence step below makes one region-quarter match.
_LEGACY_ACTIVE = """
UPDATE customers SET is_active = TRUE
WHERE customer_id IN (
  SELECT x.customer_id FROM subscriptions s
  JOIN customer_crosswalk x USING (billing_account_no)
  WHERE s.status = 'ACTIVE' AND s.period_start <= DATE '2025-06-30'
    AND (s.period_end IS NULL OR s.period_end > DATE '2025-06-30')
) OR customer_id IN (
  SELECT customer_id FROM cust_idx
  WHERE created_at > TIMESTAMPTZ '2025-06-30 00:00:00+00' AND rnd(i, 61) < 0.6
);
"""

_ORDERS = """
CREATE TEMP TABLE order_base AS
SELECT j AS order_id, c.i AS ci, crm_id(c.i) AS customer_ref, c.sales_region, c.country,
  c.created_at + to_seconds((sqrt(rnd(j, 22))
      * (epoch(TIMESTAMPTZ '{clock}') - epoch(c.created_at) - 3600))::BIGINT) AS placed_at
FROM range(1, {n} + 1) r(j)
JOIN cust_idx c ON c.i = floor(pow(rnd(j, 21), 1.6) * {customers})::BIGINT;

CREATE TABLE order_lines AS
SELECT o.order_id, l.line_no,
  'SKU-' || lpad(floor(pow(rnd(o.order_id * 8 + l.line_no, 32), 2) * 2000)::BIGINT::VARCHAR, 5, '0') AS sku,
  1 + floor(pow(rnd(o.order_id * 8 + l.line_no, 33), 3) * 10)::INTEGER AS quantity,
  (500 + (floor(pow(rnd(o.order_id * 8 + l.line_no, 32), 2) * 2000)::BIGINT * 7919) % 49500)
    ::BIGINT AS unit_price_cents
FROM order_base o, generate_series(1, 1 + floor(rnd(o.order_id, 31) * 6)::BIGINT) l(line_no)
ORDER BY o.order_id, l.line_no;
ALTER TABLE order_lines ADD COLUMN line_amount_cents BIGINT;
ALTER TABLE order_lines ADD PRIMARY KEY (order_id, line_no);
UPDATE order_lines SET line_amount_cents = quantity * unit_price_cents;

CREATE TABLE orders AS
WITH t AS (SELECT order_id, sum(line_amount_cents)::BIGINT AS amount_cents
           FROM order_lines GROUP BY order_id)
SELECT o.order_id, o.customer_ref, o.sales_region,
  CASE
    WHEN age_h < 48 THEN CASE WHEN u < 0.55 THEN 'NEW' ELSE 'PAID' END
    WHEN age_h < 288 THEN CASE WHEN u < 0.40 THEN 'PAID' WHEN u < 0.92 THEN 'SHIPPED'
                               ELSE 'CANCELLED' END
    ELSE CASE WHEN u < 0.92 THEN 'SHIPPED' WHEN u < 0.99 THEN 'CANCELLED'
              WHEN u < 0.997 THEN 'PAID' ELSE 'NEW' END
  END AS status,
  'USD' AS currency, t.amount_cents, o.placed_at,
  {{'country': o.country, 'postal_code': lpad(floor(rnd(o.order_id, 24) * 99999)::BIGINT::VARCHAR, 5, '0')}}
    AS ship_to,
  least(o.placed_at + INTERVAL 7 MINUTE, TIMESTAMPTZ '{clock}' - INTERVAL 5 MINUTE) AS loaded_at
FROM (SELECT *, (epoch(TIMESTAMPTZ '{clock}') - epoch(placed_at)) / 3600 AS age_h,
             rnd(order_id, 23) AS u FROM order_base) o
JOIN t USING (order_id)
ORDER BY o.order_id;
ALTER TABLE orders ADD PRIMARY KEY (order_id);
"""

_DEALS = """
CREATE TABLE deals AS
WITH b AS (
  SELECT d, c.i AS ci, c.sales_region,
    CASE WHEN d % 40 = 0
      THEN TIMESTAMPTZ '{clock}' - to_seconds((86400 * (580 + rnd(d, 42) * 330))::BIGINT)
      ELSE TIMESTAMPTZ '{start} 00:00:00+00' + to_seconds((rnd(d, 42)
             * (epoch(TIMESTAMPTZ '{clock}') - epoch(TIMESTAMPTZ '{start} 00:00:00+00')))::BIGINT)
    END AS created_at,
    10 + rnd(d, 43) * 170 AS cycle_days,
    pick(d, 44, ['default','default','default','default','enterprise','enterprise','partner'])
      AS pipeline,
    round(5000 + pow(rnd(d, 45), 2) * 200000, -2) AS list_amount,
    floor(rnd(d, 46) * 26)::INTEGER AS discount_pct
  FROM range(1, {n} + 1) r(d)
  JOIN cust_idx c ON c.i = floor(rnd(d, 41) * {customers})::BIGINT
), s AS (
  SELECT *, date_trunc('day', created_at + to_seconds((cycle_days * 86400)::BIGINT)) AS close_day,
    (epoch(TIMESTAMPTZ '{clock}') - epoch(created_at)) / 86400.0 / cycle_days AS progress
  FROM b
)
SELECT
  'D-' || lpad(d::VARCHAR, 7, '0') AS deal_id, crm_id(ci) AS crm_account_id, sales_region,
  pipeline,
  CASE
    WHEN d % 40 = 0 THEN pick(d, 47, ['{dormant_a}', '{dormant_b}'])
    WHEN close_day <= TIMESTAMPTZ '{clock}'
      THEN CASE WHEN rnd(d, 48) < 0.42 THEN 'CLOSED_WON' ELSE 'CLOSED_LOST' END
    WHEN progress < 0.2 THEN 'PROSPECTING'
    WHEN progress < 0.4 THEN 'QUALIFICATION'
    WHEN progress < 0.6 THEN 'DISCOVERY'
    WHEN progress < 0.8 THEN 'PROPOSAL'
    ELSE 'NEGOTIATION'
  END AS stage,
  round(list_amount * (100 - discount_pct) / 100.0, 2)::DECIMAL(12, 2) AS amount_usd,
  discount_pct,
  created_at,
  CASE WHEN d % 40 <> 0 AND close_day <= TIMESTAMPTZ '{clock}' THEN close_day END AS closed_at,
  TIMESTAMPTZ '{clock}' - INTERVAL 40 MINUTE AS loaded_at
FROM s ORDER BY d;
ALTER TABLE deals ADD PRIMARY KEY (deal_id);
"""

_TICKETS = """
CREATE TABLE support_tickets AS
WITH b AS (
  SELECT t, c.customer_id, c.sales_region,
    c.created_at + to_seconds((sqrt(rnd(t, 72))
      * (epoch(TIMESTAMPTZ '{clock}') - epoch(c.created_at) - 600))::BIGINT) AS opened_at
  FROM range(1, {n} + 1) r(t)
  JOIN cust_idx c ON c.i = floor(pow(rnd(t, 71), 1.4) * {customers})::BIGINT
), s AS (
  SELECT *, (epoch(TIMESTAMPTZ '{clock}') - epoch(opened_at)) / 86400.0 AS age_d,
         rnd(t, 73) AS u FROM b
)
SELECT t AS ticket_id, customer_id, sales_region,
  pick(t, 74, ['LOW','MEDIUM','MEDIUM','HIGH','URGENT']) AS priority,
  CASE WHEN age_d > 10 AND u < 0.97 THEN 'SOLVED'
       WHEN u < 0.5 THEN 'OPEN' WHEN u < 0.8 THEN 'PENDING' ELSE 'SOLVED' END AS status,
  pick(t, 75, ['EMAIL','EMAIL','CHAT','PHONE']) AS channel,
  pick(t, 76, ['Invoice question','Cannot log in','Export failing','Billing address change',
               'API rate limit','Data missing in report','Feature request']) AS subject,
  opened_at,
  CASE WHEN (age_d > 10 AND u < 0.97) OR u >= 0.8
       THEN least(opened_at + to_seconds((3600 * (1 + rnd(t, 77) * 96))::BIGINT),
                  TIMESTAMPTZ '{clock}' - INTERVAL 1 MINUTE) END AS closed_at,
  TIMESTAMPTZ '{clock}' - INTERVAL 10 MINUTE AS loaded_at
FROM s ORDER BY t;
ALTER TABLE support_tickets ADD PRIMARY KEY (ticket_id);
"""

# Nightly at 19:00 UTC; the newest load (2026-08-19 19:00) is 14 hours older than the clock.
_SNAPSHOT = """
CREATE TABLE pipeline_snapshot AS
WITH days AS (
  SELECT (DATE '{today}' - INTERVAL (g) DAY)::DATE AS snapshot_date FROM range(1, 121) r(g)
)
SELECT d.snapshot_date, x.pipeline, x.sales_region,
  CASE WHEN x.stage IN ('CLOSED_WON', 'CLOSED_LOST') THEN 'NEGOTIATION' ELSE x.stage END AS stage,
  count(*)::INTEGER AS open_deals, sum(x.amount_usd)::DECIMAL(14, 2) AS open_amount_usd,
  (d.snapshot_date + INTERVAL 19 HOUR)::TIMESTAMPTZ AS loaded_at
FROM days d JOIN deals x
  ON x.created_at < d.snapshot_date + INTERVAL 1 DAY
 AND (x.closed_at IS NULL OR x.closed_at > d.snapshot_date)
GROUP BY ALL
ORDER BY 1, 2, 3, 4;
ALTER TABLE pipeline_snapshot ADD PRIMARY KEY (snapshot_date, pipeline, sales_region, stage);
"""


def build_warehouse(
    path: Path, scale: float = 1.0, seed: int = 7, step: Step | None = None
) -> dict[str, int]:
    """Write the demo warehouse to ``path`` (which must not exist); return rows per table."""
    note = step or (lambda _m: None)
    sizes = Sizes.for_scale(scale)
    clock = CLOCK.strftime("%Y-%m-%d %H:%M:%S+00")
    fmt = {
        "clock": clock, "today": CLOCK.date().isoformat(), "start": HISTORY_START,
        "customers": sizes.customers, "dormant_a": DORMANT_STAGES[0],
        "dormant_b": DORMANT_STAGES[1],
    }
    con = duckdb.connect(str(path))
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(_MACROS.format(seed=int(seed) * 1_000_003 % 2_147_483_647))
        con.execute(_GEO)
        steps = [
            ("customers", _CUSTOMERS, sizes.customers),
            ("identifier crosswalk", _CROSSWALK, 0),
            ("subscriptions", _SUBSCRIPTIONS, 0),
            ("legacy is_active flag", _LEGACY_ACTIVE, 0),
            ("orders and order lines", _ORDERS, sizes.orders),
            ("deals", _DEALS, sizes.deals),
            ("support tickets", _TICKETS, sizes.tickets),
            ("nightly pipeline snapshot", _SNAPSHOT, 0),
        ]
        for label, sql, n in steps:
            note(label)
            con.execute(sql.format(n=n, **fmt))
        note("the is_active coincidence")
        _engineer_coincidence(con)
        _declare_not_null(con)
        con.execute("CHECKPOINT")
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}
    finally:
        con.close()


NULLABLE_BY_DESIGN = {("subscriptions", "period_end"), ("deals", "closed_at"),
                      ("support_tickets", "closed_at")}
"""Open spells, open deals and open tickets have no end; every other column is NOT NULL."""


def _declare_not_null(con: duckdb.DuckDBPyConnection) -> None:
    """Declare NOT NULL in the schema, as a modelled warehouse does, so tools can rely on it."""
    for table in TABLES:
        for (column,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = $t AND is_nullable "
                "ORDER BY column_index", {"t": table}).fetchall():
            if (table, column) not in NULLABLE_BY_DESIGN:
                con.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET NOT NULL')


GOVERNED_ACTIVE_SQL = """
SELECT count(DISTINCT c.customer_id)
FROM customers c
JOIN customer_crosswalk x ON x.customer_id = c.customer_id
JOIN subscriptions s ON s.billing_account_no = x.billing_account_no
WHERE s.status IN ('ACTIVE', 'PAUSED_BILLING')
  AND s.period_start < $q_end AND (s.period_end IS NULL OR s.period_end > $q_start)
  AND c.sales_region = $region
"""
"""The governed definition of active customers in a region and fiscal quarter [q_start, q_end)."""


def _engineer_coincidence(con: duckdb.DuckDBPyConnection) -> None:
    """Flip legacy flags in one region until its is_active count equals the governed count for
    one quarter: the '1,284 and 1,284' an agent can match by luck with the wrong definition."""
    region, q_start, q_end = COINCIDENCE
    governed = con.execute(
        GOVERNED_ACTIVE_SQL, {"q_start": q_start, "q_end": q_end, "region": region}
    ).fetchall()[0][0]
    legacy = con.execute(
        "SELECT count(*) FROM customers WHERE is_active AND sales_region = $r", {"r": region}
    ).fetchall()[0][0]
    diff = governed - legacy
    if diff == 0:
        return
    con.execute(
        """
        UPDATE customers SET is_active = $to
        WHERE customer_id IN (
          SELECT customer_id FROM customers
          WHERE sales_region = $r AND is_active = $frm
          ORDER BY customer_id LIMIT $k)
        """,
        {"to": diff > 0, "frm": diff < 0, "r": region, "k": abs(diff)},
    )
