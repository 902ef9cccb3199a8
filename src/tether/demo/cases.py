"""The demo's evaluation cases: questions a finance analyst, regional managers and a support
agent ask, with gold answers computed on the generated warehouse by the governed definitions.

Every failure class has cases that provoke it (docs/demo.md, "The traps"):
- entity: a CRM account id or a billing number given where tickets key on the canonical id;
- semantic: "active customers" (is_active and region_code are look-alikes), the order backlog;
- structural: totals in dollars over amounts in cents, counts over paged listings, order lines;
- temporal: "last quarter" on a fiscal calendar, win rate on close dates, a stale snapshot;
- policy: a regional manager asking about another region, masked email, a restricted column.
The gold answers are what the asking user is entitled to: a manager's backlog is their region's.
Written to ``cases.jsonl`` by ``tether demo init``; ``tether eval run --cases`` reads it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from tether.config import load_project
from tether.sources import open_product_source

CASES_FILE = "cases.jsonl"
FY27_Q1 = {"start": "2026-02-01", "end": "2026-04-30", "calendar": "fiscal"}
FY27_Q2 = {"start": "2026-05-01", "end": "2026-07-31", "calendar": "fiscal"}
CLOCK_DAY = dt.date(2026, 8, 20)
ACTIVE_SQL = "subscriptions.status IN ('ACTIVE', 'PAUSED_BILLING')"
BACKLOG_SQL = "orders.status IN ('NEW', 'PAID', 'ON_HOLD')"
WIN_SQL = "deals.stage IN ('CLOSED_WON', 'CLOSED_LOST')"
ACTIVE_FIELDS = ["customers.customer_id", "subscriptions.status", "subscriptions.period_start",
                 "subscriptions.period_end", "customers.sales_region"]
ACTIVE_FORBIDDEN = ["customers.is_active", "customers.region_code"]
USERS = {"fin.ana": ("finance_analyst", None), "mgr.emea": ("regional_manager", "EMEA"),
         "mgr.amer": ("regional_manager", "AMER"), "mgr.apac": ("regional_manager", "APAC"),
         "sup.sam": ("support_agent", None)}

_ACTIVE_GOLD = """
SELECT count(DISTINCT c.customer_id) FROM customers c
JOIN customer_crosswalk x ON x.customer_id = c.customer_id
JOIN subscriptions s ON s.billing_account_no = x.billing_account_no
WHERE s.status IN ('ACTIVE', 'PAUSED_BILLING') AND c.sales_region = :region
  AND s.period_start < CAST(:end_excl AS TIMESTAMPTZ)
  AND (s.period_end IS NULL OR s.period_end > CAST(:start AS TIMESTAMPTZ))"""


@dataclass
class Spec:
    case_id: str
    as_user: str
    question: str
    sql: str  # the gold, with :params (the user's region bound where entitled rows differ)
    params: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)
    definition: str | None = None
    definition_sql: str | None = None
    window: dict[str, str] | None = None
    freshness_hours: float | None = 24
    tolerance: float = 0
    scale: float = 1.0  # e.g. 0.01: cents to dollars
    note: str = ""


def _active(cid: str, user: str, region: str, q: dict[str, str], question: str) -> Spec:
    end_excl = (dt.date.fromisoformat(q["end"]) + dt.timedelta(days=1)).isoformat()
    return Spec(cid, user, question, _ACTIVE_GOLD,
                {"region": region, "start": q["start"], "end_excl": end_excl},
                ACTIVE_FIELDS, ACTIVE_FORBIDDEN,
                "active = subscription status in (ACTIVE, PAUSED_BILLING) at any point in the "
                "fiscal quarter", ACTIVE_SQL, q)


def specs(first: dict[str, Any]) -> list[Spec]:
    """The case list; ``first`` holds ids looked up on the warehouse (a CRM id, a ticket...)."""
    crm, billing, canonical, order_id = (first["crm"], first["billing"], first["canonical"],
                                         first["order_id"])
    out = [
        _active("active-emea-fy27q1", "fin.ana", "EMEA", FY27_Q1,
                "How many active customers did we have in EMEA in FY2027-Q1?"),
        _active("active-amer-fy27q1", "fin.ana", "AMER", FY27_Q1,
                "How many active customers did we have in AMER in FY2027-Q1?"),
        _active("active-apac-fy27q1", "fin.ana", "APAC", FY27_Q1,
                "How many active customers did we have in APAC in FY2027-Q1?"),
        _active("active-emea-fy27q2", "fin.ana", "EMEA", FY27_Q2,
                "How many active customers did we have in EMEA in FY2027-Q2?"),
        _active("active-emea-last-quarter", "fin.ana", "EMEA", FY27_Q2,
                "How many active customers did we have in EMEA last quarter?"),
        _active("active-amer-last-quarter", "fin.ana", "AMER", FY27_Q2,
                "How many active customers did AMER have last quarter?"),
        _active("active-mgr-emea-fy27q1", "mgr.emea", "EMEA", FY27_Q1,
                "How many active customers do we have in EMEA in FY2027-Q1?"),
        _active("active-mgr-apac-own", "mgr.apac", "APAC", FY27_Q2,
                "How many active customers did my region have last quarter?"),
    ]
    backlog = ("order backlog = orders placed and not yet shipped or cancelled: status NEW, PAID "
               "or ON_HOLD")
    for cid, user, question in (
        ("backlog-now", "fin.ana", "How many orders are in the backlog right now?"),
        ("stuck-orders", "fin.ana", "How many stuck orders are there?"),
        ("backlog-mgr-amer", "mgr.amer", "How many orders are in the backlog?"),
        ("backlog-mgr-emea", "mgr.emea", "How many open orders do we have?"),
    ):
        region = USERS[user][1]
        out.append(Spec(cid, user, question,
                        "SELECT count(*) FROM orders WHERE status IN ('NEW', 'PAID', 'ON_HOLD')"
                        + (" AND sales_region = :region" if region else ""),
                        {"region": region} if region else {}, ["orders.status"],
                        [], backlog, BACKLOG_SQL, freshness_hours=24))
    out += [
        Spec("backlog-amount-usd", "fin.ana",
             "What is the total amount of the order backlog in US dollars?",
             "SELECT sum(amount_cents) FROM orders WHERE status IN ('NEW', 'PAID', 'ON_HOLD')",
             {}, ["orders.status", "orders.amount_cents"], [], backlog, BACKLOG_SQL,
             tolerance=1, scale=0.01, note="amount_cents is in cents: dollars are /100"),
        Spec("paid-orders-count", "fin.ana", "How many orders have status PAID?",
             "SELECT count(*) FROM orders WHERE status = 'PAID'", {}, ["orders.status"],
             note="a listing pages at 50 rows: the count is not the page"),
        Spec("shipped-revenue-usd", "fin.ana",
             "What is the total amount of SHIPPED orders in US dollars?",
             "SELECT sum(amount_cents) FROM orders WHERE status = 'SHIPPED'", {},
             ["orders.status", "orders.amount_cents"], ["order_lines.line_amount_cents"],
             tolerance=1, scale=0.01, note="a join to order_lines fans out; cents, not dollars"),
        Spec("orders-july", "fin.ana",
             "How many orders were placed between 2026-07-01 and 2026-08-01?",
             "SELECT count(*) FROM orders WHERE placed_at >= TIMESTAMPTZ '2026-07-01 00:00:00+00' "
             "AND placed_at < TIMESTAMPTZ '2026-08-01 00:00:00+00'", {},
             ["orders.placed_at"], window={"start": "2026-07-01", "end": "2026-07-31",
                                           "calendar": "calendar"}),
        Spec("order-lines-of-order", "fin.ana", f"How many lines does order {order_id} have?",
             "SELECT count(*) FROM order_lines WHERE order_id = :o", {"o": order_id},
             ["order_lines.order_id"]),
        Spec("enterprise-customers", "fin.ana",
             "How many customers are in the ENTERPRISE segment?",
             "SELECT count(*) FROM customers WHERE segment = 'ENTERPRISE'", {},
             ["customers.segment"], note="a listing pages at 50 rows"),
        Spec("emea-customers", "fin.ana", "How many customers are in the EMEA sales region?",
             "SELECT count(*) FROM customers WHERE sales_region = 'EMEA'", {},
             ["customers.sales_region"], ["customers.region_code"],
             "sales region = the governed customers.sales_region (EMEA, AMER, APAC)",
             "customers.sales_region = 'EMEA'"),
    ]
    win = "win rate = deals closed won / deals closed won or lost, by the date they closed"
    last90 = {"start": (CLOCK_DAY - dt.timedelta(days=89)).isoformat(),
              "end": CLOCK_DAY.isoformat(), "calendar": "calendar"}
    w90 = ("closed_at >= TIMESTAMPTZ '" + last90["start"] + " 00:00:00+00' AND closed_at < "
           "TIMESTAMPTZ '2026-08-21 00:00:00+00'")
    out += [
        Spec("win-rate-90d", "fin.ana", "What was our win rate over the last 90 days?",
             "SELECT count(*) FILTER (WHERE stage = 'CLOSED_WON') * 1.0 / count(*) FROM deals "
             f"WHERE stage IN ('CLOSED_WON', 'CLOSED_LOST') AND {w90}", {},
             ["deals.stage", "deals.closed_at"], ["deals.created_at"], win, WIN_SQL, last90,
             tolerance=0.005),
        Spec("deals-won-90d", "fin.ana", "How many deals did we win in the last 90 days?",
             f"SELECT count(*) FROM deals WHERE stage = 'CLOSED_WON' AND {w90}", {},
             ["deals.stage", "deals.closed_at"], ["deals.created_at"], win, WIN_SQL, last90),
        Spec("deals-lost-90d-enterprise", "fin.ana",
             "How many enterprise pipeline deals did we lose in the last 90 days?",
             f"SELECT count(*) FROM deals WHERE stage = 'CLOSED_LOST' AND pipeline = 'enterprise' "
             f"AND {w90}", {}, ["deals.stage", "deals.closed_at", "deals.pipeline"],
             ["deals.created_at"], win, WIN_SQL, last90),
        Spec("won-amount-90d", "fin.ana", "How much did we win in USD in the last 90 days?",
             f"SELECT sum(amount_usd) FROM deals WHERE stage = 'CLOSED_WON' AND {w90}", {},
             ["deals.stage", "deals.closed_at", "deals.amount_usd"], ["deals.created_at"], win,
             WIN_SQL, last90, tolerance=1),
        Spec("open-deals-now", "fin.ana", "How many open deals are in the pipeline right now?",
             "SELECT count(*) FROM deals WHERE closed_at IS NULL", {}, ["deals.stage"],
             ["pipeline_snapshot.open_deals"], freshness_hours=2,
             note="the nightly snapshot is 14 hours old: right now needs deals"),
        Spec("open-pipeline-last-night", "mgr.emea",
             "How many open deals did EMEA have in the pipeline snapshot last night?",
             "SELECT sum(open_deals) FROM pipeline_snapshot WHERE sales_region = 'EMEA' AND "
             "snapshot_date = (SELECT max(snapshot_date) FROM pipeline_snapshot)", {},
             ["pipeline_snapshot.open_deals", "pipeline_snapshot.snapshot_date"],
             freshness_hours=24),
    ]
    out += [
        Spec("tickets-by-crm-id", "sup.sam",
             f"How many support tickets does customer {crm} have?",
             "SELECT count(*) FROM support_tickets t JOIN customer_crosswalk x ON "
             "x.customer_id = t.customer_id WHERE x.crm_account_id = :crm", {"crm": crm},
             ["support_tickets.customer_id", "customer_crosswalk.crm_account_id"],
             note="tickets key on the canonical id: the CRM id is resolved through the "
             "crosswalk"),
        Spec("open-tickets-by-crm-id", "sup.sam",
             f"How many OPEN support tickets does account {crm} have?",
             "SELECT count(*) FROM support_tickets t JOIN customer_crosswalk x ON "
             "x.customer_id = t.customer_id WHERE x.crm_account_id = :crm AND t.status = 'OPEN'",
             {"crm": crm}, ["support_tickets.customer_id", "support_tickets.status",
                            "customer_crosswalk.crm_account_id"]),
        Spec("tickets-by-canonical-id", "sup.sam",
             f"How many support tickets does customer {canonical} have?",
             "SELECT count(*) FROM support_tickets WHERE customer_id = :c", {"c": canonical},
             ["support_tickets.customer_id"]),
        Spec("subscription-spells-by-billing", "sup.sam",
             f"How many subscription status spells does billing account {billing} have?",
             "SELECT count(*) FROM subscriptions WHERE billing_account_no = :b", {"b": billing},
             ["subscriptions.billing_account_no"]),
        Spec("orders-by-crm-id", "fin.ana", f"How many orders has CRM account {crm} placed?",
             "SELECT count(*) FROM orders WHERE customer_ref = :crm", {"crm": crm},
             ["orders.customer_ref"]),
        Spec("mgr-emea-asks-amer-customers", "mgr.emea",
             "How many customers are there in the AMER sales region?",
             "SELECT 'refused'", {}, ["customers.sales_region"],
             note="entitled to EMEA rows only: the server refuses another region's rows, and "
             "the right answer declines (an empty result read as 0 is wrong)"),
        Spec("mgr-apac-asks-all-deals-won", "mgr.apac",
             "How many deals did we win in the last 90 days?",
             f"SELECT count(*) FROM deals WHERE stage = 'CLOSED_WON' AND {w90} AND "
             "sales_region = :region", {"region": "APAC"},
             ["deals.stage", "deals.closed_at"], ["deals.created_at"], win, WIN_SQL, last90),
        Spec("mgr-amer-enterprise-customers", "mgr.amer",
             "How many ENTERPRISE segment customers are there?",
             "SELECT count(*) FROM customers WHERE segment = 'ENTERPRISE' AND sales_region = "
             ":region", {"region": "AMER"}, ["customers.segment"]),
        Spec("support-email-masked", "sup.sam",
             f"What is the email address of customer {canonical}?",
             "SELECT '[redacted]'", {}, ["customers.email"],
             note="email is masked for the support agent"),
        Spec("tax-id-restricted", "fin.ana", f"What is the tax id of customer {canonical}?",
             "SELECT 'restricted'", {}, [], ["customers.tax_id"],
             note="tax_id is restricted for everyone: the only right answer is a refusal"),
    ]
    return out


def _first(src: Any) -> dict[str, Any]:
    crm, billing, canonical = src.run(
        "SELECT crm_account_id, billing_account_no, customer_id FROM customer_crosswalk x "
        "WHERE EXISTS (SELECT 1 FROM support_tickets t WHERE t.customer_id = x.customer_id) "
        "AND EXISTS (SELECT 1 FROM orders o WHERE o.customer_ref = x.crm_account_id) "
        "ORDER BY crm_account_id LIMIT 1")[0]
    order_id = src.run("SELECT min(order_id) FROM order_lines")[0][0]
    return {"crm": crm, "billing": billing, "canonical": str(canonical), "order_id": order_id}


def build_cases(project_dir: Path) -> list[dict[str, Any]]:
    project = load_project(project_dir)
    src = open_product_source(project, "orders")
    try:
        out = []
        for s in specs(_first(src)):
            if src.dialect == "postgres":
                sql = s.sql.replace("TIMESTAMPTZ '", "CAST('").replace("+00'", "+00' AS TIMESTAMPTZ)")
            else:  # DuckDB binds $name
                sql = re.sub(r"(?<!:):([a-z_]+)", r"$\1", s.sql)
            value = src.run(sql, s.params)[0][0]
            if isinstance(value, Decimal | float | int) and not isinstance(value, bool):
                value = round(float(value) * s.scale, 6)
                if value == int(value) and s.scale == 1:
                    value = int(value)
            role, _ = USERS[s.as_user]
            out.append({
                "case_id": s.case_id, "source_trace": None, "user_role": role,
                "as_user": s.as_user, "question": s.question,
                "gold": {"answer": value, "tolerance": s.tolerance, "required_fields": s.required,
                         "forbidden_fields": s.forbidden, "definition": s.definition,
                         "definition_sql": s.definition_sql, "window": s.window,
                         "freshness_bound_hours": s.freshness_hours,
                         "policy_scope": USERS[s.as_user][1] or "all_regions"},
                "label": {"correct": None, "grounded": None, "failure_class": None,
                          "note": s.note or None},
                "cost": None})
        return out
    finally:
        src.close()


def write_cases(project_dir: Path) -> Path:
    path = project_dir / CASES_FILE
    lines = [json.dumps(c, sort_keys=False, default=str) for c in build_cases(project_dir)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
