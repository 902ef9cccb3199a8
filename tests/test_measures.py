"""Governed measures and declared join paths: a revenue that multiplies amounts by a rate from a
lookup table keyed by a currency code.

The warehouse is a copy of the demo's with a small rate table; tether.yaml gains the rate
product, a relationship from the amounts' currency code to it (not an identifier scheme), a
glossary term whose governed definition is a measure, and a metric computing it. The metric's
tool joins along the relationship; the labeller credits the join keys as fields used and
matches the measure by expression, then by value."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import piped, run_cli
from tether.config import load_project
from tether.drift.publish import build
from tether.eval.cases import Case, Gold
from tether.eval.label import LabelContext, label_trace
from tether.eval.trace import ToolCall, Trace
from tether.registry import open_registry
from tether.serve.executor import Executor
from tether.serve.kinds import Call
from tether.serve.pagination import load_key
from tether.toolgen import QueryPlan

MEASURE = "sum(orders.amount_cents * fx_rates.rate_to_eur)"
EXTRA = """
  fx_rates:
    table: fx_rates
    description: One row per currency with its rate to euros.
    primary_key: [currency]
    tool: {name: currency_rates}
relationships:
  - {from: orders.currency, to: fx_rates.currency, kind: many_to_one}
"""
TERM = f"""  revenue in euros:
    definition: "Order amounts converted to euro cents at the currency's rate."
    measure: "{MEASURE}"
    fields: [orders.amount_cents, fx_rates.rate_to_eur]
"""
METRIC = f"""  revenue_eur:
    term: revenue in euros
    measure: "{MEASURE}"
    window: current
    unit: EUR_cents
    tool: {{name: revenue_in_euro_cents}}
"""


@pytest.fixture(scope="module")
def project_dir(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("measures")
    shutil.copy(demo_dir / "warehouse.duckdb", d / "warehouse.duckdb")
    with duckdb.connect(str(d / "warehouse.duckdb")) as con:
        con.execute("CREATE TABLE fx_rates (currency VARCHAR PRIMARY KEY, rate_to_eur DOUBLE)")
        con.execute("INSERT INTO fx_rates VALUES ('USD', 0.9), ('EUR', 1.0)")
    text = (demo_dir / "tether.yaml").read_text()
    text = text.replace("\nidentifier_schemes:", EXTRA.rstrip() + "\n\nidentifier_schemes:", 1)
    text = text.replace("glossary:\n", "glossary:\n" + TERM, 1)
    text = text.replace("metrics:\n", "metrics:\n" + METRIC, 1)
    (d / "tether.yaml").write_text(text)
    assert build(load_project(d)).exit_code == 0
    return d


def answer(d: Path, name: str, args: dict[str, Any]) -> ToolCall:
    project = load_project(d)
    registry = open_registry(project)
    try:
        v = registry.current()[name]
    finally:
        registry.close()
    ex = Executor(project, load_key(d / ".tether" / "cursor.key"))
    try:
        got = piped(ex).answer(Call("fin.ana", name, v.version, v.definition,
                             QueryPlan.model_validate(v.plan), args))
    finally:
        ex.close()
    return ToolCall(index=0, turn=0, name=name, arguments=args, structured=got.result,
                    text=json.dumps(got.result),
                    meta={"tether/evidence": got.evidence.model_dump(mode="json")})


def label(d: Path, call: ToolCall, value: float) -> Any:
    case = Case(case_id="rev", user_role="finance_analyst", as_user="fin.ana",
                question="What is our revenue in euros?",
                gold=Gold(answer=value, tolerance=1, definition="revenue in euros",
                          required_fields=["orders.amount_cents", "fx_rates.rate_to_eur"]))
    trace = Trace(case_id="rev", server="x", target="x", agent="a", as_user="fin.ana",
                  user_role="finance_analyst", question=case.question, case=case,
                  started_at=dt.datetime(2026, 8, 20, 9, tzinfo=dt.UTC), tool_calls=[call],
                  answer=value)
    with LabelContext.build(load_project(d)) as ctx:
        return label_trace(trace, ctx)


def test_the_metric_joins_along_the_relationship(project_dir: Path) -> None:
    call = answer(project_dir, "revenue_in_euro_cents", {})
    ev = call.meta["tether/evidence"]  # type: ignore[index]
    assert "fx_rates" in ev["tables"] and "orders" in ev["tables"]
    assert '"orders"."currency" = "fx_rates"."currency"' in ev["sql"]
    with duckdb.connect(str(project_dir / "warehouse.duckdb"), read_only=True) as con:
        gold = con.execute("SELECT sum(o.amount_cents * r.rate_to_eur) FROM orders o "
                           "JOIN fx_rates r ON r.currency = o.currency").fetchall()[0][0]
    value = call.structured["rows"][0]["revenue_eur"]  # type: ignore[index]
    assert value == pytest.approx(gold)
    line = label(project_dir, call, value)
    assert line.correct and line.definition_match is True
    assert {"orders.currency", "fx_rates.currency", "orders.amount_cents",
            "fx_rates.rate_to_eur"} <= set(line.fields_used)  # the join keys are used


@pytest.mark.parametrize(("sql", "match"), [
    ("SELECT sum(r.rate_to_eur * o.amount_cents) AS v FROM orders o JOIN fx_rates r "
     "ON r.currency = o.currency", True),                      # the same, operands turned round
    ("SELECT sum(o.amount_cents * r.rate_to_eur * 1) AS v FROM orders o JOIN fx_rates r "
     "ON r.currency = o.currency", True),                      # another form, the same values
    ("SELECT sum(o.amount_cents) AS v FROM orders o", False),  # no conversion
    ("SELECT avg(o.amount_cents * r.rate_to_eur) AS v FROM orders o JOIN fx_rates r "
     "ON r.currency = o.currency", False),                     # another aggregate
])
def test_a_measure_is_matched_by_expression_then_by_value(project_dir: Path, sql: str,
                                                          match: bool) -> None:
    call = ToolCall(index=0, turn=0, name="run_sql", arguments={"sql": sql},
                    structured={"rows": [{"v": 1}]}, text="{}")
    assert label(project_dir, call, 1).definition_match is match


@pytest.mark.parametrize(("edit", "says"), [
    ("  - {from: orders.currency, to: fx_rates.currency, kind: many_to_one}",
     "unknown product 'fx_rate'"),
    (f'    measure: "{MEASURE}"\n    fields: [orders.amount_cents, fx_rates.rate_to_eur]',
     "is not an aggregate"),
])
def test_bad_relationships_and_measures_name_their_line(project_dir: Path, tmp_path: Path,
                                                        edit: str, says: str) -> None:
    text = (project_dir / "tether.yaml").read_text()
    assert edit in text
    bad = (edit.replace("fx_rates.currency", "fx_rate.currency") if "from:" in edit
           else edit.replace(MEASURE, "orders.amount_cents * fx_rates.rate_to_eur"))
    (tmp_path / "tether.yaml").write_text(text.replace(edit, bad))
    res = run_cli("tools", "--project", str(tmp_path))
    assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr
    line = next(i for i, x in enumerate(text.replace(edit, bad).splitlines(), 1)
                if ("fx_rate.currency" in x if "from:" in edit else "measure:" in x
                    and "sum(" not in x))
    assert f"tether.yaml:{line}" in res.stderr


TYPED_METRICS = """  newest_status:
    description: The last order status in alphabetical order.
    measure: "max(orders.status)"
    window: current
    unit: none
    dimensions: [orders.sales_region]
    outputs:
      largest_amount: {sql: "max(orders.amount_cents)", unit: USD_cents, description: Largest.}
      orders_counted: {sql: "count(*)", unit: orders, description: Orders counted.}
    tool: {name: newest_order_status}
