"""Injection and abuse: every string parameter and run_sql attacked, on DuckDB and PostgreSQL.

Most of the corpus runs at library level (the executor, as the server calls it); a sample goes
through the MCP server. Afterwards the warehouse must be unchanged (fingerprints and row counts),
and no call may crash the server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import copy_project, piped, with_serve
from tether.config import load_project
from tether.drift.publish import build
from tether.profiling import profile_product
from tether.serve.executor import Executor
from tether.serve.kinds import Call, ToolError
from tether.serve.pagination import load_key
from tether.serve.server import TetherServer
from tether.toolgen import generate

STRINGS = [
    "' OR '1'='1", "x'; DROP TABLE orders; --", "1; COMMIT; DROP TABLE orders",
    "'); DELETE FROM orders; --", "\\' OR 1=1 --", "/* */ OR 1=1", "EMEA' --",
    "ATTACH '/tmp/evil.db' AS evil", "read_csv('/etc/passwd')", "COPY orders TO '/tmp/x.csv'",
    "pg_sleep(10)", "＇ OR １=１ --", "EMEA\u202e--", "EMEA\x00' OR 1=1", "%s%s%s", "$1",
    ":u_region", "{{ user.region }}", "A-1234567' OR 'a'='a", "x" * 5000,
]

SQL_ATTACKS = [
    ("SELECT 1; DROP TABLE orders", "one statement"),
    ("COMMIT; DROP TABLE orders", "one statement"),
    ("DROP TABLE orders", "only a SELECT"),
    ("DELETE FROM orders", "only a SELECT"),
    ("UPDATE orders SET status = 'NEW'", "only a SELECT"),
    ("INSERT INTO orders SELECT * FROM orders", "only a SELECT"),
    ("CREATE TABLE t AS SELECT 1", "only a SELECT"),
    ("ATTACH '/tmp/evil.db' AS evil", ""),  # DuckDB: not a SELECT; PostgreSQL: no parse
    ("COPY orders TO '/tmp/x.csv'", ""),
    ("SELECT * FROM read_csv('/etc/passwd')", ""),
    ("SELECT * FROM '/etc/passwd'", ""),
    ("SELECT pg_sleep(10)", "not allowed"),
    ("SELECT * FROM information_schema.tables", "unknown table"),
    ("SELECT * FROM duckdb_settings()", ""),
    ("SELECT set_config('search_path', 'x', false)", "not allowed"),
    ("WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d", ""),
    ("SELECT * FROM orders -- ; DROP TABLE orders", None),  # a comment: harmless, allowed
    ("SELECT tax_id FROM customers", ""),
    ("SELECT count(*) FROM customers c, customers d, orders o, order_lines l", "cancelled"),
]


def fingerprint(project_dir: Path) -> dict[str, Any]:
    project = load_project(project_dir)
    return {n: (p.fingerprint, p.row_count) for n in project.config.products
            for p in [profile_product(project, n)]}


@pytest.fixture(params=["duckdb", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    src = request.getfixturevalue("demo_dir" if request.param == "duckdb" else "pg_demo_dir")
    if request.param == "duckdb":
        d = copy_project(src, tmp_path / "inj")
    else:
        d = tmp_path / "inj"
        d.mkdir()
        (d / "tether.yaml").write_text((src / "tether.yaml").read_text())
    text = with_serve((d / "tether.yaml").read_text(), statement_timeout_seconds=2)
    # let the support agent use the generic tools too, to test masks through run_sql
    text = text.replace('"explain_data_product"]', '"explain_data_product", "run_sql"]')
    (d / "tether.yaml").write_text(text)
    build(load_project(d))
    return d


def test_every_string_parameter_and_run_sql_against_a_corpus(target: Path) -> None:
    before = fingerprint(target)
    project = load_project(target)
    ex = Executor(project, load_key(target / ".tether" / "cursor.key"))
    profiles = {n: profile_product(project, n) for n in project.config.products}
    outcomes: dict[str, int] = {"error": 0, "ok": 0}
    try:
        # bare too: its lists take any strings, so each payload reaches the bound IN (...)
        tools = [*generate(project, profiles, "grounded"),
                 *[t for t in generate(project, profiles, "bare")
                   if any(s.get("type") == "array" for s in t.input_schema["properties"].values())]]
        for tool in tools:
            for pname, schema in tool.input_schema["properties"].items():
                if schema.get("type") not in ("string", "array"):
                    continue
                several = schema.get("type") == "array"  # an enum's values, several at once
                for payload in STRINGS:
                    call = Call("mgr.emea", tool.name, "1.0.0", tool.wire(), tool.plan,
                                {pname: [payload, payload[::-1]] if several else payload})
                    try:
                        result = piped(ex).run(call)
                    except ToolError:
                        outcomes["error"] += 1
                        continue
                    outcomes["ok"] += 1
                    for row in result.get("rows", []):
                        assert row.get("sales_region", "EMEA") == "EMEA", (tool.name, payload)
        generic = {t.name: t for t in generate(project, profiles, "generic")}
        run_sql = generic["run_sql"]
        for sql, says in SQL_ATTACKS:
            call = Call("mgr.emea", "run_sql", "1.0.0", run_sql.wire(), run_sql.plan, {"sql": sql})
            if says is None:
                assert piped(ex).run(call)["row_count"] >= 0
                continue
            with pytest.raises(ToolError) as e:
                piped(ex).run(call)
            assert says in str(e.value), (sql, str(e.value))
        for payload in STRINGS:  # the generic tools' own string parameters
            for name in ("describe_table", "run_sql"):
                arg = "table" if name == "describe_table" else "sql"
                call = Call("mgr.emea", name, "1.0.0", generic[name].wire(), generic[name].plan,
                            {arg: payload})
                try:
                    piped(ex).run(call)
                except ToolError:
                    outcomes["error"] += 1
    finally:
        ex.close()
    assert outcomes["error"] > 100
    assert fingerprint(target) == before


def test_run_sql_enforces_row_filters_and_masks(target: Path) -> None:
    project = load_project(target)
    ex = Executor(project, load_key(target / ".tether" / "cursor.key"))
    try:
        run_sql = next(t for t in generate(project, {}, "generic") if t.name == "run_sql")

        def sql(user: str, q: str) -> list[dict[str, Any]]:
            rows: list[dict[str, Any]] = piped(ex).run(Call(user, "run_sql", "1.0.0", run_sql.wire(),
                                                     run_sql.plan, {"sql": q}))["rows"]
            return rows

        regions = sql("mgr.emea", "SELECT DISTINCT sales_region FROM customers")
        assert regions == [{"sales_region": "EMEA"}]
        counts = sql("mgr.emea", "SELECT count(*) AS n FROM orders o JOIN customer_crosswalk x "
                                 "ON x.crm_account_id = o.customer_ref")
        everyone = sql("fin.ana", "SELECT count(*) AS n FROM orders")
        assert 0 < counts[0]["n"] < everyone[0]["n"]
        emails = sql("sup.sam", "SELECT email FROM customers LIMIT 5")
        assert {r["email"] for r in emails} == {"[redacted]"}
        assert len(sql("fin.ana", "SELECT * FROM order_lines")) == 200  # the row limit
        # order lines belong to orders and are filtered the same way (tether ci item 13)
        lines = sql("mgr.emea", "SELECT count(*) AS n FROM order_lines")
        assert 0 < lines[0]["n"] < sql("fin.ana", "SELECT count(*) AS n FROM order_lines")[0]["n"]
        # a filtered role's statement that reads no filtered product: its attributes are not
        # bound at all (an unused parameter was an engine error: found by running the harness)
        assert sql("mgr.emea", "SELECT 1 AS n") == [{"n": 1}]
    finally:
        ex.close()


def test_a_sample_through_the_server(target: Path) -> None:
    before = fingerprint(target)
    server = TetherServer(load_project(target), mode="generic", stdio_user="mgr.emea")

    async def go() -> list[Any]:
        async with Client(server.server) as c:
            out = []
            for sql, _ in SQL_ATTACKS[:6] + SQL_ATTACKS[-1:]:
                out.append(await c.call_tool("run_sql", {"sql": sql}))
            out.append(await c.call_tool("run_sql", {"sql": "SELECT count(*) AS n FROM deals"}))
            return out

    try:
        results = anyio.run(go)
    finally:
        server.close()
    assert all(r.is_error for r in results[:-1])
    assert not results[-1].is_error  # and the server is still up
    assert fingerprint(target) == before
