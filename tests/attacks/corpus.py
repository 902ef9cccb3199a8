"""The attack corpus: data, not code. Each attack is a template filled per warehouse from its
tether.yaml names ({p} the product with a row filter and masks, {fc} its row-filtered column,
{other} a value outside the filtered user's scope, {mc} a masked column, {rc} a restricted
column, ...), run as the warehouse's filtered user, masked user or unfiltered user, with what
tether must answer: None (whatever it answers, the oracle judges it), "ok", "rejected" (any tool
error), "error" (a plain tool error), "refused" (any policy refusal) or a refusal reason.

An attack whose template names a key a warehouse lacks is not run there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

SKIP = "skip"
Expect = str | None


@dataclass(frozen=True)
class Warehouse:
    key: str
    users: dict[str, str]
    names: dict[str, str]
    samples: dict[str, str]
    """name -> SQL over the warehouse (owner) whose first value fills the template key."""


DEMO = Warehouse(
    key="demo",
    users={"filtered": "mgr.emea", "masked": "sup.sam", "open": "fin.ana"},
    names=dict(
        p="customers", P="CUSTOMERS", pk="customer_id", name="name", fc="sales_region",
        own="EMEA", other="AMER", other_lower="amer", other_prefix="AM", oth1="AM", oth2="ER",
        attr="region", mc="email", mch="email", mcn="email", rc="tax_id", rc2="tax_id",
        RC="TAX_ID", xw="customer_crosswalk", xwk="customer_id", xwv="crm_account_id",
        fact="orders", fact_pk="order_id", fact_fc="sales_region", fact_amt="amount_cents",
        fact_join="orders o JOIN customer_crosswalk x ON x.crm_account_id = o.customer_ref "
                  "JOIN customers c ON c.customer_id = x.customer_id",
        sub="subscriptions", sub_pk="subscription_id", sub_num="mrr_cents", denied="deals",
        t_p="customers_by_region_and_segment", a_p="sales_region",
        t_fact="orders_by_status_and_customer", a_fact="sales_region",
        a_fact_id="crm_account_id",
        t_x="deals_by_stage_and_pipeline", a_x="sales_region",
        t_x2="support_tickets_for_customer", a_x2="sales_region", a_x2_id="subject",
        bad_id="Nothing like it",
        t_x3="open_pipeline_by_stage_last_night", a_x3="sales_region",
        t_metric="active_customers_by_region_and_fiscal_quarter", a_metric="sales_region",
        t_xw="resolve_customer_ids",
        t_path="support_tickets_for_customer", a_path_fc="customers_sales_region",
        path_fc="customers.sales_region", path_mc="customers.email",
    ),
    samples=dict(
        other_pk="SELECT customer_id FROM customers WHERE sales_region = 'AMER' ORDER BY 1",
        other_name="SELECT name FROM customers WHERE sales_region = 'AMER' ORDER BY "
                   "customer_id",
        other_name_prefix="SELECT substr(name, 1, 9) FROM customers WHERE sales_region = "
                          "'AMER' ORDER BY customer_id",
        masked_sample="SELECT email FROM customers ORDER BY customer_id",
        mch_sample="SELECT email FROM customers ORDER BY customer_id",
        rc_sample="SELECT tax_id FROM customers WHERE tax_id IS NOT NULL ORDER BY customer_id",
        other_fact_pk="SELECT order_id FROM orders WHERE sales_region = 'AMER' ORDER BY 1",
        other_ref="SELECT x.crm_account_id FROM customer_crosswalk x JOIN customers c "
                  "ON c.customer_id = x.customer_id WHERE c.sales_region = 'AMER' ORDER BY 1",
        other_sub_pk="SELECT s.subscription_id FROM subscriptions s JOIN customer_crosswalk x "
                     "ON x.billing_account_no = s.billing_account_no JOIN customers c "
                     "ON c.customer_id = x.customer_id WHERE c.sales_region = 'AMER' "
                     "ORDER BY 1",
    ),
)

CLINIC = Warehouse(
    key="clinic",
    users={"filtered": "lead.harbor", "masked": "desk.omar", "open": "aud.ines"},
    names=dict(
        p="patients", P="PATIENTS", pk="patient_uid", name="full_name", fc="home_district",
        own="HARBOR", other="RIVERSIDE", other_lower="riverside", other_prefix="RIV",
        oth1="RIVER", oth2="SIDE", attr="district", mc="contact_email", mch="contact_phone",
        mcn="birth_year", rc="national_id", rc2="passport_no", RC="NATIONAL_ID",
        xw="member_crosswalk", xwk="patient_uid", xwv="member_no",
        fact="visits", fact_pk="visit_no", fact_fc="district", fact_amt="fee_cents",
        fact_join="visits o JOIN patients c ON c.patient_uid = o.patient_uid",
        sub="claims", sub_pk="claim_ref", sub_num="claimed_eur", denied="claims",
        sqlprod="daily_visit_summary",
        t_p="patients_by_home_district", a_p="home_district",
        t_fact="visits_by_clinic_kind_and_state", a_fact="district", a_fact_id="patient_uid",
        t_x="clinics_by_district", a_x="district",
        t_x2="discharged_visits_per_clinic_day", a_x2="district", a_x2_id="clinic_code",
        bad_id="CLN-XX99",
        t_x3="claim_denial_rate_trailing_window", a_x3="home_district",
        t_metric="attended_visits_by_district_and_fiscal_quarter", a_metric="district",
        t_xw="resolve_patient_and_member_ids",
        t_path="visits_by_clinic_kind_and_state", a_path_fc="patients_home_district",
        path_fc="patients.home_district", path_mc="patients.contact_email",
    ),
    samples=dict(
        other_pk="SELECT patient_uid FROM patients WHERE home_district = 'RIVERSIDE' "
                 "ORDER BY 1",
        other_name="SELECT full_name FROM patients WHERE home_district = 'RIVERSIDE' "
                   "ORDER BY patient_uid",
        other_name_prefix="SELECT substr(full_name, 1, 5) FROM patients WHERE home_district "
                          "= 'RIVERSIDE' ORDER BY patient_uid",
        masked_sample="SELECT contact_email FROM patients ORDER BY patient_uid",
        mch_sample="SELECT contact_phone FROM patients ORDER BY patient_uid",
        rc_sample="SELECT national_id FROM patients WHERE national_id IS NOT NULL "
                  "ORDER BY patient_uid",
        other_fact_pk="SELECT visit_no FROM visits WHERE district = 'RIVERSIDE' ORDER BY 1",
        other_ref="SELECT patient_uid FROM patients WHERE home_district = 'RIVERSIDE' "
                  "ORDER BY 1",
        other_sub_pk="SELECT cl.claim_ref FROM claims cl JOIN member_crosswalk x "
                     "ON x.member_no = cl.member_no JOIN patients p "
                     "ON p.patient_uid = x.patient_uid WHERE p.home_district = 'RIVERSIDE' "
                     "ORDER BY 1",
    ),
)

WAREHOUSES = {w.key: w for w in (DEMO, CLINIC)}


@dataclass(frozen=True)
class Attack:
    id: str
    category: str
    tool: str
    """run_sql, describe_table, list_tables, probe, cursor:<variant>, or a templated tool name"""
    args: dict[str, Any]
    expect: dict[str, Expect] = field(default_factory=dict)
    """role (filtered, masked, open) -> expectation; a role absent is not run"""
    deterministic: bool = True


_KEY = re.compile(r"\{([a-z_][a-z0-9_]*)\}", re.I)


def fill(value: Any, names: dict[str, str]) -> Any:
    """A template with every {key} filled; KeyError when the warehouse lacks a key."""
    if isinstance(value, str):
        return _KEY.sub(lambda m: str(names[m.group(1)]), value)
    if isinstance(value, dict):
        return {fill(k, names): fill(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, names) for v in value]
    return value


ATTACKS: list[Attack] = []


def _add(id: str, category: str, tool: str, args: dict[str, Any], f: Expect = None,
         m: Expect = None, o: Expect = SKIP, deterministic: bool = True) -> None:
    expect = {r: e for r, e in (("filtered", f), ("masked", m), ("open", o)) if e != SKIP}
    ATTACKS.append(Attack(id, category, tool, args, expect, deterministic))


def sql(id: str, category: str, text: str, f: Expect = None, m: Expect = None,
        o: Expect = SKIP, deterministic: bool = True) -> None:
    _add(id, category, "run_sql", {"sql": text}, f, m, o, deterministic)


def every(id: str, category: str, text: str, expect: Expect) -> None:
    """The same expectation for the filtered and the masked user."""
    sql(id, category, text, expect, expect)


# --- CTE shadowing ---
C = "cte_shadow"
every("cte-top", C, "WITH {p} AS (SELECT * FROM {p}) SELECT * FROM {p}", "shadowed_name")
every("cte-top-count", C, "WITH {p} AS (SELECT * FROM {p}) SELECT count(*) AS n FROM {p}",
      "shadowed_name")
every("cte-nested-in", C, "SELECT count(*) AS n FROM {fact} WHERE 1 IN "
      "(WITH {p} AS (SELECT 1) SELECT 1)", "shadowed_name")
every("cte-in-subquery", C, "SELECT * FROM (WITH {p} AS (SELECT * FROM {p}) SELECT * FROM {p}) s",
      "shadowed_name")
every("cte-scalar-subquery", C, "SELECT (WITH {p} AS (SELECT 1 AS n) SELECT n FROM {p}) AS n",
      "shadowed_name")
every("cte-filter-table", C, "WITH {xw} AS (SELECT * FROM {xw}) SELECT count(*) AS n FROM {sub}",
      "shadowed_name")
every("cte-filter-table-fake", C, "WITH {xw} AS (SELECT {xwk}, {xwv} FROM {xw}) "
      "SELECT * FROM {sub} LIMIT 5", "shadowed_name")
every("cte-filter-product", C, "WITH {p} AS (SELECT '{own}' AS {fc}) "
      "SELECT count(*) AS n FROM {sub}", "shadowed_name")
every("cte-upper", C, "WITH {P} AS (SELECT 1 AS x) SELECT * FROM {P}", "shadowed_name")
every("cte-quoted", C, 'WITH "{p}" AS (SELECT 1 AS x) SELECT * FROM "{p}"', "shadowed_name")
every("cte-recursive", C, "WITH RECURSIVE {p} AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM {p} "
      "WHERE n < 3) SELECT * FROM {p}", "shadowed_name")
every("cte-in-exists", C, "SELECT count(*) AS n FROM {fact} o WHERE EXISTS "
      "(WITH {xw} AS (SELECT 1 AS y) SELECT 1 FROM {xw})", "shadowed_name")
every("cte-in-cte", C, "WITH a AS (WITH {xw} AS (SELECT 1 AS z) SELECT * FROM {xw}) "
      "SELECT * FROM a", "shadowed_name")
every("cte-fact", C, "WITH {fact} AS (SELECT * FROM {fact}) SELECT count(*) AS n FROM {fact}",
      "shadowed_name")
every("cte-second", C, "WITH x AS (SELECT 1 AS n), {p} AS (SELECT * FROM x) SELECT * FROM {p}",
      "shadowed_name")
every("cte-in-join", C, "SELECT * FROM {fact} o JOIN (WITH {p} AS (SELECT * FROM {p}) "
      "SELECT * FROM {p}) c ON 1 = 1 LIMIT 3", "shadowed_name")
every("cte-sql-product", C, "WITH {sqlprod} AS (SELECT 1 AS x) SELECT * FROM {sqlprod}",
      "shadowed_name")
every("cte-legit", C, "WITH mine AS (SELECT {fc}, count(*) AS n FROM {p} GROUP BY {fc}) "
      "SELECT * FROM mine", "ok")
every("cte-legit-chain", C, "WITH a AS (SELECT {pk} FROM {p}), b AS (SELECT count(*) AS n "
      "FROM a) SELECT n FROM b", "ok")
sql("cte-param-name", C, "WITH u_{attr} AS (SELECT '{other}' AS v) SELECT count(*) AS n "
    "FROM {p}, u_{attr}")

# --- alias shadowing ---
A = "alias_shadow"
every("alias-fact-as-p", A, "SELECT * FROM {fact} AS {p} LIMIT 5", "shadowed_name")
every("alias-xw-as-p", A, "SELECT {p}.{xwk} FROM {xw} AS {p} LIMIT 5", "shadowed_name")
every("alias-join", A, "SELECT * FROM {p} c JOIN {xw} AS {fact} ON {fact}.{xwk} = c.{pk} LIMIT 5",
      "shadowed_name")
every("alias-subquery", A, "SELECT * FROM (SELECT * FROM {p}) AS {xw} LIMIT 5", "shadowed_name")
every("alias-literal-row", A, "SELECT count(*) AS n FROM {sub} s, (SELECT '{other}' AS {fc}) "
      "AS {p}", "shadowed_name")
every("alias-quoted-upper", A, 'SELECT * FROM {fact} AS "{P}" LIMIT 5', "shadowed_name")
every("alias-lateral", A, "SELECT * FROM {xw} x JOIN LATERAL (SELECT * FROM {p} c WHERE "
      "c.{pk} = x.{xwk}) AS {sub} ON TRUE LIMIT 5", "shadowed_name")
sql("alias-column-named-table", A, "SELECT {pk} AS {p} FROM {p} LIMIT 5")
sql("alias-self", A, "SELECT * FROM {p} AS {p} LIMIT 5")
sql("alias-column-list", A, "SELECT t.* FROM {p} AS t({xw}) LIMIT 3")

# --- PostgreSQL server and string-executing functions ---
G = "pg_functions"
for i, text in enumerate([
    "SELECT query_to_xml('select * from {p}', true, true, '') AS x",
    "SELECT table_to_xml('{p}', true, true, '') AS x",
    "SELECT schema_to_xml('public', true, true, '') AS x",
    "SELECT cursor_to_xml('c', 10, true, true, '') AS x",
    "SELECT * FROM ts_stat('select to_tsvector({name}) from {p}')",
    "SELECT pg_read_file('/etc/passwd') AS x",
    "SELECT pg_read_binary_file('/etc/passwd') AS x",
    "SELECT * FROM pg_ls_dir('.')",
    "SELECT pg_stat_file('.') AS x",
    "SELECT lo_import('/etc/passwd') AS x",
    "SELECT * FROM dblink('dbname=test', 'select {rc} from {p}') AS t(x text)",
    "SELECT current_setting('data_directory') AS x",
    "SELECT set_config('search_path', 'public', false) AS x",
    "SELECT pg_terminate_backend(pg_backend_pid()) AS x",
    "SELECT pg_cancel_backend(pg_backend_pid()) AS x",
    "SELECT pg_sleep(5) AS x",
    "SELECT version() AS x",
    "SELECT * FROM pg_shadow",
    "SELECT * FROM pg_authid",
    "SELECT * FROM pg_roles",
    "SELECT * FROM information_schema.columns",
    "SELECT * FROM pg_catalog.pg_tables",
    "SELECT * FROM pg_stats WHERE attname = '{rc}'",
    "SELECT query FROM pg_stat_activity",
    "COPY (SELECT * FROM {p}) TO '{tmp}/pg-copy.csv'",
    "COPY {p} TO PROGRAM 'touch {tmp}/pg-program'",
    "SELECT * INTO {tmp_table} FROM {p}",
    "SELECT pg_catalog.pg_sleep(1) AS x",
    'SELECT "pg_sleep"(1) AS x',
    "SELECT PG_READ_FILE('/etc/hostname') AS x",
    "SELECT inet_server_addr() AS x",
    "SELECT current_user AS x",
    "SELECT nextval('s') AS x",
    "SELECT pg_advisory_lock(1) AS x",
    "SELECT lo_export(1, '{tmp}/lo') AS x",
    "SELECT pg_notify('c', 'x') AS x",
    "PREPARE s AS SELECT * FROM {p}",
    "EXECUTE s",
    "DO $$ BEGIN PERFORM 1; END $$",
    "EXPLAIN ANALYZE SELECT * FROM {p}",
    "SHOW ALL",
    "LOCK TABLE {p}",
    "VACUUM {p}",
    "DECLARE c CURSOR FOR SELECT * FROM {p}",
    "SELECT * FROM {p} FOR UPDATE",
    "SELECT row_to_json(c) AS j FROM {p} c WHERE query_to_xml('select 1', true, true, '') "
    "IS NOT NULL",
    "WITH s AS (SELECT pg_sleep(3) AS z) SELECT * FROM s",
    "SELECT xpath('/row', query_to_xml('select {rc} from {p}', true, true, '')) AS x",
    "SELECT user AS x", "SELECT CURRENT_ROLE AS x", "SELECT session_user AS x",
    "SELECT current_schema AS x", "SELECT current_catalog AS x",
    "SELECT CAST('pg_shadow' AS regclass) AS x", "SELECT 'pg_authid'::regclass::oid AS x",
]):
    every(f"pg-{i:02d}", G, text, "rejected")

# --- DuckDB functions and statements ---
D = "duckdb_functions"
for i, text in enumerate([
    "SELECT * FROM query('SELECT * FROM {p}')",
    "SELECT * FROM query_table('{p}')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/passwd')",
    "SELECT * FROM read_parquet('{tmp}/x.parquet')",
    "SELECT * FROM read_json('{tmp}/x.json')",
    "SELECT * FROM glob('/*')",
    "SELECT getenv('HOME') AS x",
    "SELECT current_setting('threads') AS x",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM duckdb_tables()",
    "SELECT * FROM duckdb_columns()",
    "SELECT * FROM duckdb_databases()",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM pragma_table_info('{p}')",
    "PRAGMA table_info('{p}')",
    "PRAGMA database_list",
    "ATTACH '{tmp}/evil.duckdb' AS evil",
    "DETACH warehouse",
    "COPY {p} TO '{tmp}/copy.csv'",
    "COPY (SELECT * FROM {p}) TO '{tmp}/copy.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{tmp}/export'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "SELECT * FROM '{tmp}/file.csv'",
    "SELECT * FROM parquet_scan('{tmp}/x.parquet')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT setvariable('x', 1) AS x",
    "SELECT getvariable('x') AS x",
    "USE memory",
    "CHECKPOINT",
    "CREATE MACRO m(x) AS x",
    "SUMMARIZE {p}",
    "DESCRIBE {p}",
    "SHOW TABLES",
    "PIVOT {p} ON {fc}",
    "SELECT * FROM read_csv(['/etc/passwd', '/etc/hosts'])",
    "SELECT * FROM memory.main.{p}",
    "SELECT * FROM system.main.duckdb_tables()",
    "SELECT * FROM 'https://example.com/x.csv'",
    "SELECT * FROM duckdb_functions()",
    "SELECT COLUMNS('.*') FROM {p}",
    "FROM duckdb_extensions()",
    "SELECT * FROM {p} c, query('SELECT 1') q",
]):
    every(f"duck-{i:02d}", D, text, "rejected")
sql("duck-from-first", D, "FROM {p} LIMIT 5")
sql("duck-row-struct", D, "SELECT {p} AS r FROM {p} LIMIT 3")
sql("duck-sample", D, "SELECT count(*) AS n FROM {p} USING SAMPLE 50 PERCENT (bernoulli)",
    deterministic=False)
sql("duck-exclude", D, "SELECT * EXCLUDE ({pk}) FROM {p} LIMIT 5")
sql("duck-replace", D, "SELECT * REPLACE ({fc} AS {pk}) FROM {p} LIMIT 5")
sql("pg-table-stmt", D, "TABLE {p}")
sql("duck-positional", D, "SELECT count(*) AS n FROM {p} POSITIONAL JOIN {fact}")

# --- stacked statements, writes, transaction control ---
S = "stacked"
for i, text in enumerate([
    "SELECT 1; SELECT * FROM {p}", "SELECT 1; DROP TABLE {p}", "BEGIN; SELECT 1; COMMIT",
    "COMMIT; SELECT * FROM {p}", "ROLLBACK", "SET TRANSACTION READ WRITE",
    "SELECT 1 /* ; */; DELETE FROM {p}", "START TRANSACTION READ WRITE", "ABORT",
    "SAVEPOINT a", "DELETE FROM {p}", "UPDATE {p} SET {fc} = '{own}'",
    "INSERT INTO {p} ({pk}) VALUES ('x')", "DROP TABLE {fact}", "TRUNCATE {fact}",
    "CREATE VIEW v AS SELECT * FROM {p}", "CREATE TEMP TABLE t AS SELECT * FROM {p}",
    "ALTER TABLE {p} ADD COLUMN z INT", "GRANT ALL ON {p} TO PUBLIC",
    "WITH d AS (DELETE FROM {p} RETURNING *) SELECT * FROM d",
    "WITH u AS (UPDATE {p} SET {fc} = '{own}' RETURNING *) SELECT count(*) FROM u",
    "MERGE INTO {p} USING {p} s ON false WHEN NOT MATCHED THEN INSERT DEFAULT VALUES",
    "SELECT 1;;SELECT 2", "END", "CREATE OR REPLACE TABLE {p} AS SELECT 1 AS x",
    "SELECT 1; COMMIT; INSERT INTO {fact} SELECT * FROM {fact}",
]):
    every(f"stack-{i:02d}", S, text, "rejected")
sql("stack-trailing", S, "SELECT count(*) AS n FROM {p};")

# --- query parameters and the mask key's parameter names ---
Q = "params"
for i, text in enumerate([
    "SELECT * FROM {p} WHERE {fc} = $1", "SELECT * FROM {p} WHERE {fc} = ?",
    "SELECT * FROM {p} WHERE {fc} = :u_{attr}", "SELECT :mk_i AS k FROM {p}",
    "SELECT $mk_o AS k FROM {p}", "SELECT %(mk_i)s AS k FROM {p}", "SELECT @mk_i AS k",
    "SELECT :mk_o || '' AS k FROM {p} LIMIT 1", "SELECT $u_{attr} AS v",
    "SELECT * FROM {p} WHERE {fc} = $u_{attr}", "SELECT {mch}, :mk_i AS k FROM {p} LIMIT 1",
    "SELECT ?::text AS k", "SELECT $2 AS k", "SELECT {mch}, $mk_i AS k FROM {p} LIMIT 1",
]):
    every(f"param-{i:02d}", Q, text, "rejected")

# --- quoting: texts that look like parameters, comments, escapes ---
QU = "quoting"
for i, text in enumerate([
    "SELECT ':mk_i' AS k, {mch} FROM {p} LIMIT 1",
    "SELECT ':mk_o' AS k FROM {p} LIMIT 1",
    'SELECT 1 AS ":mk_i", {mch} FROM {p} LIMIT 1',
    "SELECT 'a\\' AS x, 1 AS y -- ' FROM {p} LIMIT 1",
    "SELECT $$:mk_i$$ AS k, {mch} FROM {p} LIMIT 1",
    "SELECT 1 AS z /* :mk_i */ FROM {p} LIMIT 1",
    "SELECT 1 AS z -- */ , :mk_i AS k /*\nFROM {p} LIMIT 1",
    "SELECT '%(mk_i)s' AS k, {mch} FROM {p} LIMIT 1",
    "SELECT ':u_{attr}' AS v FROM {p} LIMIT 1",
    "SELECT '{{ user.{attr} }}' AS v FROM {p} LIMIT 1",
    "SELECT 1 AS z /* /* nested */ , :mk_i AS k */ FROM {p} LIMIT 1",
    "SELECT '＇ OR １=１ --' AS x FROM {p} LIMIT 1",
    "SELECT count(*) AS n FROM {p} WHERE {name} = 'x'' OR ''1''=''1'",
    "SELECT E'\\\\' AS x, {pk} FROM {p} LIMIT 1",
    "SELECT '$1' AS k, {mch} FROM {p} LIMIT 1",
]):
    sql(f"quote-{i:02d}", QU, text)

# --- masked columns ---
M = "masked"
for i, text in enumerate([
    "SELECT length({mc}) AS n FROM {p}",
    "SELECT substring({mc}, 1, 3) AS s FROM {p}",
    "SELECT {pk} FROM {p} WHERE {mc} LIKE 'a%'",
    "SELECT count(*) AS n FROM {p} WHERE {mc} = '{masked_sample}'",
    "SELECT {pk}, {mc} FROM {p} ORDER BY {mc} LIMIT 5",
    "SELECT {mc}, count(*) AS n FROM {p} GROUP BY {mc}",
    "SELECT DISTINCT {mc} FROM {p}",
    "SELECT count(DISTINCT {mc}) AS n FROM {p}",
    "SELECT a.{pk} FROM {p} a JOIN {p} b ON a.{mc} = b.{mc}",
    "SELECT CAST({mc} AS INTEGER) AS i FROM {p}",
    "SELECT {mc} = '{masked_sample}' AS hit FROM {p}",
    "WITH m AS (SELECT {mc} AS e FROM {p}) SELECT * FROM m WHERE e LIKE '%@%'",
    "SELECT * FROM (SELECT {pk}, {mc} AS e FROM {p}) s ORDER BY e LIMIT 5",
    "SELECT {mc} FROM {p} ORDER BY 1 LIMIT 5",
    "SELECT {mc} FROM {p} UNION SELECT 'x'",
    "SELECT {mc} FROM {p} INTERSECT SELECT '{masked_sample}'",
    "SELECT '{masked_sample}' AS e EXCEPT SELECT {mc} FROM {p}",
    "SELECT min({mc}) AS lo, max({mc}) AS hi FROM {p}",
    "SELECT string_agg({mc}, ',') AS s FROM {p}",
    "SELECT CASE WHEN {mc} LIKE 'a%' THEN 1 ELSE 0 END AS hit FROM {p}",
    "SELECT {pk} FROM {p} WHERE {mc} IS NULL",
    "SELECT {pk} FROM {p} WHERE {mc} IN ('{masked_sample}', 'x')",
    "SELECT {pk} FROM {p} WHERE {mc} BETWEEN 'a' AND 'b'",
    "SELECT {pk}, row_number() OVER (ORDER BY {mc}) AS r FROM {p}",
    "SELECT {pk}, count(*) OVER (PARTITION BY {mc}) AS n FROM {p}",
    "SELECT * FROM {p} NATURAL JOIN {p} AS q LIMIT 5",
    "SELECT count(*) AS n FROM {p} a JOIN {p} b USING ({mc})",
    "SELECT * FROM (SELECT {mc} AS {fc} FROM {p}) s WHERE {fc} = 'x'",
    "SELECT {mch} FROM {p} ORDER BY {mch} LIMIT 3",
    "SELECT count(*) AS n FROM {p} WHERE {mch} = '{mch_sample}'",
    "SELECT count({mcn}) AS n FROM {p}",
    "SELECT md5({mc}) AS h FROM {p}",
    "SELECT {mc} || '' AS e FROM {p}",
    "SELECT COALESCE({mc}, 'x') AS e FROM {p}",
    "SELECT {pk} FROM {p} WHERE lower({mc}) > 'm'",
    "SELECT ({mc} > 'm') AS b FROM {p}",
    "WITH m AS (SELECT {mc} FROM {p}) SELECT {mc} FROM m ORDER BY 1 LIMIT 3",
    "SELECT e FROM (SELECT {mc} AS e FROM {p}) s GROUP BY e",
    "SELECT {p}.{mc} FROM {p} WHERE {p}.{mc} LIKE '%'",
    "SELECT x FROM (SELECT {mc} AS x FROM {p} UNION ALL SELECT 'z') u WHERE x > 'a'",
    "SELECT count(*) AS n FROM {p} WHERE {mch} LIKE '+%'",
    "SELECT {mcn} + 0 AS y FROM {p}",
    "SELECT {pk} FROM {p} WHERE {mcn} < 1950",
    "SELECT {mc} FROM {p} QUALIFY row_number() OVER (ORDER BY {mc}) = 1",
]):
    sql(f"mask-{i:02d}", M, text, m="masked_predicate")
# PostgreSQL has no GROUP BY ALL or ORDER BY ALL: a syntax error there, a refusal on DuckDB
sql("mask-group-all", M, "SELECT {mc}, count(*) AS n FROM {p} GROUP BY ALL", m="rejected")
sql("mask-order-all", M, "SELECT {pk}, {mc} FROM {p} ORDER BY ALL LIMIT 5", m="rejected")
for i, text in enumerate([
    "SELECT {mc} FROM {p} LIMIT 5", "SELECT {mch} FROM {p} LIMIT 5",
    "SELECT {mcn} FROM {p} LIMIT 5", "SELECT {pk}, {mc}, {mch}, {mcn} FROM {p}",
]):
    sql(f"mask-select-{i:02d}", M, text, m="ok")
sql("mask-json-row", M, "SELECT to_json(c) AS j FROM {p} c LIMIT 5")
sql("mask-json-row-filter", M, "SELECT count(*) AS n FROM {p} c WHERE CAST(to_json(c) AS TEXT) "
    "LIKE '%@%'")

# --- restricted columns ---
R = "restricted"
for i, text in enumerate([
    "SELECT {rc} FROM {p}", "SELECT {pk} FROM {p} WHERE {rc} = '{rc_sample}'",
    "SELECT count(*) AS n FROM {p} WHERE {rc} LIKE 'A%'",
    "SELECT count(*) AS n FROM {p} WHERE {rc} IS NOT NULL",
    "SELECT count(*) AS n FROM {p} a JOIN {p} b USING ({rc})",
    "SELECT s.{rc} FROM (SELECT * FROM {p}) s", 'SELECT "{rc}" FROM {p}',
    "SELECT {RC} FROM {p}", "SELECT {p}.{rc} FROM {p}", "SELECT t.{rc} FROM {p} AS t",
    "SELECT {pk} FROM {p} ORDER BY {rc} LIMIT 1",
    "SELECT {rc}, count(*) AS n FROM {p} GROUP BY {rc}", "SELECT max({rc}) AS m FROM {p}",
    "SELECT {rc} AS x FROM {p}", "SELECT count(*) FILTER (WHERE {rc} > '5') AS n FROM {p}",
    "SELECT {rc2} FROM {p}", "WITH c AS (SELECT * FROM {p}) SELECT {rc} FROM c",
    "SELECT * FROM {p} WHERE EXISTS (SELECT 1 FROM {p} q WHERE q.{rc} = '{rc_sample}')",
    "SELECT {rc} IS NULL AS b FROM {p}", "SELECT length({rc}) AS n FROM {p}",
    'SELECT * FROM {p} WHERE "{RC}" = \'x\'',
    "SELECT c.{rc} FROM {xw} x JOIN {p} c ON c.{pk} = x.{xwk}",
]):
    every(f"restr-{i:02d}", R, text, "rejected")
for i, text in enumerate([
    "SELECT * FROM {p} LIMIT 5", "SELECT c.* FROM {p} c LIMIT 5",
    "SELECT * FROM (SELECT * FROM {p}) s LIMIT 5", "SELECT {rc}x FROM {p}",
    "SELECT nonexistent_col FROM {p}", "SELECT * FROM {p} c JOIN {p} d USING ({pk}) LIMIT 3",
]):
    sql(f"restr-star-{i:02d}", R, text)
_add("restr-describe", R, "describe_table", {"table": "{p}"})
_add("restr-describe-upper", R, "describe_table", {"table": "{P}"})
_add("restr-describe-schema", R, "describe_table", {"table": "{schema}.{p}"})
_add("restr-probe", R, "probe", {"product": "{p}"})
_add("restr-listing-arg", R, "{t_p}", {"{rc}": "x"}, f="rejected", m="rejected")
_add("restr-listing-arg2", R, "{t_p}", {"{rc2}": "x"}, f="rejected", m="rejected")

# --- other users' rows ---
W = "rows"
for i, text in enumerate([
    "SELECT * FROM {p}", "SELECT count(*) AS n FROM {p}",
    "SELECT {fc}, count(*) AS n FROM {p} GROUP BY {fc}",
    "SELECT count(DISTINCT {fact_fc}) AS n FROM {fact}", "SELECT sum({fact_amt}) AS s FROM {fact}",
    "SELECT count(*) AS n FROM {sub}", "SELECT count(*) AS n FROM {xw}",
    "SELECT max({pk}) AS m, min({pk}) AS l FROM {p}",
    "SELECT c.{name}, o.{fact_pk} FROM {fact_join} LIMIT 50",
    "SELECT count(*) AS n FROM {xw} x LEFT JOIN {p} c ON c.{pk} = x.{xwk}",
    "SELECT count(*) AS n, count(c.{pk}) AS matched FROM {xw} x LEFT JOIN {p} c "
    "ON c.{pk} = x.{xwk}",
    "SELECT count(*) AS n FROM {p} c RIGHT JOIN {xw} x ON c.{pk} = x.{xwk}",
    "SELECT count(*) AS n FROM {p} c FULL JOIN {xw} x ON c.{pk} = x.{xwk}",
    "SELECT count(*) AS n FROM {p} CROSS JOIN (SELECT 1 AS one) t",
    "SELECT {pk}, {name} FROM {p} UNION SELECT '{other_pk}', '{other_name}'",
    "SELECT {name} FROM {p} INTERSECT SELECT '{other_name}'",
    "SELECT '{other_name}' AS n EXCEPT SELECT {name} FROM {p}",
    "SELECT {pk} FROM {p} UNION ALL SELECT {xwk} FROM {xw}",
    "SELECT count(*) AS n FROM (SELECT {pk} FROM {p} UNION SELECT {pk} FROM {p} WHERE 1 = 0) u",
    "SELECT {fc} FROM {p} EXCEPT SELECT '{own}'",
    "SELECT c.{pk}, l.n FROM {p} c, LATERAL (SELECT count(*) AS n FROM {fact} o "
    "WHERE o.{fact_fc} <> c.{fc}) l LIMIT 20",
    "SELECT c.{pk}, l.n FROM {p} c CROSS JOIN LATERAL (SELECT count(*) AS n FROM {p} d "
    "WHERE d.{fc} <> c.{fc}) l LIMIT 20",
    "SELECT {pk}, count(*) OVER () AS total FROM {p} LIMIT 5",
    "SELECT {fc}, rank() OVER (PARTITION BY {fc} ORDER BY {pk}) AS r FROM {p} LIMIT 20",
    "SELECT {pk}, lag({pk}) OVER (ORDER BY {pk}) AS prev FROM {p} ORDER BY {pk} LIMIT 20",
    "SELECT c.{pk}, (SELECT count(*) FROM {p} d WHERE d.{fc} <> c.{fc}) AS n FROM {p} c "
    "LIMIT 10",
    "SELECT count(*) AS n FROM {p} c WHERE NOT EXISTS (SELECT 1 FROM {p} d "
    "WHERE d.{fc} = c.{fc})",
    "SELECT 1 AS hit WHERE EXISTS (SELECT 1 FROM {p} WHERE {name} = '{other_name}')",
    "SELECT 1 AS hit WHERE EXISTS (SELECT 1 FROM {p} WHERE {pk} = '{other_pk}')",
    "SELECT count(*) AS n FROM {p} WHERE {pk} = '{other_pk}'",
    "SELECT count(*) AS n FROM {fact} WHERE {fact_pk} = {other_fact_pk}",
    "SELECT (SELECT count(*) FROM {p}) AS a, (SELECT count(*) FROM {fact}) AS b",
    "SELECT count(*) AS n FROM {p} WHERE {name} LIKE '{other_name_prefix}%'",
    "SELECT count(*) AS n FROM {sub} s WHERE s.{xwv} IN (SELECT x.{xwv} FROM {xw} x)",
    "SELECT {fact_fc}, count(*) AS n, sum({fact_amt}) AS s FROM {fact} GROUP BY {fact_fc} "
    "ORDER BY 1",
    "SELECT * FROM {p} PIVOT (count(*) FOR {fc} IN ('{own}', '{other}'))",
    "SELECT {fc}, count(*) AS n FROM {p} GROUP BY GROUPING SETS (({fc}), ())",
    "SELECT {fc}, count(*) AS n FROM {p} GROUP BY ROLLUP ({fc})",
    "SELECT DISTINCT ON ({fc}) {fc}, {pk} FROM {p} ORDER BY {fc}, {pk}",
    "SELECT {pk} FROM {p} QUALIFY count(*) OVER () > 0 ORDER BY {pk} LIMIT 5",
    "SELECT count(*) AS n FROM {p} a, {p} b WHERE a.{pk} = b.{pk}",
    "SELECT * FROM (VALUES ('{other_pk}')) AS v(k) LEFT JOIN {p} c ON c.{pk} = v.k",
    "SELECT count(*) AS n FROM (SELECT {pk} FROM {p} ORDER BY {pk} LIMIT 1000000 OFFSET 0) s",
]):
    sql(f"rows-{i:02d}", W, text)

# --- pinning the row-filtered column to another value ---
P = "pinned"
for i, text in enumerate([
    "SELECT * FROM {p} WHERE {fc} = '{other}'",
    "SELECT * FROM {p} WHERE {fc} IN ('{own}', '{other}')",
    "SELECT * FROM {p} WHERE '{other}' = {fc}",
    "SELECT count(*) AS n FROM {fact} WHERE {fact_fc} = '{other}'",
    "SELECT * FROM {p} c WHERE c.{fc} = '{other}'",
    "SELECT count(*) AS n FROM (SELECT * FROM {p} WHERE {fc} = '{other}') s",
    "SELECT * FROM {p} WHERE {fc} = '{own}' OR {fc} = '{other}'",
    "SELECT * FROM {p} WHERE {fc} = '{other_lower}'",
    "SELECT count(*) AS n FROM {fact} o WHERE o.{fact_fc} = '{other}'",
    "WITH x AS (SELECT * FROM {p} WHERE {fc} = '{other}') SELECT count(*) AS n FROM x",
    "SELECT count(*) AS n FROM {p} WHERE {fc} IN ('{other}')",
    "SELECT count(*) FILTER (WHERE {fc} = '{other}') AS n FROM {p}",
    "SELECT CASE WHEN {fc} = '{other}' THEN 1 END AS x FROM {p}",
]):
    sql(f"pin-{i:02d}", P, text, f="outside_entitlement")
for i, text in enumerate([
    "SELECT * FROM {p} WHERE lower({fc}) = lower('{other}')",
    "SELECT * FROM {p} WHERE {fc} <> '{own}'",
    "SELECT * FROM {p} WHERE {fc} LIKE '{other_prefix}%'",
    "SELECT * FROM {p} WHERE {fc} = '{own}' OR 1 = 1",
    "SELECT * FROM {p} WHERE {fc} = upper('{other_lower}')",
    "SELECT * FROM {p} WHERE {fc} = ('{oth1}' || '{oth2}')",
    "SELECT * FROM {p} WHERE {fc} IN (SELECT '{other}')",
    "SELECT * FROM {p} WHERE {fc} IS DISTINCT FROM '{own}'",
    "SELECT * FROM {p} WHERE 1 = 1 OR {fc} = {fc}",
    "SELECT * FROM {p} WHERE {fc} > '{own}' OR {fc} < '{own}'",
]):
    sql(f"pin-evade-{i:02d}", P, text)

# --- grounded listing and metric tools ---
L = "listing"
_add("list-p-other", L, "{t_p}", {"{a_p}": "{other}"}, f="outside_entitlement")
_add("list-fact-other", L, "{t_fact}", {"{a_fact}": "{other}"}, f="outside_entitlement")
_add("list-x-other", L, "{t_x}", {"{a_x}": "{other}"}, f="outside_entitlement")
_add("list-x2-other", L, "{t_x2}", {"{a_x2}": "{other}"}, f="outside_entitlement")
_add("list-x3-other", L, "{t_x3}", {"{a_x3}": "{other}"}, f="outside_entitlement")
_add("list-metric-other", L, "{t_metric}", {"{a_metric}": "{other}"}, f="outside_entitlement")
_add("list-p-own", L, "{t_p}", {"{a_p}": "{own}", "limit": 50}, f="ok")
_add("list-p-all", L, "{t_p}", {"limit": 200}, f="ok", m="ok")
_add("list-fact-other-id", L, "{t_fact}", {"{a_fact_id}": "{other_ref}", "limit": 50})
_add("list-p-inject", L, "{t_p}", {"{a_p}": "{own}' OR '1'='1"}, f="rejected", m="rejected")
# another scope's value in lower case: still refused where the row filter excludes it (not in
# the caller's own values, so not spelled); a caller who may read it gets it, spelled as listed
_add("list-p-lower", L, "{t_p}", {"{a_p}": "{other_lower}"}, f="rejected", m="ok")
_add("list-p-list", L, "{t_p}", {"{a_p}": ["{own}", "{other}"]}, f="outside_entitlement", m="ok")
_add("list-xw-all", L, "{t_xw}", {"limit": 200})
_add("list-fact-all", L, "{t_fact}", {"limit": 200})
_add("list-metric-default", L, "{t_metric}", {})
_add("list-p-other-cursor", L, "{t_p}", {"{a_p}": "{other}", "cursor": "x"}, f="rejected")
_add("list-bad-enum", L, "{t_x2}", {"{a_x2_id}": "{bad_id}"}, f="rejected", m="rejected")
_add("list-definitions", L, "definitions", {})

# --- paths through relationships (tether/plan/paths.py): the parent read as the caller may ---
T = "paths"
_add("path-other", T, "{t_path}", {"{a_path_fc}": "{other}"}, f="outside_entitlement")
_add("path-own", T, "{t_path}", {"{a_path_fc}": "{own}", "limit": 50}, f="ok")
_add("path-count", T, "{t_path}", {"count_by": "{path_fc}"}, f="ok", m="ok")
_add("path-order-masked", T, "{t_path}", {"order_by": "{path_mc}"}, m="masked_predicate")
_add("path-count-masked", T, "{t_path}", {"count_by": "{path_mc}"}, f="rejected",
     m="rejected")
_add("path-inject", T, "{t_path}", {"{a_path_fc}": "{own}' OR '1'='1"}, f="rejected",
     m="rejected")
_add("path-order-injected", T, "{t_path}", {"order_by": "{p}.{fc}; DROP TABLE {p}"},
     f="rejected", m="rejected")

# --- the probe, list_tables, describe_table ---
B = "probe_catalog"
_add("probe-p", B, "probe", {"product": "{p}"}, f="ok", m="ok")
_add("probe-fact", B, "probe", {"product": "{fact}"})
_add("probe-sub", B, "probe", {"product": "{sub}"})
_add("probe-xw", B, "probe", {"product": "{xw}"})
_add("probe-denied", B, "probe", {"product": "{denied}"}, m="denied_table")
_add("probe-unknown", B, "probe", {"product": "nope"}, f="rejected", m="rejected")
_add("probe-inject", B, "probe", {"product": "{p}' OR 1=1"}, f="rejected", m="rejected")
_add("catalog", B, "list_tables", {}, f="ok", m="ok")
_add("describe-denied", B, "describe_table", {"table": "{denied}"}, m="rejected")
_add("describe-inject", B, "describe_table", {"table": "{p}; DROP TABLE {p}"}, f="rejected",
     m="rejected")
_add("describe-catalog", B, "describe_table", {"table": "pg_shadow"}, f="rejected", m="rejected")
# a product defined by SQL is listed and described by its name (its exposable columns only) and
# read through its SQL as the caller may (the oracle checks the rows against the entitlement)
_add("describe-sql-product", B, "describe_table", {"table": "{sqlprod}"}, f="ok", m="ok")
sql("sql-product-rows", B, "SELECT * FROM {sqlprod}", f="ok", m="ok")
sql("sql-product-by-scope", B, "SELECT {fact_fc}, count(*) AS n FROM {sqlprod} GROUP BY {fact_fc}",
    f="ok", m="ok")

# --- denied tables (the masked user's role denies some) ---
N = "denied"
for i, text in enumerate([
    "SELECT * FROM {denied}", "SELECT count(*) AS n FROM {p} c JOIN {denied} d ON 1 = 1",
    "WITH x AS (SELECT * FROM {denied}) SELECT 1 AS one",
    "SELECT 1 AS one WHERE EXISTS (SELECT 1 FROM {denied})",
    "SELECT (SELECT count(*) FROM {denied}) AS n", "SELECT * FROM {schema}.{denied}",
]):
    sql(f"denied-{i:02d}", N, text, m="denied_table")

# --- error messages ---
E = "errors"
for i, text in enumerate([
    "SELECT CAST({name} AS INTEGER) AS i FROM {p}",
    "SELECT CAST({pk} AS DATE) AS d FROM {p}",
    "SELECT CASE WHEN {name} = '{other_name}' THEN 1 / 0 ELSE 0 END AS z FROM {p}",
    "SELECT 1 / ({fact_pk} - {other_fact_pk}) AS z FROM {fact}",
    "SELECT {fact_amt} * 9223372036854775807 AS z FROM {fact}",
    "SELECT CAST({xwv} AS INTEGER) AS i FROM {xw}",
    "SELECT CAST({pk} AS INTEGER) AS i FROM {p} WHERE {pk} = '{other_pk}'",
    "SELECT CAST({name} || '{other_name}' AS INTEGER) AS i FROM {p}",
    "SELECT zzz FROM {p}",
    "SELECT CAST(max({name}) AS INTEGER) AS i FROM {p}",
    "SELECT CAST({name} AS DATE) AS d FROM {p} ORDER BY {pk} DESC",
    "SELECT CAST('{other_name}' AS INTEGER) AS i",
]):
    sql(f"err-{i:02d}", E, text)

# --- errors as a side channel: a predicate that fails only on one row outside the scope ---
X = "side_channel"
_BOOM = ("CAST(CASE WHEN {q}{sub_pk} = '{other_sub_pk}' THEN {q}{sub_pk} || 'boom' ELSE '1' "
         "END AS INTEGER)")
_B, _BS = _BOOM.replace("{q}", ""), _BOOM.replace("{q}", "s.")
for i, text in enumerate([
    f"SELECT count(*) AS n FROM {{sub}} WHERE {_B} = 1",
    f"SELECT count(*) AS n FROM {{sub}} t JOIN {{sub}} s ON s.{{sub_pk}} = t.{{sub_pk}} "
    f"AND {_BS} = 1",
    f"SELECT count(*) AS n FROM {{p}} c LEFT JOIN {{sub}} s ON {_BS} = 1",
    f"SELECT count(*) AS n FROM {{sub}} WHERE {{sub_num}} > 0 AND {_B} = 1",
    f"SELECT count(*) AS n FROM (SELECT * FROM {{sub}}) s WHERE {_BS} = 1",
    f"SELECT count(*) AS n FROM {{sub}} t WHERE EXISTS (SELECT 1 FROM {{sub}} s "
    f"WHERE s.{{sub_pk}} = t.{{sub_pk}} AND {_BS} = 1)",
    f"SELECT {{sub_pk}} FROM {{sub}} ORDER BY {_B}, {{sub_pk}} LIMIT 1",
    f"SELECT sum({_B}) AS n FROM {{sub}}",
    "SELECT count(*) AS n FROM {sub} WHERE 1 / (CASE WHEN {sub_pk} = '{other_sub_pk}' THEN 0 "
    "ELSE 1 END) = 1",
    "SELECT count(*) AS n FROM {p} WHERE CAST(CASE WHEN {pk} = '{other_pk}' THEN {pk} || 'boom' "
    "ELSE '1' END AS INTEGER) = 1",
    "SELECT count(*) AS n FROM {fact} WHERE CAST(CASE WHEN {fact_pk} = {other_fact_pk} THEN "
    "'x' || CAST({fact_pk} AS VARCHAR) ELSE '1' END AS INTEGER) = 1",
    f"SELECT count(*) AS n FROM {{sub}} s WHERE s.{{sub_num}} > 0 AND CASE WHEN s.{{sub_pk}} = "
    f"'{{other_sub_pk}}' AND s.{{sub_num}} > 0 THEN {_BS} ELSE 1 END = 1",
]):
    sql(f"side-{i:02d}", X, text)

# --- huge results and resource abuse (one user: each costs up to the timeout) ---
H = "resource"
for i, (text, det) in enumerate([
    ("SELECT * FROM generate_series(1, 100000000) AS g(n)", True),
    ("SELECT count(*) AS n FROM {fact} a, {fact} b, {fact} c", True),
    ("SELECT a.{pk}, b.{pk} AS k2 FROM {p} a CROSS JOIN {p} b", True),
    ("SELECT string_agg(a.{name}, ',') AS s FROM {p} a, {p} b", False),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) AS n "
     "FROM r", True),
    ("SELECT repeat('x', 100000000) AS s", True),
    ("SELECT lpad('x', 100000000, 'y') AS s", True),
    ("SELECT count(*) AS n FROM generate_series(1, 10000000000) AS g(n)", True),
    ("SELECT * FROM {p} WHERE {pk} IN (" + ", ".join(["'x'"] * 5000) + ")", True),
    ("SELECT " + "(" * 3000 + "1" + ")" * 3000 + " AS x", True),
    ("SELECT 1 AS x" + " UNION ALL SELECT 1" * 900, True),
    ("SELECT {pk} FROM {p} ORDER BY random()", True),
    ("SELECT string_agg({name}, ',') AS s FROM {p} a, generate_series(1, 3000) AS g(n)", False),
    ("SELECT {pk}, g.n FROM {p}, generate_series(1, 100000) AS g(n)", True),
    ("WITH a AS (SELECT * FROM {fact}), b AS (SELECT a.* FROM a, a AS a2, a AS a3) "
     "SELECT count(*) AS n FROM b", True),
    ("SELECT count(*) AS n FROM {p} a JOIN {p} b ON a.{name} LIKE '%' || b.{name} || '%'",
     True),
    ("SELECT array_agg(n) AS a FROM generate_series(1, 5000000) AS g(n)", True),
    ("SELECT " + " + ".join(["1"] * 3000) + " AS x", True),
]):
    sql(f"huge-{i:02d}", H, text, m=SKIP, deterministic=det)

# --- cursors (a first page is fetched, then the variant is called) ---
K = "cursor"
_add("cursor-continue", K, "cursor:continue", {}, f="ok")
_add("cursor-other-user", K, "cursor:other_user", {}, f="rejected")
_add("cursor-tampered", K, "cursor:tampered", {}, f="rejected")
_add("cursor-wrong-key", K, "cursor:wrong_key", {}, f="rejected")
_add("cursor-insider-key", K, "cursor:insider_key", {})
_add("cursor-other-args", K, "cursor:other_args", {}, f="rejected")
_add("cursor-other-tool", K, "cursor:other_tool", {}, f="rejected")
_add("cursor-other-version", K, "cursor:other_version", {}, f="rejected")
_add("cursor-garbage", K, "cursor:garbage", {}, f="rejected")
_add("cursor-long", K, "cursor:long", {}, f="rejected")
_add("cursor-type-confusion", K, "cursor:type_confusion", {}, f="rejected")