"""


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_a_metric_declares_its_measures_sql_types(engine: str, request: pytest.FixtureRequest,
                                                  tmp_path: Path) -> None:
    """max() of a text column answers text, max() of an integer an integer: the output schema
    says so, and the SDK client (which checks structuredContent against it) accepts both."""
    import anyio
    from mcp import Client

    from conftest import copy_project
    from tether.serve.server import TetherServer
    from tether.sources import open_product_source

    d = copy_project(request.getfixturevalue("demo_dir" if engine == "duckdb"
                                             else "pg_demo_dir"), tmp_path / "p")
    text = (d / "tether.yaml").read_text()
    (d / "tether.yaml").write_text(text.replace("metrics:\n", "metrics:\n" + TYPED_METRICS, 1))
    assert build(load_project(d)).exit_code == 0
    project = load_project(d)
    server = TetherServer(project, stdio_user="fin.ana")

    async def go() -> Any:
        async with Client(server.server) as c:
            tool = next(t for t in (await c.list_tools()).tools
                        if t.name == "newest_order_status")
            return tool, await c.call_tool("newest_order_status", {})

    try:
        tool, got = anyio.run(go)
    finally:
        server.close()
    rows = tool.output_schema["properties"]["rows"]["items"]["properties"]
    assert rows["newest_status"]["type"] == ["string", "null"]
    assert rows["largest_amount"]["type"] == ["integer", "null"]
    assert rows["orders_counted"]["type"] == "integer"
    assert not got.is_error, got.content
    with open_product_source(project, "orders") as src:
        want = {r[0]: (r[1], r[2], r[3]) for r in src.run(
            "SELECT sales_region, max(status), max(amount_cents), count(*) FROM orders "
            "GROUP BY sales_region")}
    assert {r["sales_region"]: (r["newest_status"], r["largest_amount"], r["orders_counted"])
            for r in got.structured_content["rows"]} == want
