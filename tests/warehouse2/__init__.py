"""A second generated warehouse for tests: a network of walk-in clinics, not a software company.

Anything in tether that must not be tuned to the demo is tested on this warehouse too. Its
tables, columns and enum values share no name with the demo's; ``tether.yaml`` beside this file
is its project template (``__SOURCE_URL__`` and ``__SOURCE_SCHEMA__`` are filled in by
:func:`build_second`). Deterministic: ``random.Random(seed)``; about 45k rows at scale 1.

Products (see tether.yaml):
- ``clinics``: 24 clinics, six per district (HARBOR, MIDTOWN, NORTHGATE, RIVERSIDE).
- ``patients``: one row per registered patient, with contact details (pii), a national id
  (restricted by column and classification) and a passport number (restricted by the glob
  ``*.passport*``).
- ``member_crosswalk``: insured patients' insurer member numbers (``MBR`` + 9 digits).
- ``visits``: one row per visit; ``visit_date`` is a DATE; ``fee_cents`` is in euro cents.
- ``claims``: insurance claims, keyed on the insurer's ``member_no`` (not the patient id);
  ``claimed_eur`` is in euros.
- ``daily_visit_summary``: a ``sql:`` product, discharged visits per day and clinic; its
  primary key holds a DATE (``service_day``).
- ``clinic_rota``: staff on duty per day, clinic and shift; no primary key, no freshness.

The traps, as the demo has them, in this domain:
- Look-alike boolean: ``visits.was_seen`` is the retired scheduler's flag. It counted ARRIVED and
  DISCHARGED but not TRANSFERRED, and is FALSE for every visit after 2025-09-30 (the cutover).
  The governed "attended visit" is ``visit_state IN ('ARRIVED', 'DISCHARGED', 'TRANSFERRED')``.
- Look-alike district code: ``legacy_zone`` (clinics and visits) is the pre-merger zone code;
  Riverside clinics opened before 2024-01-01 still carry ``MID``. The governed district of a
  visit is ``visits.district`` (the clinic's); a patient's ``home_district`` is where they live,
  and one visit in five happens in another district.
- Units: ``visits.fee_cents`` and ``daily_visit_summary.fee_cents_total`` are euro cents;
  ``claims.claimed_eur`` is euros (DECIMAL(10, 2)).
- Identifiers: claims key on the insurer's member number; the patient id reaches them only
  through ``member_crosswalk``; uninsured patients have no member number.
- Time: future bookings (state BOOKED, visit_date after the clock) sit beside past visits; an
  APPEALED claim has a ``decided_at`` (its first decision) yet is open; fiscal years start in
  July and are named by the year they end in (FY2026 = 2025-07-01 .. 2026-06-30).
- Policy: district leads see their own district's rows only (claims through a subquery over the
  crosswalk and patients); the front desk sees contact details masked and a few tools only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

from warehouse2.cases import CASES_FILE, USERS, build_second_cases, second_specs, write_second_cases
from warehouse2.generate import CLOCK, PRIMARY_KEYS, SCHEMA, TABLES, generate, write_duckdb

__all__ = [
    "CASES_FILE", "CLOCK", "DEFAULT_PG_SCHEMA", "TABLES", "USERS", "WAREHOUSE_FILE",
    "build_second", "build_second_cases", "copy_second_to_postgres", "project_text",
    "second_specs", "write_second_cases",
]

WAREHOUSE_FILE = "warehouse.duckdb"
DEFAULT_PG_SCHEMA = "tether_clinics"
TEMPLATE = Path(__file__).with_name("tether.yaml")


def project_text(source_url: str, schema: str | None = None) -> str:
    """This warehouse's tether.yaml, pointing at ``source_url`` (and ``schema`` there)."""
    text = TEMPLATE.read_text(encoding="utf-8").replace("__SOURCE_URL__", source_url)
    return text.replace("__SOURCE_SCHEMA__", f", schema: {schema}" if schema else "")


def build_second(
    target: Path,
    *,
    scale: float = 1.0,
    seed: int = 11,
    source_url: str | None = None,
    schema: str | None = None,
    cases: bool = True,
) -> Path:
    """Generate the clinic warehouse into ``target/warehouse.duckdb`` (or, with ``source_url``,
    into PostgreSQL schema ``schema`` there, replacing its tables), write ``target/tether.yaml``
    pointing at it and, with ``cases``, ``target/cases.jsonl``. Returns ``target``."""
    if scale <= 0:
        raise ValueError(f"scale must be positive (got {scale})")
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / f".{WAREHOUSE_FILE}.building"
    tmp.unlink(missing_ok=True)
    try:
        write_duckdb(tmp, generate(scale, seed))
        if source_url is None:
            os.replace(tmp, target / WAREHOUSE_FILE)
            text = project_text(f"duckdb:///{WAREHOUSE_FILE}")
        else:
            schema = schema or DEFAULT_PG_SCHEMA
            copy_second_to_postgres(tmp, source_url, schema)
            text = project_text(source_url, schema)
    finally:
        tmp.unlink(missing_ok=True)
    (target / "tether.yaml").write_text(text, encoding="utf-8")
    if cases:
        write_second_cases(target)
    return target


_PG_TYPES = {"VARCHAR": "text", "TIMESTAMPTZ": "timestamptz", "TIMESTAMP WITH TIME ZONE":
             "timestamptz", "BIGINT": "bigint", "INTEGER": "integer", "BOOLEAN": "boolean",
             "DATE": "date"}


def _pg_type(duck: str) -> str:
    if duck.startswith("DECIMAL"):
        return "numeric" + duck[len("DECIMAL"):].replace(" ", "")
    return _PG_TYPES[duck]


def _libpq(url: str) -> str:
    return re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", url)


def copy_second_to_postgres(db: Path, url: str, schema: str) -> None:
    """Copy every table of the DuckDB file ``db`` into PostgreSQL schema ``schema`` (created if
    missing; the tables are replaced), with the same types, NOT NULLs and primary keys."""
    import psycopg
    from psycopg import sql

    src = duckdb.connect(str(db), read_only=True)
    try:
        with psycopg.connect(_libpq(url)) as pg:
            pg.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            for table in TABLES:
                ident = sql.Identifier(schema, table)
                cols = SCHEMA[table]
                defs = [sql.SQL("{} {}{}").format(sql.Identifier(c), sql.SQL(_pg_type(t)),
                                                  sql.SQL("" if nullable else " NOT NULL"))
                        for c, t, nullable in cols]
                if table in PRIMARY_KEYS:
                    defs.append(sql.SQL("PRIMARY KEY ({})").format(
                        sql.SQL(", ").join(sql.Identifier(k) for k in PRIMARY_KEYS[table])))
                pg.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(ident))
                pg.execute(sql.SQL("CREATE TABLE {} ({})").format(ident, sql.SQL(", ").join(defs)))
                names = sql.SQL(", ").join(sql.Identifier(c) for c, _, _ in cols)
                cur = src.execute(f'SELECT * FROM "{table}" ORDER BY ALL')
                with pg.cursor() as pcur, pcur.copy(
                        sql.SQL("COPY {} ({}) FROM STDIN").format(ident, names)) as copy:
                    while batch := cur.fetchmany(10_000):
                        for row in batch:
                            copy.write_row(row)
                pg.execute(sql.SQL("ANALYZE {}").format(ident))
    finally:
        src.close()
