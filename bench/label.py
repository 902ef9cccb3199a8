"""Labelling throughput: 10,000 recorded traces labelled on one core.

The traces are synthetic but shaped like real runs on the demo warehouse: 40% from the generic
server (list_tables, describe_table, one to three run_sql calls drawn from twelve query families
with varied literals, aliases, keyword case, limits and clauses) and 60% from the grounded server
(metric tools, listing tools with filters and followed or unfollowed pages, the probe), with real
rows in the results, as_of, model turns, clarifications and answers in text. Users are spread
over the demo's roles, so the policy oracle has rows to check. The traces are written as a run
folder and labelled with `label_run` (reading the JSON included); the SQL-analysis share comes
from the labeller's own timers.

References, on the same statements: sqlglot parse + qualify of every run_sql statement one by
one (what SQL alone costs a labeller without the shape cache), and the labeller itself with its
caches off on a sample.

    python bench/label.py [--traces 10000] [--scale 0.05] [--dir bench/out/label] [--seed 7]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot.optimizer.qualify import qualify

from tether.config import Project, load_project
from tether.demo import init_demo
from tether.eval.cases import Case, Gold, Window
from tether.eval.label import LabelContext, label_run, label_trace
from tether.eval.trace import IndexEntry, ModelTurn, RunIndex, ToolCall, Trace, Usage
from tether.profiling import profile_project
from tether.toolgen import generate

REGIONS = ["EMEA", "AMER", "APAC"]
SUB_STATUSES = ["ACTIVE", "PAUSED_BILLING", "TRIAL", "CANCELLED", "EXPIRED"]
ORDER_STATUSES = ["NEW", "PAID", "SHIPPED", "CANCELLED"]
SEGMENTS = ["ENTERPRISE", "MID_MARKET", "SMB"]
PIPELINES = ["default", "enterprise", "partner"]
QUARTERS = [("FY2027-Q1", "2026-02-01", "2026-05-01"), ("FY2027-Q2", "2026-05-01", "2026-08-01"),
            ("FY2026-Q4", "2025-11-01", "2026-02-01")]
USERS = [("fin.ana", "finance_analyst")] * 6 + [("mgr.emea", "regional_manager"),
                                                ("mgr.amer", "regional_manager"),
                                                ("mgr.apac", "regional_manager"),
                                                ("sup.sam", "support_agent")]
FRESH = "2026-08-20T08:00:00+00:00"


class Sample:
    """Real rows from the demo warehouse, so results hold keys the oracle can check."""

    def __init__(self, db: Path):
        con = duckdb.connect(str(db), read_only=True)
        try:
            self.customers = [dict(zip(("customer_id", "name", "email", "sales_region",
                                        "segment"), r, strict=True)) for r in con.execute(
                "SELECT customer_id, name, email, sales_region, segment FROM customers "
                "ORDER BY customer_id LIMIT 300").fetchall()]
            self.orders = [dict(zip(("order_id", "customer_ref", "sales_region", "status",
                                     "amount_cents"), r, strict=True)) for r in con.execute(
                "SELECT order_id, customer_ref, sales_region, status, amount_cents FROM orders "
                "ORDER BY order_id LIMIT 600").fetchall()]
            self.crm = [r[0] for r in con.execute(
                "SELECT crm_account_id FROM customer_crosswalk LIMIT 200").fetchall()]
            self.tickets = [dict(zip(("ticket_id", "customer_id", "sales_region", "status",
                                      "priority"), r, strict=True)) for r in con.execute(
                "SELECT ticket_id, customer_id, sales_region, status, priority FROM "
                "support_tickets ORDER BY ticket_id LIMIT 300").fetchall()]
        finally:
            con.close()

    def customers_in(self, rng: random.Random, region: str | None, n: int, masked: bool = False
                     ) -> list[dict[str, Any]]:
        pool = [c for c in self.customers if region is None or c["sales_region"] == region]
        rows = rng.sample(pool, min(n, len(pool)))
        # the support role sees email masked; now and then a server forgets (a leak to find)
        if masked and rng.random() > 0.05:
            rows = [{**r, "email": "[redacted]"} for r in rows]
        return rows

    def tickets_in(self, rng: random.Random, region: str | None, n: int) -> list[dict[str, Any]]:
        pool = [t for t in self.tickets if region is None or t["sales_region"] == region]
        return rng.sample(pool, min(n, len(pool)))

    def orders_in(self, rng: random.Random, region: str | None, n: int) -> list[dict[str, Any]]:
        pool = [o for o in self.orders if region is None or o["sales_region"] == region]
        return rng.sample(pool, min(n, len(pool)))


# --- run_sql statements: twelve families, varied the way agents vary them -------------------------


def _kw(rng: random.Random, text: str) -> str:
    return text if rng.random() < 0.7 else text.lower()


def _date(rng: random.Random, year: int = 2026) -> str:
    return (dt.date(year, 1, 1) + dt.timedelta(days=rng.randrange(0, 220))).isoformat()


def statement(rng: random.Random, sample: Sample, k: int | None = None) -> tuple[str, str]:
    """(family, SQL) of family ``k`` (default: any)."""
    r, r2 = rng.choice(REGIONS), rng.choice(REGIONS)
    a = rng.choice(["c", "cu", "cust"])
    lim = rng.choice([5, 10, 20, 50, 100])
    k = rng.randrange(12) if k is None else k
    if k == 0:
        col = rng.choice(["sales_region", "region_code"])
        val = r if col == "sales_region" else f"EU-{rng.choice(['DE', 'FR', 'ES', 'AE'])}"
        op = "=" if col == "sales_region" else "LIKE"
        sql = (f"SELECT COUNT(*) FROM customers {a} WHERE {a}.is_active = true AND {a}.{col} {op} "
               f"'{val}'" + (f" AND {a}.created_at < '{_date(rng)}'" if rng.random() < 0.5 else ""))
    elif k == 1:
        st = rng.sample(SUB_STATUSES, rng.choice([1, 2, 2, 3]))
        q = rng.choice(QUARTERS)
        sql = (f"SELECT {a}.sales_region, COUNT(DISTINCT {a}.customer_id) AS n FROM customers {a} "
               f"JOIN customer_crosswalk x ON x.customer_id = {a}.customer_id "
               f"JOIN subscriptions s ON s.billing_account_no = x.billing_account_no "
               f"WHERE s.status IN ({', '.join(repr(s) for s in st)}) "
               f"AND s.period_start < DATE '{q[2]}' "
               f"AND (s.period_end IS NULL OR s.period_end > DATE '{q[1]}') GROUP BY 1 ORDER BY 2 DESC")
    elif k == 2:
        sql = (f"SELECT SUM(o.amount_cents) AS revenue FROM orders o JOIN order_lines l "
               f"ON l.order_id = o.order_id WHERE o.placed_at >= '{_date(rng)}'"
               + (f" AND o.sales_region = '{r}'" if rng.random() < 0.5 else ""))
    elif k == 3:
        sql = (f"SELECT status, COUNT(*) AS n, SUM(amount_cents) / 100.0 AS usd FROM orders "
               f"WHERE sales_region = '{r}' GROUP BY status ORDER BY n DESC")
    elif k == 4:
        col = rng.choice(["closed_at", "created_at"])
        sql = ("SELECT COUNT(*) FILTER (WHERE stage = 'CLOSED_WON') * 1.0 / COUNT(*) AS win_rate "
               f"FROM deals WHERE stage IN ('CLOSED_WON', 'CLOSED_LOST') AND {col} >= '{_date(rng)}'"
               + (f" AND pipeline = '{rng.choice(PIPELINES)}'" if rng.random() < 0.4 else ""))
    elif k == 5:
        ident = rng.choice(sample.crm) if rng.random() < 0.3 else \
            rng.choice(sample.customers)["customer_id"]
        sql = (f"SELECT t.ticket_id, t.status, t.priority FROM support_tickets t "
               f"WHERE t.customer_id = '{ident}' AND t.status = 'OPEN'")
    elif k == 6:
        sql = (f"SELECT stage, SUM(open_amount_usd) AS open_usd FROM pipeline_snapshot "
               f"WHERE snapshot_date = (SELECT MAX(snapshot_date) FROM pipeline_snapshot) "
               f"AND sales_region = '{r}' GROUP BY stage ORDER BY open_usd DESC")
    elif k == 7:
        sql = (f"WITH w AS (SELECT deal_id, amount_usd, stage FROM deals WHERE closed_at BETWEEN "
               f"'{_date(rng)}' AND '{_date(rng)}') SELECT stage, COUNT(*) AS n, AVG(amount_usd) "
               f"AS avg_usd FROM w GROUP BY stage")
    elif k == 8:
        sql = (f"SELECT {a}.name, COUNT(*) AS orders FROM orders o JOIN customer_crosswalk x "
               f"ON x.crm_account_id = o.customer_ref JOIN customers {a} ON {a}.customer_id = "
               f"x.customer_id WHERE o.status IN ('NEW', 'PAID') AND o.sales_region = '{r2}' "
               f"GROUP BY {a}.name ORDER BY orders DESC LIMIT {lim}")
    elif k == 9:
        sql = (f"SELECT customer_id, name, email, sales_region FROM customers "
               f"WHERE segment = '{rng.choice(SEGMENTS)}' AND sales_region = '{r}' LIMIT {lim}")
    elif k == 10:
        sql = (f"SELECT o.order_id, o.status, o.amount_cents FROM orders o WHERE o.customer_ref = "
               f"'{rng.choice(sample.crm)}' ORDER BY o.placed_at DESC LIMIT {lim}")
    else:
        sql = (f"SELECT plan, status, COUNT(*) AS spells, SUM(mrr_cents) AS mrr FROM subscriptions "
               f"WHERE period_start >= DATE '{_date(rng, 2025)}' AND status <> '{rng.choice(SUB_STATUSES)}' "
               f"GROUP BY plan, status")
    return f"q{k}", _kw(rng, sql)


def sql_rows(rng: random.Random, family: str, sample: Sample, user_region: str | None,
             masked: bool = False) -> list[dict[str, Any]]:
    if family == "q9":
        return [{k: c[k] for k in ("customer_id", "name", "email", "sales_region")}
                for c in sample.customers_in(rng, user_region, rng.randrange(1, 8), masked)]
    if family == "q10":
        return [{k: o[k] for k in ("order_id", "status", "amount_cents")}
                for o in sample.orders_in(rng, user_region, rng.randrange(0, 6))]
    if family == "q5":
        return [] if rng.random() < 0.5 else [
            {k: t[k] for k in ("ticket_id", "status", "priority")}
            for t in sample.tickets_in(rng, user_region, 1)]
    return [{"n": rng.randrange(0, 5000), "region": rng.choice(REGIONS)}
            for _ in range(rng.randrange(1, 4))]


# --- traces --------------------------------------------------------------------------------------


def _call(i: int, name: str, args: dict[str, Any], structured: Any, error: bool = False) -> ToolCall:
    return ToolCall(index=i, turn=i, name=name, arguments=args, structured=structured,
                    text=json.dumps(structured, default=str)[:2000], is_error=error)


def _result(rows: list[dict[str, Any]], as_of: str | None = FRESH, **more: Any) -> dict[str, Any]:
    out = {"rows": rows, "row_count": len(rows), **more}
    if as_of:
        out["as_of"] = as_of
    return out


# --- scenarios: what the question asks, its gold, and the calls each server makes -------------

SCENARIOS: dict[str, dict[str, Any]] = {
    "active": {"sql": [0, 1, 1], "tools": ["active"],
               "required": ["customers.customer_id", "subscriptions.status",
                            "customers.sales_region", "subscriptions.period_start",
                            "subscriptions.period_end"],
               "forbidden": ["customers.is_active", "customers.region_code",
                             "customers.created_at"],
               "definition_sql": "subscriptions.status IN ('ACTIVE', 'PAUSED_BILLING')",
               "definition": "active customer: a subscription ACTIVE or PAUSED_BILLING",
               "window": True, "bound": 24},
    "backlog": {"sql": [3, 8], "tools": ["backlog", "orders"], "required": ["orders.status"],
                "definition_sql": "orders.status IN ('NEW', 'PAID', 'ON_HOLD')", "bound": 24},
    "win rate": {"sql": [4, 4, 7], "tools": ["win"], "required": ["deals.stage", "deals.closed_at"],
                 "forbidden": ["deals.created_at"],
                 "definition": "win rate: deals closed won over deals closed", "bound": 24},
    "tickets": {"sql": [5], "tools": ["tickets"],
                "required": ["support_tickets.customer_id", "support_tickets.status"], "bound": 24},
    "revenue": {"sql": [2, 10], "tools": ["orders"], "required": ["orders.amount_cents"]},
    "pipeline": {"sql": [6], "tools": ["snapshot"],
                 "required": ["pipeline_snapshot.open_amount_usd", "pipeline_snapshot.stage"],
                 "bound": 6},
    "customers": {"sql": [9], "tools": ["customers"],
                  "required": ["customers.sales_region", "customers.segment"]},
}


def _gold(rng: random.Random, sc: dict[str, Any], answer: int) -> Gold:
    window = None
    if sc.get("window"):
        q = rng.choice(QUARTERS)
        window = Window(start=dt.date.fromisoformat(q[1]), calendar="fiscal",
                        end=dt.date.fromisoformat(q[2]) - dt.timedelta(days=1))
    prose = rng.random() < 0.5 or "definition_sql" not in sc
    return Gold(answer=answer, tolerance=rng.choice([0, 0, 1]), required_fields=sc["required"],
                forbidden_fields=sc.get("forbidden", []),
                definition=sc.get("definition") if prose else None,
                definition_sql=None if prose else sc.get("definition_sql"),
                window=window, freshness_bound_hours=sc.get("bound"))


def _answer_text(rng: random.Random, n: int) -> str:
    return rng.choice([f"There were {n:,} in total.", f"**{n}**", f"About {n}.",
                       f"{n:,} (FY2027 Q1, as of 2026-08-20)", f"I count {n:,}, up from {n - 40:,}."])


def generic_calls(rng: random.Random, sample: Sample, region: str | None, sc: dict[str, Any],
                  masked: bool) -> list[ToolCall]:
    calls = [_call(0, "list_tables", {}, _result([{"table": "customers"}], as_of=None))]
    if rng.random() < 0.6:
        calls.append(_call(1, "describe_table", {"table": "customers"},
                           _result([{"column": "is_active", "type": "BOOLEAN"}], as_of=None)))
    for n in range(rng.choice([1, 1, 2, 3])):
        family, sql = statement(rng, sample, rng.choice(sc["sql"]) if n == 0 else None)
        error = rng.random() < 0.05
        calls.append(_call(len(calls), "run_sql", {"sql": sql},
                           {"error": "bad column"} if error else
                           _result(sql_rows(rng, family, sample, region, masked), as_of=None,
                                   truncated=False), error=error))
    return calls


def grounded_call(rng: random.Random, i: int, kind: str, sample: Sample, region: str | None,
                  masked: bool) -> list[ToolCall]:
    r = region or rng.choice(REGIONS)
    if kind == "active":
        q = rng.choice(QUARTERS)[0]
        return [_call(i, "active_customers_by_region_and_fiscal_quarter",
                      {"sales_region": r, "fiscal_quarter": q},
                      _result([{"sales_region": r, "fiscal_quarter": q,
                                "active_customers": rng.randrange(100, 300)}]))]
    if kind == "win":
        return [_call(i, "win_loss_summary_trailing_window",
                      {"days": rng.choice([30, 90, 180]), "pipeline": rng.choice(PIPELINES)},
                      _result([{"pipeline": "default", "win_rate": rng.random()}]))]
    if kind == "backlog":
        return [_call(i, "order_backlog_by_status", {"status": rng.choice(["NEW", "PAID", None])},
                      _result([{"status": "NEW", "order_backlog": rng.randrange(900)}]))]
    if kind == "orders":
        paged = rng.random() < 0.3
        out = [_call(i, "orders_by_status_and_customer",
                     {"status": rng.choice(ORDER_STATUSES), "limit": 20},
                     _result(sample.orders_in(rng, region, rng.randrange(1, 20)),
                             next_cursor="c1" if paged else None, truncated=paged))]
        if paged and rng.random() < 0.5:
            out.append(_call(i + 1, "orders_by_status_and_customer",
                             {"status": "NEW", "limit": 20, "cursor": "c1"},
                             _result(sample.orders_in(rng, region, 5), next_cursor=None)))
        return out
    if kind == "tickets":
        tickets = sample.tickets_in(rng, region, rng.randrange(1, 4))
        ident = rng.choice(sample.crm) if rng.random() < 0.2 else tickets[0]["customer_id"]
        return [_call(i, "support_tickets_for_customer",
                      {"canonical_customer_id": ident, "status": "OPEN"},
                      _result([] if ident.startswith("A-") else tickets))]
    if kind == "snapshot":
        return [_call(i, "open_pipeline_by_stage_last_night", {"stage": "PROPOSAL"},
                      _result([{"stage": "PROPOSAL", "open_amount_usd": rng.randrange(10**6)}],
                              as_of="2026-08-19T19:00:00+00:00"))]
    return [_call(i, "customers_by_region_and_segment",
                  {"sales_region": r, "segment": rng.choice(SEGMENTS)},
                  _result(sample.customers_in(rng, region, rng.randrange(1, 12), masked),
                          next_cursor=None, truncated=False))]


def grounded_calls(rng: random.Random, sample: Sample, region: str | None, sc: dict[str, Any],
                   masked: bool) -> list[ToolCall]:
    calls: list[ToolCall] = []
    if rng.random() < 0.2:
        calls.append(_call(0, "explain_data_product", {"product": "customers"},
                           {"product": "customers", "columns": [], "as_of": FRESH}))
    noise = rng.sample(["active", "win", "backlog", "orders", "tickets", "customers"],
                       rng.choice([0, 0, 1, 2]))
    kinds = [rng.choice(sc["tools"]), *noise]
    for kind in kinds:
        calls += grounded_call(rng, len(calls), kind, sample, region, masked)
    return calls


def make_trace(rng: random.Random, n: int, sample: Sample, tools: dict[str, dict[str, Any]],
               project: Project) -> Trace:
    user, role = rng.choice(USERS)
    region = project.config.policies.users[user].attributes().get("region")
    name = rng.choice(list(SCENARIOS))
    sc = SCENARIOS[name]
    generic = rng.random() < 0.4
    masked = role == "support_agent"
    calls = (generic_calls if generic else grounded_calls)(rng, sample, region, sc, masked)
    answer = rng.randrange(100, 2000)
    given = answer if rng.random() < 0.7 else answer + rng.choice([1, 7, 100])
    case = Case(case_id=f"case-{n:05d}", user_role=role, as_user=user,
                question=f"A question about {name}?", gold=_gold(rng, sc, answer))
    turns = [ModelTurn(index=i, usage=Usage(input_tokens=rng.randrange(800, 9000),
                                            output_tokens=rng.randrange(20, 400)))
             for i in range(len(calls) + 1)]
    used = {c.name for c in calls}
    return Trace(case_id=case.case_id, server="tether-generic" if generic else "tether-grounded",
                 target="stdio:'tether serve'", agent="bench", model="gpt-4o-mini", as_user=user,
                 user_role=role, question=case.question, case=case,
                 started_at=dt.datetime(2026, 8, 20, 9, tzinfo=dt.UTC),
                 tools=[t for name, t in tools.items() if name in used], turns=turns,
                 tool_calls=calls, final_answer=_answer_text(rng, given),
                 answer=given if rng.random() < 0.3 else None)


def write_run(d: Path, traces: list[Trace]) -> None:
    if d.exists():
        shutil.rmtree(d)
    (d / "traces").mkdir(parents=True)
    for t in traces:
        (d / "traces" / f"{t.case_id}.json").write_text(t.model_dump_json())
    index = RunIndex(run_id="bench", server="mixed", target="synthetic", agent="bench",
                     cases_file="synthetic", started_at=traces[0].started_at,
                     entries=[IndexEntry(case_id=t.case_id, file=f"traces/{t.case_id}.json",
                                         status="done") for t in traces])
    (d / "index.json").write_text(index.model_dump_json())


# --- references ----------------------------------------------------------------------------------


def sqlglot_floor(project: Project, statements: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds per statement: parse + qualify against the schema, no cache."""
    with LabelContext.build(project) as ctx:
        schema = ctx.schema()
    t, c = time.perf_counter(), time.process_time()
    for s in statements:
        qualify(sqlglot.parse_one(s, read="duckdb"), schema=schema, dialect="duckdb",
                validate_qualify_columns=False, expand_stars=False)
    n = max(1, len(statements))
    return (time.perf_counter() - t) / n, (time.process_time() - c) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--traces", type=int, default=10_000)
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--dir", type=Path, default=Path("bench/out/label"))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--sample", type=int, default=1000, help="traces labelled with caches off")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    demo = args.dir / "demo"
    if not (demo / "tether.yaml").exists():
        init_demo(demo, scale=args.scale, force=True)
    project = load_project(demo)
    profiles = {p.product: p for p in profile_project(project)}
    tools = {t.name: t.wire() for m in ("grounded", "generic") for t in generate(project, profiles, m)}
    sample = Sample(demo / "warehouse.duckdb")
    rng = random.Random(args.seed)
    traces = [make_trace(rng, n, sample, tools, project) for n in range(args.traces)]
    run = args.dir / "run"
    write_run(run, traces)
    calls = sum(len(t.tool_calls) for t in traces)
    sql_stmts = [str(c.arguments["sql"]) for t in traces for c in t.tool_calls if c.name == "run_sql"]

    with LabelContext.build(project) as ctx:
        t0, c0 = time.perf_counter(), time.process_time()
        lines = label_run(run, project, ctx=ctx)
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        timings, counters = dict(ctx.timings), dict(ctx.counters)
    labelling = sum(v for k, v in timings.items() if k.startswith("scorer:") or k == "calls")
    floor = sqlglot_floor(project, sql_stmts[:2000])
    cold = traces[: args.sample]
    with LabelContext.build(project, shape_cache=False) as nctx:
        t0, c0 = time.perf_counter(), time.process_time()
        for t in cold:
            label_trace(t, nctx)
        cold_time, cold_cpu = time.perf_counter() - t0, time.process_time() - c0
        cold_sql = nctx.timings.get("sql", 0.0)
    cold_calls = sum(len(t.tool_calls) for t in cold)

    print(f"{len(traces):,} traces, {calls:,} tool calls ({len(sql_stmts):,} run_sql), "
          f"demo scale {args.scale}, one core, sqlglot {sqlglot.__version__}")
    print(f"  distinct SQL texts {len(set(sql_stmts)):,}, shapes parsed "
          f"{counters.get('sql_shapes', 0):,}, predicate pairs run on DuckDB "
          f"{counters.get('predicate_runs', 0):,}")
    print(f"{'path':<46}{'wall s':>8}{'CPU s':>8}{'calls/s':>9}{'SQL share':>11}")
    rows = [
        ("label_run (reads traces, writes labels)", total, cpu, calls,
         timings.get("sql", 0.0) / total),
        (f"labeller, caches off ({len(cold):,} traces)", cold_time, cold_cpu, cold_calls,
         cold_sql / cold_time),
        ("sqlglot parse+qualify of each run_sql only", floor[0] * len(sql_stmts),
         floor[1] * len(sql_stmts), len(sql_stmts), 1.0),
    ]
    for name, wall, proc, n, share in rows:
        print(f"{name:<46}{wall:>8.2f}{proc:>8.2f}{n / proc:>9.0f}{share:>10.1%}")
    print(f"  calls/s on CPU time; labelling alone (scorers, no file reading) {labelling:.2f} s wall")
    print("  breakdown (s wall): " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(
        timings.items(), key=lambda kv: -kv[1])))
    classes: dict[str, int] = {}
    for line in lines:
        classes[str(line.failure_class)] = classes.get(str(line.failure_class), 0) + 1
    print(f"  labels: correct {sum(1 for x in lines if x.correct)}, grounded "
          f"{sum(1 for x in lines if x.grounded)}; classes " +
          ", ".join(f"{k} {v}" for k, v in sorted(classes.items())) +
          f"; needs review {sum(1 for x in lines if x.needs_human_review)}")
    rate = calls / cpu
    print(f"target: at least 500 tool calls/s end to end on one core: "
          f"{'met' if rate >= 500 else 'NOT met'} ({rate:.0f} on CPU time, "
          f"{calls / total:.0f} on wall time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
