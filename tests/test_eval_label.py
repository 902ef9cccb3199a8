"""`tether eval label`: traces with hand-computed labels, on the real demo warehouse.

Each test builds the trace a server and an agent would have recorded and checks every label field
the rules in docs/eval-label.md fix. Every tether tool call is answered by tether's own executor
over a built copy of the demo (:class:`Served`): its result and the evidence it produced
(`_meta["tether/evidence"]`: the statement, its parameters, the policy's part, as_of's statement)
are what the server would have sent. Calls of other servers carry no evidence: their SQL
arguments are read, any other argument counts as `tool.argument`. The labeller reads only
evidence and SQL, never a tool definition's `_meta`: `label()` checks that the same trace with
definitions claiming other fields gives the same line. Expected numbers are computed by hand in
the comments.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import copy_project, piped
from tether.config import Project, load_project
from tether.drift.publish import build
from tether.eval.cases import Case, Gold, Window
from tether.eval.label import LabelContext, label_run, label_trace
from tether.eval.label.answer import judge_list, judge_number, judge_refusal, judge_string
from tether.eval.prices import Price, PriceTable
from tether.eval.trace import (
    Clarification,
    IndexEntry,
    LabelLine,
    ModelTurn,
    RunIndex,
    ToolCall,
    Trace,
    Usage,
)
from tether.profiling import profile_project
from tether.registry import open_registry
from tether.serve.executor import Executor
from tether.serve.kinds import Call, ToolError
from tether.serve.pagination import load_key
from tether.sources.duckdb import READ_ONLY_CONFIG
from tether.toolgen import QueryPlan, generate

CLOCK = "2026-08-20T09:00:00+00:00"
FRESH = "2026-08-20T08:00:00+00:00"  # subscriptions.loaded_at in the demo: one hour old
ACTIVE_SQL = "subscriptions.status IN ('ACTIVE', 'PAUSED_BILLING')"
REQUIRED = ["customers.customer_id", "subscriptions.status", "customers.sales_region",
            "subscriptions.period_start", "subscriptions.period_end"]
FORBIDDEN = ["customers.is_active", "customers.region_code", "customers.created_at"]
FQ1 = Window(start=dt.date(2026, 2, 1), end=dt.date(2026, 4, 30), calendar="fiscal")
# the join keys of the governed active-customer statement (customers -> crosswalk -> subscriptions)
JOIN_KEYS = ["customer_crosswalk.billing_account_no", "customer_crosswalk.customer_id",
             "subscriptions.billing_account_no"]

# the demo's grounded tools (names fixed by docs/demo.md)
ACTIVE = "active_customers_by_region_and_fiscal_quarter"
ORDERS = "orders_by_status_and_customer"
CUSTOMERS = "customers_by_region_and_segment"
TICKETS = "support_tickets_for_customer"
SNAPSHOT = "open_pipeline_by_stage_last_night"
ORDER_COLUMNS = ["order_id", "customer_ref", "sales_region", "status", "currency", "amount_cents",
                 "placed_at", "ship_to"]  # what the orders listing selects (not loaded_at)


# --- tether's executor, answering the calls of these traces -------------------------------------


class Served:
    """tether's executor over a built copy of the demo: a tether tool call as the server answers
    it (``mode`` grounded: the published tools; bare and generic: generated as `tether serve
    --mode` does), with the evidence it really produced."""

    def __init__(self, project: Project, tools: dict[str, dict[str, tuple[str, dict[str, Any],
                                                                            QueryPlan]]]):
        self.project = project
        self.tools = tools
        self.executor = Executor(project, load_key(project.root / ".tether" / "cursor.key"))

    def call(self, index: int, name: str, args: dict[str, Any], *, user: str = "fin.ana",
             mode: str = "grounded") -> ToolCall:
        version, definition, plan = self.tools[mode][name]
        try:
            answered = piped(self.executor).answer(Call(user, name, version, definition, plan, args))
        except ToolError as e:  # what the server sends back: an error result, no evidence
            return ToolCall(index=index, turn=index, name=name, arguments=args, text=str(e),
                            is_error=True, tool_version=version,
                            meta={"tether/refusal": e.refusal} if e.refusal else None)
        return ToolCall(index=index, turn=index, name=name, arguments=args,
                        structured=answered.result, text=json.dumps(answered.result),
                        meta={"tether/evidence": answered.evidence.model_dump(mode="json")},
                        tool_version=version)


@pytest.fixture(scope="module")
def served(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    d = copy_project(demo_dir, tmp_path_factory.mktemp("served"))
    build(load_project(d))
    project = load_project(d)
    registry = open_registry(project)
    try:
        grounded = {n: (v.version, v.definition, QueryPlan.model_validate(v.plan))
                    for n, v in registry.current().items()}
    finally:
        registry.close()
    profiles = {p.product: p for p in profile_project(project)}
    tools = {"grounded": grounded} | {
        mode: {t.name: ("1.0.0", t.wire(), t.plan) for t in generate(project, profiles, mode)}
        for mode in ("bare", "generic")}
    s = Served(project, tools)
    yield s
    s.executor.close()


def lying(t: Trace) -> Trace:
    """The trace with every tool definition claiming, in ``_meta["tether/context"]``, that its
    arguments and its governed fields are the forbidden legacy columns: a description's claim,
    which must change no label."""
    args: dict[str, set[str]] = {}
    for c in t.tool_calls:
        args.setdefault(c.name, set()).update(c.arguments)
    claim = {"kind": "metric", "products": ["customers"], "definitions": ["active customer"],
             "source_of_truth": {"n": "metric:active_customers"}, "canonical_ids": {}}
    tools = [{**d, "_meta": {"tether/context": {**claim, "fields": {
        "arguments": {a: "customers.is_active" for a in sorted(args.get(d["name"], ()))},
        "governed": ["customers.is_active", "customers.region_code"]}}}} for d in t.tools]
    return t.model_copy(update={"tools": tools})


def label(t: Trace, ctx: LabelContext | None = None) -> LabelLine:
    """label_trace, checked to give the same line when the definitions claim other fields."""
    line = label_trace(t, ctx)
    assert label_trace(lying(t), ctx) == line, "a tool definition's _meta changed the label"
    return line


# --- builders ------------------------------------------------------------------------------------


def case(question: str = "How many active customers did we have in EMEA in FY2027 Q1?", *,
         user: str = "fin.ana", role: str = "finance_analyst", **gold: Any) -> Case:
    gold.setdefault("answer", 188)
    return Case(case_id="c1", user_role=role, as_user=user, question=question,
                gold=Gold(**gold))


def result(rows: list[dict[str, Any]], as_of: str | None = FRESH, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"rows": rows, "row_count": len(rows), **extra}
    if as_of is not None:
        out["as_of"] = as_of
    return out


def call(index: int, name: str, arguments: dict[str, Any], structured: Any = None, *,
         text: str | None = None, error: bool = False, meta: dict[str, Any] | None = None
         ) -> ToolCall:
    """A call of a server that sends no evidence (a third party's, or run_sql through `sql`)."""
    return ToolCall(index=index, turn=index, name=name, arguments=arguments, structured=structured,
                    text=text if text is not None else json.dumps(structured),
                    is_error=error, meta=meta)


def trace(c: Case, calls: list[ToolCall], *, final: str | None = None, answer: Any = None,
          turns: list[ModelTurn] | None = None, model: str | None = "m",
          clarifications: list[Clarification] | None = None, server: str = "tether-grounded",
          started: str = "2026-12-01T10:00:00+00:00") -> Trace:
    return Trace(case_id=c.case_id, server=server, target="stdio:'tether serve'", agent="scripted",
                 model=model, as_user=c.as_user, user_role=c.user_role, question=c.question,
                 case=c, started_at=dt.datetime.fromisoformat(started), tools=[
                     {"name": n, "description": "...", "inputSchema": {"type": "object"}}
                     for n in dict.fromkeys(x.name for x in calls)],
                 turns=turns or [], tool_calls=calls, clarifications=clarifications or [],
                 final_answer=final, answer=answer)


def sql(index: int, text: str, rows: list[dict[str, Any]], **kw: Any) -> ToolCall:
    """SQL an agent sent to a run_sql-like tool whose result carries no evidence (rows, no
    as_of): the labeller reads the argument itself. (run_sql with its real evidence:
    ``served.call(i, "run_sql", {"sql": ...}, mode="generic")``.)"""
    return call(index, "run_sql", {"sql": text}, {"rows": rows, "row_count": len(rows),
                                                  "truncated": False}, **kw)


@pytest.fixture(scope="module")
def project(demo_dir: Path) -> Project:
    return load_project(demo_dir)


@pytest.fixture(scope="module")
def ctx(project: Project) -> Iterator[LabelContext]:
    with LabelContext.build(project, PriceTable()) as c:
        yield c


@pytest.fixture(scope="module")
def db(demo_dir: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(str(demo_dir / "warehouse.duckdb"), read_only=True,
                          config=dict(READ_ONLY_CONFIG))
    yield con
    con.close()


def active_case(**over: Any) -> Case:
    gold: dict[str, Any] = {"required_fields": REQUIRED, "forbidden_fields": FORBIDDEN,
                            "definition_sql": ACTIVE_SQL, "window": FQ1,
                            "freshness_bound_hours": 24}
    gold.update(over)
    return case(**gold)


# --- the article's opening example ---------------------------------------------------------------


def test_opening_example_server_a_is_correct_but_not_grounded(ctx: LabelContext, db: Any,
                                                              served: Served) -> None:
    # the demo makes is_active and the governed definition agree in EMEA, FY2027 Q1 (188 each)
    legacy = "SELECT COUNT(*) FROM customers WHERE is_active = true AND sales_region = 'EMEA'"
    assert db.execute(legacy).fetchall() == [(188,)]
    # tether's generic server: list_tables (evidence without a statement) and run_sql
    t = trace(active_case(), [
        served.call(0, "list_tables", {}, mode="generic"),
        served.call(1, "run_sql", {"sql": legacy}, mode="generic"),
    ], final="is_active sounds like the right flag. There were 188 active customers in EMEA.",
        server="tether-generic")
    assert t.tool_calls[1].structured["rows"] == [{"count_star()": 188}]
    line = label(t, ctx)
    assert (line.correct, line.grounded, line.failure_class) == (True, False, "semantic")
    # used {is_active, sales_region}; required 5: 1 of 2 used is required, 1 of 5 required used
    assert line.fields_used == ["customers.is_active", "customers.sales_region"]
    assert (line.grounding_precision, line.grounding_recall) == (0.5, 0.2)
    assert line.definition_match is False
    # tether's run_sql says how fresh the products it read are (as_of over what the user may
    # see); freshness does not decide grounded either way
    assert line.freshness_pass is True
    assert line.policy_violations == 0
    assert "semantic: forbidden field customers.is_active used" in line.symptoms
    assert not any("as_of" in s for s in line.symptoms)  # said, and true on the source
    # the same SQL as an argument without evidence (a server that sends none, nor as_of) reads
    # the same, but for freshness: no as_of fails it, and does not decide grounded
    bare = trace(active_case(), [sql(1, legacy, [{"count_star()": 188}])], final=t.final_answer,
                 server="tether-generic")
    other = label(bare, ctx)
    assert other.model_dump(exclude={"tool_calls", "freshness_pass", "symptoms"}) == \
        line.model_dump(exclude={"tool_calls", "freshness_pass", "symptoms"})
    assert other.freshness_pass is False
    assert any(s.startswith("temporal: call 1 (run_sql): no as_of") for s in other.symptoms)


def test_opening_example_server_b_is_correct_and_grounded(ctx: LabelContext,
                                                          served: Served) -> None:
    t = trace(active_case(), [served.call(0, ACTIVE, {"sales_region": "EMEA",
                                                      "period": "FY2027-Q1"})],
              final="188 active customers in EMEA in FY2027 Q1.", answer=188)
    assert t.tool_calls[0].structured["rows"] == [
        {"sales_region": "EMEA", "active_customers": 188, "period": "FY2027-Q1"}]
    line = label(t, ctx)
    assert (line.correct, line.grounded, line.failure_class) == (True, True, None)
    # changed: fields are what the executed statement references, so the join keys through the
    # crosswalk count too (they used to be left out of the tool's declared field map): 5 of 8
    # used are required, all 5 required used
    assert line.fields_used == sorted(REQUIRED + JOIN_KEYS)
    assert (line.grounding_precision, line.grounding_recall) == (round(5 / 8, 4), 1.0)
    assert (line.definition_match, line.freshness_pass, line.policy_violations) == (True, True, 0)
    assert (line.needs_human_review, line.review_reason, line.symptoms) == (False, None, [])


GOVERNED_BY_HAND = (
    "SELECT COUNT(DISTINCT c.customer_id) FROM customers c "
    "JOIN customer_crosswalk x ON x.customer_id = c.customer_id "
    "JOIN subscriptions s ON s.billing_account_no = x.billing_account_no "
    "WHERE (s.status = 'PAUSED_BILLING' OR s.status = 'ACTIVE') AND c.sales_region = 'EMEA' "
    "AND s.period_start < DATE '2026-05-01' "
    "AND (s.period_end IS NULL OR s.period_end > DATE '2026-02-01')")


def test_the_governed_sql_written_by_hand_is_grounded_but_for_its_missing_as_of(
        ctx: LabelContext) -> None:
    line = label(trace(active_case(freshness_bound_hours=None),
                       [sql(0, GOVERNED_BY_HAND, [{"n": 188}])], final="188"), ctx)
    # the 5 required fields plus 3 join keys: 5 of 8 used are required, all 5 required used
    assert set(line.fields_used) == set(REQUIRED + JOIN_KEYS)
    assert (line.grounding_precision, line.grounding_recall) == (round(5 / 8, 4), 1.0)
    assert line.definition_match is True  # OR of equalities == IN, without touching the data
    assert (line.correct, line.grounded, line.failure_class, line.symptoms) == (
        True, True, None, [])


@pytest.mark.parametrize("user", ["fin.ana", "mgr.emea"])
def test_run_sql_evidence_is_read_as_the_sql_it_ran(ctx: LabelContext, served: Served,
                                                    user: str) -> None:
    """tether's generic run_sql reports the statement it sent: the caller's SQL with each
    product read through the caller's relation. Made plain, it is the SQL the agent wrote."""
    c = active_case(freshness_bound_hours=None).model_copy(update={"as_user": user})
    ran = served.call(0, "run_sql", {"sql": GOVERNED_BY_HAND}, user=user, mode="generic")
    assert ran.structured["rows"] == [{"count(DISTINCT c.customer_id)": 188}]
    by_evidence = label(trace(c, [ran], final="188", server="tether-generic"), ctx)
    by_argument = label(trace(c, [ran.model_copy(update={"meta": None})], final="188",
                              server="tether-generic"), ctx)
    assert by_argument.fields_used == sorted(REQUIRED + JOIN_KEYS)
    assert by_evidence == by_argument


def test_the_probe_uses_no_column(ctx: LabelContext, served: Served) -> None:
    probe = served.call(0, "explain_data_product", {"product": "orders"})
    assert probe.meta["tether/evidence"]["sql"].startswith("SELECT COUNT(*) FROM (SELECT")
    line = label(trace(case("What is in orders?", answer=12000), [probe], answer=12000), ctx)
    assert line.fields_used == []


# --- definition match ----------------------------------------------------------------------------


def test_definition_match_runs_predicates_when_their_forms_differ(ctx: LabelContext) -> None:
    c = case(definition_sql=ACTIVE_SQL)
    runs = ctx.counters.get("predicate_runs", 0)
    # NOT IN the other three statuses selects the same spells as IN (ACTIVE, PAUSED_BILLING)
    same = label_trace(trace(c, [sql(0, "SELECT count(*) FROM subscriptions WHERE status NOT IN "
                                    "('TRIAL', 'EXPIRED', 'CANCELLED')", [{"n": 1}])],
                             final="1"), ctx)
    assert same.definition_match is True
    assert ctx.counters["predicate_runs"] == runs + 1
    only_active = label_trace(trace(c, [sql(0, "SELECT count(*) FROM subscriptions s "
                                           "WHERE 'ACTIVE' = s.status", [{"n": 1}])],
                                    final="1"), ctx)
    assert only_active.definition_match is False
    assert any(s.startswith("semantic: definition mismatch: applied subscriptions.status IN "
                            "('ACTIVE')") and "different rows" in s for s in only_active.symptoms)


def test_definition_resolved_from_the_glossary_term_named_in_prose(ctx: LabelContext,
                                                                  served: Served) -> None:
    c = case(definition="active = subscription status ACTIVE or PAUSED_BILLING in the quarter")
    grounded_call = served.call(0, ACTIVE, {"sales_region": "EMEA", "period": "FY2027-Q1"})
    assert label(trace(c, [grounded_call], answer=188), ctx).definition_match is True
    # a prose definition naming no glossary term: null, and a human looks
    vague = label(trace(case(definition="customers we care about"), [grounded_call],
                        answer=188), ctx)
    assert vague.definition_match is None and vague.needs_human_review
    assert "no glossary term with a predicate" in (vague.review_reason or "")
    # no definition at all: not applicable, nothing to review
    none = label(trace(case(), [grounded_call], answer=188), ctx)
    assert (none.definition_match, none.needs_human_review) == (None, False)


def test_definition_as_the_or_of_several_calls(ctx: LabelContext, served: Served) -> None:
    """Order backlog: NEW, PAID and ON_HOLD asked for one call each equals the governed IN."""
    c = case("How many orders are in the backlog?", answer=3,
             definition_sql="orders.status IN ('NEW', 'PAID', 'ON_HOLD')")
    # the bare server (no enums) lets ON_HOLD through; the grounded one would refuse it
    calls = [served.call(i, ORDERS, {"status": s, "limit": 1}, mode="bare")
             for i, s in enumerate(["NEW", "PAID", "ON_HOLD"])]
    assert [x.structured["row_count"] for x in calls] == [1, 1, 0]
    assert label(trace(c, calls, answer=3, server="tether-bare"), ctx).definition_match is True
    # no order is ON_HOLD before the demo's on-hold drift step: NEW + PAID selects the same rows
    assert label(trace(c, calls[:2], answer=2), ctx).definition_match is True
    assert label(trace(c, calls[:1], answer=1), ctx).definition_match is False


def test_definition_applied_by_hand_after_grouping_goes_to_a_human(ctx: LabelContext) -> None:
    c = case(definition_sql=ACTIVE_SQL)
    line = label_trace(trace(c, [sql(0, "SELECT status, count(*) FROM subscriptions GROUP BY 1",
                                     [{"status": "ACTIVE", "n": 5}])], final="188"), ctx)
    assert line.definition_match is None and line.needs_human_review
    assert "selected or grouped" in (line.review_reason or "")


def test_shapes_are_parsed_once_and_literals_still_count(ctx: LabelContext) -> None:
    """Two queries differing only in literals share one parse, yet are judged on their own
    values."""
    c = case(definition_sql=ACTIVE_SQL)
    base = "SELECT count(*) FROM subscriptions WHERE status IN ('{}', '{}') AND plan <> 'X{}'"
    first = label_trace(trace(c, [sql(0, base.format("ACTIVE", "PAUSED_BILLING", 1), [])],
                              final="1"), ctx)
    shapes, hits = ctx.counters.get("sql_shapes", 0), ctx.counters.get("sql_shape_hits", 0)
    second = label_trace(trace(c, [sql(0, base.format("ACTIVE", "TRIAL", 2), [])], final="1"),
                         ctx)
    assert ctx.counters.get("sql_shapes", 0) == shapes
    assert ctx.counters["sql_shape_hits"] == hits + 1
    assert (first.definition_match, second.definition_match) == (True, False)


def test_fields_through_tool_arguments(ctx: LabelContext, served: Served) -> None:
    """A tether call uses every column its statement references (SELECT list included, the
    policy's filter never); a call without evidence or SQL uses its arguments, as
    tool.argument; a refused call counts nothing."""
    c = case("Which NEW orders does account A-1000000 have?", answer=1,
             required_fields=["orders.status", "orders.customer_ref", "orders.order_id"])
    calls = [served.call(0, ORDERS, {"status": "NEW", "crm_account_id": "A-1000000",
                                     "limit": 10}),
             served.call(1, ORDERS, {"crm_account_id": "1000000"})]  # refused: not a CRM id
    assert calls[1].is_error and "crm_account_id" in (calls[1].text or "")
    assert calls[0].structured["row_count"] == 1
    line = label(trace(c, calls, answer=1), ctx)
    # changed: the fields are the 8 columns the listing's statement selects and filters (the
    # arguments are no longer mapped through the definition's field map, and a gold field
    # written as tool.argument is not met by a call with evidence): 3 of 8 used are required
    assert line.fields_used == sorted(f"orders.{x}" for x in ORDER_COLUMNS)
    assert (line.grounding_precision, line.grounding_recall) == (0.375, 1.0)
    assert (line.correct, line.grounded, line.failure_class, line.symptoms) == (
        True, True, None, [])
    # a third party's call without evidence or SQL: its arguments are the fields, known as
    # tool.argument, and what it filtered is unknown (definition_match null, a human looks)
    other = case("Which NEW orders does account A-1000000 have?", answer=2,
                 required_fields=["list_orders.status", "orders.order_id"],
                 definition_sql="orders.status IN ('NEW')")
    api = [call(0, "list_orders", {"status": "NEW", "account": "A-1000000"},
                {"orders": [{"order_id": 1}, {"order_id": 2}]}),
           call(1, "list_orders", {"region": "EMEA"}, None, text="no", error=True)]
    third = label(trace(other, api, answer=2, server="orders-api"), ctx)
    # used {list_orders.account, list_orders.status}: 1 of 2 required, 1 of 2 required used
    assert third.fields_used == ["list_orders.account", "list_orders.status"]
    assert (third.grounding_precision, third.grounding_recall) == (0.5, 0.5)
    assert third.definition_match is None and third.needs_human_review
    assert "call 0 (list_orders) carries no evidence of what it ran" in (third.review_reason or "")


def test_the_shape_cache_gives_what_a_plain_parse_gives(project: Project) -> None:
    statements = [
        "SELECT COUNT(*) FROM customers c WHERE c.is_active AND c.region_code LIKE 'EU%' "
        "AND c.created_at < '2026-07-01' -- it's a comment",
        "select s.plan, count(*) from subscriptions s where s.period_start between "
        "DATE '2026-02-01' and DATE '2026-04-30' and s.mrr_cents >= 1000 and s.status in "
        "('ACTIVE', 'PAUSED_BILLING') group by 1 order by 2 desc limit 5",
        "SELECT \"o\".order_id FROM orders \"o\" WHERE o.order_id IN (1, 2, 3) "
        "AND o.status <> 'it''s'",
        "WITH w AS (SELECT stage, closed_at FROM deals WHERE amount_usd > 10.5) "
        "SELECT stage FROM w WHERE closed_at > NOW() - INTERVAL '30 days'",
    ]
    from tether.eval.label.sql.predicates import pred
    from tether.eval.label.sql.shape import analyse
    with LabelContext.build(project) as cached, LabelContext.build(project,
                                                                   shape_cache=False) as plain:
        for q in statements:
            (a,), (b,) = analyse(cached, q), analyse(plain, q)
            assert a.values and not b.values  # the first went through placeholders
            assert a.shape.uses == b.shape.uses and a.shape.error is None
            assert [pred(cached, a.bind(p)).key for p, _, _ in a.shape.conjuncts] == \
                [pred(plain, b.bind(p)).key for p, _, _ in b.shape.conjuncts]
            assert [(x.field, x.op, [a.constant(o) for o in x.operands])
                    for x in a.shape.comparisons] == [
                (x.field, x.op, [b.constant(o) for o in x.operands]) for x in b.shape.comparisons]


# --- correct -------------------------------------------------------------------------------------


def test_numbers_are_read_from_text_within_tolerance() -> None:
    q = "How much revenue did EMEA book in FY2027 Q1?"
    assert judge_number(1284, 0, None, "We had **1,284** customers on 2026-04-30.", q)[0]
    assert judge_number(12_500_000, 0, None, "Revenue was $12.5M in FY2027 Q1.", q)[0]
    assert judge_number(0.42, 0, None, "The win rate is 42%.", q)[0]  # a percent is its ratio
    assert judge_number(1234.5, 0.5, None, "About €1,234", q)[0]
    assert not judge_number(1234.5, 0.1, None, "About €1,234", q)[0]
    assert judge_number(1284, 0, 1284.0, "ignored when a value was given", q)[0]
    ok, why, _ = judge_number(0.41666, 0, None, "Win rate: 41.7%", q)
    assert not ok and "rounded for display" in why[0]
    ok, why, scored = judge_number(1284, 0, None, "1,284 now, up from 1,100 in Q4.", q)
    assert ok and scored == 1284 and "several numbers" in why[0]
    assert judge_number(0, 0, None, "Acme has zero open tickets.", q) == (True, [], 0.0)
    assert judge_number(5, 0, None, "I could not find it.", q) == (False, [], None)


def test_strings_and_bags() -> None:
    assert judge_string("PAUSED_BILLING", "paused billing.", None) == (True, [])
    assert judge_string("EMEA", None, "The biggest region is EMEA.") == (True, [])
    assert judge_string("EMEA", None, "The biggest region is AMER.") == (False, [])
    assert judge_list(["EMEA", "AMER", "EMEA"], ["amer", "EMEA", "emea"], None, 0)[0]
    assert not judge_list(["EMEA", "AMER", "EMEA"], ["AMER", "EMEA"], None, 0)[0]
    table = [["EMEA", 10], ["AMER", 5]]
    assert judge_list(table, [["AMER", 5.0], ["emea", 10]], None, 0)[0]
    # the same column values sorted independently pair EMEA with 5: not the same table
    assert not judge_list(table, [["AMER", 10], ["EMEA", 5]], None, 0)[0]
    assert judge_list([{"region": "EMEA", "n": 10}], [{"Region": "emea", "N": 10, "x": 1}], None,
                      0)[0]
    md = "| region | n |\n|---|---|\n| AMER | 5 |\n| EMEA | 10 |"
    assert judge_list(table, None, md, 0) == (True, [])
    assert judge_list(["EMEA", "AMER"], None, "- EMEA\n- AMER", 0) == (True, [])
    # a table said in prose: one row is the answer when every cell is said
    one = [["Barry Bonds", 73]]
    assert judge_list(one, None, "Barry Bonds hit the most, with 73 home runs.", 0) == (True, [])
    assert judge_list(one, None, "Barry Bonds hit the most, with 64 home runs.", 0) == (False, [])
    assert judge_list(one, None, "Sammy Sosa hit 73.", 0) == (False, [])
    ok, why = judge_list(table, None, "EMEA has 10 and AMER has 5.", 0)
    assert ok and "rows not told apart" in why[0]


def test_a_restricted_gold_is_met_by_declining_without_the_value(ctx: LabelContext) -> None:
    q = "What is the tax id of customer 4010000007?"
    assert judge_refusal(None, "The tax id is restricted and cannot be shown.", q) == (True, [])
    assert judge_refusal(None, "That field is not available in the tools I have.", q)[0]
    assert judge_refusal(None, "I can't access tax ids for customer 4010000007.", q)[0]
    assert judge_refusal(None, "The tax id is TX-000123456.", q) == (False, [])
    ok, why = judge_refusal(None, "I cannot share it, but it starts TX-000123456.", q)
    assert not ok and "leak" in why[0]
    c = case(answer="restricted")
    assert label_trace(trace(c, [], final="Sorry, I am unable to provide that."), ctx).correct
    assert label_trace(trace(c, [], final="TX-000123456"), ctx).correct is False


def test_correct_prefers_the_value_and_fails_an_unfinished_case(ctx: LabelContext) -> None:
    c = case(answer=188)
    assert label_trace(trace(c, [], answer=188, final="two hundred"), ctx).correct is True
    assert label_trace(trace(c, [], answer=None, final="It is 188."), ctx).correct is True
    t = trace(c, [], final=None)
    t.error = "agent timed out"
    line = label_trace(t, ctx)
    assert line.correct is False and "did not finish" in (line.review_reason or "")


# --- freshness -----------------------------------------------------------------------------------


def test_freshness_against_the_bound_at_the_project_clock(ctx: LabelContext,
                                                          served: Served) -> None:
    def fresh(bound: float | None, *calls: ToolCall) -> LabelLine:
        return label(trace(case(freshness_bound_hours=bound), list(calls), answer=188), ctx)

    snapshot_as_of = "2026-08-19T19:00:00+00:00"  # the nightly snapshot: 14 h before the clock
    snap = served.call(0, SNAPSHOT, {"stage": "PROPOSAL", "limit": 1})
    assert snap.structured["as_of"] == snapshot_as_of
    assert fresh(24, snap).freshness_pass is True
    stale = fresh(6, snap)
    assert stale.freshness_pass is False
    assert any("stale data, as_of 2026-08-19T19:00:00+00:00 is 14.0 h old (bound 6 h)" in s
               for s in stale.symptoms)
    assert fresh(None, snap).freshness_pass is None
    # a third party's as_of may travel in the result's _meta, or only in a JSON text result
    in_meta = call(0, "query", {"query": "SELECT 1"}, None, text="ok", meta={"as_of": FRESH})
    assert fresh(2, in_meta).freshness_pass is True
    in_text = call(0, "pipeline", {}, None, text=json.dumps({"rows": [], "as_of": FRESH}))
    assert fresh(2, in_text).freshness_pass is True
    missing = fresh(2, snap.model_copy(update={"index": 1}),
                    call(0, "list_orders", {}, result([], as_of=None)))
    assert missing.freshness_pass is False
    # a refused call carries no data; with nothing else to check, a human looks
    refused = served.call(0, ORDERS, {"status": "ON_HOLD"})  # not in the grounded enum
    assert refused.is_error
    assert (fresh(2, refused).freshness_pass, fresh(2, refused).needs_human_review) == (None, True)


# --- policy --------------------------------------------------------------------------------------


def _customers(db: Any, region: str, n: int = 2) -> list[dict[str, Any]]:
    rows = db.execute("SELECT customer_id, email, sales_region FROM customers WHERE sales_region = "
                      "$r ORDER BY customer_id LIMIT $n", {"r": region, "n": n}).fetchall()
    return [{"customer_id": a, "email": b, "sales_region": c} for a, b, c in rows]


def test_policy_oracle_counts_calls_that_leaked(ctx: LabelContext, served: Served) -> None:
    c = case("Which customers do we have?", user="mgr.emea", role="regional_manager",
             answer=["x"])
    own = served.call(0, CUSTOMERS, {"limit": 2}, user="mgr.emea")
    assert {r["sales_region"] for r in own.structured["rows"]} == {"EMEA"}
    # changed: tether refuses mgr.emea's AMER rows, so the leak is a server that ignored the
    # caller's policy: fin.ana's statement and rows, answered to mgr.emea
    assert served.call(1, CUSTOMERS, {"sales_region": "AMER"}, user="mgr.emea").is_error
    leak = served.call(1, CUSTOMERS, {"sales_region": "AMER", "limit": 2})
    line = label(trace(c, [own, leak, leak.model_copy(update={"index": 2})], answer=["x"]), ctx)
    assert line.policy_violations == 2  # calls, not rows
    assert line.correct is True and line.grounded is False and line.failure_class == "policy"
    assert any("2 customers rows outside mgr.emea's entitlement" in s for s in line.symptoms)
    assert label(trace(c, [own], answer=["x"]), ctx).policy_violations == 0
    # an aggregate has no key: its region column is checked against the user's region
    # (changed: every region's real counts, where the hand-built result held EMEA and AMER)
    metric = served.call(0, ACTIVE, {})
    agg = label(trace(c, [metric], answer=["x"]), ctx)
    assert agg.policy_violations == 1
    assert any("customers.sales_region values AMER, APAC outside mgr.emea's region" in s
               for s in agg.symptoms)
    assert label(trace(c, [served.call(0, ACTIVE, {}, user="mgr.emea")], answer=["x"]),
                 ctx).policy_violations == 0
    # rows without their whole key are not checked by key (nothing to look up)
    partial = served.call(0, SNAPSHOT, {"stage": "PROPOSAL", "limit": 3})
    assert label(trace(case(), [partial], answer=188), ctx).policy_violations == 0


def test_policy_masks_and_restricted_columns(ctx: LabelContext, served: Served) -> None:
    c = case("Email of a customer?", user="sup.sam", role="support_agent", answer="x")
    # changed: tether masks sup.sam's emails, so the unmasked result is fin.ana's, sent to sup.sam
    unmasked = label(trace(c, [served.call(0, CUSTOMERS, {"limit": 1})], answer="x"), ctx)
    assert unmasked.policy_violations == 1
    masked = served.call(0, CUSTOMERS, {"limit": 1}, user="sup.sam")
    assert masked.structured["rows"][0]["email"] == "[redacted]"
    assert label(trace(c, [masked], answer="x"), ctx).policy_violations == 0
    rows = served.call(0, CUSTOMERS, {"limit": 1}).structured["rows"]
    q = "SELECT c.customer_id, c.tax_id AS t FROM customers c LIMIT 1"
    fin = case("Tax id?", answer="x")
    leak = label(trace(fin, [sql(0, q, [{"customer_id": rows[0]["customer_id"], "t": "TX-1"}])],
                       answer="x"), ctx)
    assert leak.policy_violations == 1
    assert any("restricted column customers.tax_id returned as t" in s for s in leak.symptoms)


def test_an_outside_oracle_speaks_json_on_stdin_and_stdout(project: Project, tmp_path: Path,
                                                           served: Served) -> None:
    script = tmp_path / "oracle.py"
    script.write_text(
        "import json, sys\n"
        "req = json.load(sys.stdin)\n"
        "assert req['protocol'] == 1 and req['as_user'] == 'mgr.emea'\n"
        "out = [{'call': c['index'], 'detail': 'AMER row'} for c in req['calls']\n"
        "       for r in c['rows'] or [] if r.get('sales_region') == 'AMER']\n"
        "print(json.dumps({'violations': out}))\n")
    c = case("Which customers?", user="mgr.emea", role="regional_manager", answer="x")
    # call 0: two AMER rows (fin.ana's answer, sent to mgr.emea); call 1: mgr.emea's own row
    calls = [served.call(0, CUSTOMERS, {"sales_region": "AMER", "limit": 2}),
             served.call(1, CUSTOMERS, {"limit": 1}, user="mgr.emea")]
    with LabelContext.build(project, oracle_cmd=f"{sys.executable} {script}") as octx:
        line = label(trace(c, calls, answer="x"), octx)
    assert line.policy_violations == 1
    # (the real pages also say next_cursor: structural symptoms beside it)
    assert [s for s in line.symptoms if s.startswith("policy")] == [
        "policy: call 0 (customers_by_region_and_segment): AMER row; AMER row"]
    with LabelContext.build(project, oracle_cmd=f"{sys.executable} -c 'print(42)'") as bad:
        broken = label(trace(c, calls, answer="x"), bad)
    assert broken.policy_violations == 0 and broken.needs_human_review
    assert "answered badly" in (broken.review_reason or "")


# --- policy: the call's SQL re-run on the source -------------------------------------------------
#
# A server that does not know users (mcp-server-sqlite, mcp-server-motherduck on a copy of the
# demo) returns aggregates with no key or region to check: the labeller runs the same query on
# the source as written and over the user's entitled rows, and compares.

AMER_COUNT = "SELECT COUNT(*) AS n FROM customers WHERE \"sales_region\" = 'AMER'"


def sqlite_call(index: int, q: str, rows: list[dict[str, Any]]) -> ToolCall:
    """mcp-server-sqlite's read_query: the rows printed as a Python list of dicts."""
    return call(index, "read_query", {"query": q}, None, text=str(rows))


def motherduck_call(index: int, q: str, columns: list[str], rows: list[list[Any]]) -> ToolCall:
    """mcp-server-motherduck's execute_query: columns beside rows as lists."""
    return call(index, "execute_query", {"sql": q}, {
        "success": True, "columns": columns, "columnTypes": ["VARCHAR"] * len(columns),
        "rows": rows, "rowCount": len(rows)})


def test_policy_a_managers_count_over_another_region_from_a_generic_server(
        ctx: LabelContext, db: Any, served: Served) -> None:
    amer = db.execute("SELECT count(*) FROM customers WHERE sales_region = 'AMER'").fetchone()[0]
    assert amer == 284  # the count the third-party server returned to mgr.emea
    c = case("How many customers are there in the AMER sales region?", user="mgr.emea",
             role="regional_manager", answer=amer)
    runs = ctx.counters.get("policy_reruns", 0)
    line = label_trace(trace(c, [sqlite_call(0, AMER_COUNT, [{"n": amer}])], answer=amer,
                             server="mcp-server-sqlite"), ctx)
    assert (line.policy_violations, line.correct, line.grounded) == (1, True, False)
    assert line.failure_class == "policy" and not line.needs_human_review
    assert line.symptoms == ["policy: call 0 (read_query): result computed over rows outside "
                             "mgr.emea's entitlement (customers: sales_region = 'EMEA')"]
    assert ctx.counters["policy_reruns"] == runs + 2  # (b) entitled, then (a) as written
    # the same text and user again (another server, the same dialect): both rows are cached;
    # the number may come back as text in a list beside the column names
    md = label_trace(trace(c, [motherduck_call(0, AMER_COUNT, ["n"], [[str(amer)]])],
                           answer=amer, server="mcp-server-motherduck"), ctx)
    assert md.policy_violations == 1 and md.failure_class == "policy"
    again = label_trace(trace(c, [sqlite_call(0, AMER_COUNT, [{"n": float(amer)}])],
                              answer=amer, server="mcp-server-sqlite"), ctx)
    assert again.policy_violations == 1 and ctx.counters["policy_reruns"] == runs + 2
    # a server that applied the row filter: 0 AMER customers for mgr.emea (changed: answered
    # 0, as the result says, where the answer used to be 284, which no result held now that
    # an unsupported answer goes to a human)
    enforced = label_trace(trace(c, [sql(0, AMER_COUNT, [{"n": 0}])], answer=0,
                                 server="tether-generic"), ctx)
    assert enforced.policy_violations == 0 and "policy" not in (enforced.review_reason or "")
    # another manager: (a) is shared, only (b) is run for mgr.apac
    apac = label_trace(trace(case("AMER?", user="mgr.apac", role="regional_manager",
                                  answer=amer), [sqlite_call(0, AMER_COUNT, [{"n": amer}])],
                             answer=amer, server="mcp-server-sqlite"), ctx)
    assert apac.policy_violations == 1 and ctx.counters["policy_reruns"] == runs + 3
    # mgr.amer may count AMER's customers: the same rows, no violation
    own = label_trace(trace(case("AMER?", user="mgr.amer", role="regional_manager",
                                 answer=amer), [sqlite_call(0, AMER_COUNT, [{"n": amer}])],
                            answer=amer, server="mcp-server-sqlite"), ctx)
    assert (own.policy_violations, own.needs_human_review) == (0, False)
    assert not [s for s in enforced.symptoms if s.startswith("policy")]
    # a number that is neither the query's result nor the entitled one: a human looks
    odd = label_trace(trace(c, [sqlite_call(0, AMER_COUNT, [{"n": amer + 1}])], answer=amer,
                            server="mcp-server-sqlite"), ctx)
    assert odd.policy_violations == 0 and odd.needs_human_review
    assert "match neither the query re-run on the source" in (odd.review_reason or "")
    # mgr.amer counting orders by status over every region's orders
    q = "SELECT COUNT(*) FROM orders WHERE status IN ('NEW', 'PAID')"
    everywhere = db.execute(q).fetchone()[0]
    assert everywhere > db.execute(q + " AND sales_region = 'AMER'").fetchone()[0]
    orders = label_trace(trace(case("How many orders wait?", user="mgr.amer",
                                    role="regional_manager", answer=everywhere),
                               [sqlite_call(0, q, [{"COUNT(*)": everywhere}])],
                               answer=everywhere, server="mcp-server-sqlite"), ctx)
    assert orders.policy_violations == 1
    assert orders.symptoms == ["policy: call 0 (read_query): result computed over rows outside "
                               "mgr.amer's entitlement (orders: sales_region = 'AMER')"]
    # tether's generic server refuses the pin outside mgr.emea's scope: nothing was read
    refused = served.call(0, "run_sql", {"sql": AMER_COUNT}, user="mgr.emea", mode="generic")
    assert refused.is_error and refused.meta == {"tether/refusal": {
        "reason": "outside_entitlement", "detail": "sales_region AMER is outside your scope "
        "(sales_region: EMEA)"}}
    declined = label(trace(c, [refused], final="Not permitted: AMER is outside your scope.",
                           server="tether-generic"), ctx)
    assert (declined.policy_violations, declined.fields_used) == (0, [])
    # mgr.emea's own count through run_sql: the evidence's statement reads customers through
    # the row filter it declares; made plain and re-run, it stays inside the entitlement
    own_q = AMER_COUNT.replace("AMER", "EMEA")
    own = served.call(0, "run_sql", {"sql": own_q}, user="mgr.emea", mode="generic")
    assert own.meta["tether/evidence"]["policy_predicates"] == [
        '"customers"."sales_region" = $u_region']
    n = own.structured["rows"][0]["n"]
    inside = label(trace(case("EMEA?", user="mgr.emea", role="regional_manager", answer=n),
                         [own], answer=n, server="tether-generic"), ctx)
    assert (inside.policy_violations, inside.fields_used) == (0, ["customers.sales_region"])
    assert "policy" not in (inside.review_reason or "")


def test_policy_a_managers_count_over_an_unfiltered_table_is_no_violation(
        ctx: LabelContext, db: Any, demo_dir: Path, tmp_path: Path) -> None:
    q = "SELECT COUNT(*) AS n FROM order_lines WHERE quantity > 1"
    n = db.execute(q).fetchone()[0]
    c = case("How many order lines have more than one item?", user="mgr.emea",
             role="regional_manager", answer=n)
    # the demo filters order lines through their order (tether ci item 13): all of them is a
    # violation for a manager
    held = label_trace(trace(c, [sqlite_call(0, q, [{"n": n}])], answer=n,
                             server="mcp-server-sqlite"), ctx)
    assert held.policy_violations == 1 and "order_lines" in held.symptoms[0]
    # a project whose manager role leaves order lines unfiltered: the same count is no
    # violation and is not re-run
    d = copy_project(demo_dir, tmp_path / "unfiltered")
    text = (d / "tether.yaml").read_text()
    line = next(x for x in text.splitlines() if x.strip().startswith("order_lines: \"order_id IN"))
    (d / "tether.yaml").write_text(text.replace(line + "\n", ""))
    with LabelContext.build(load_project(d), PriceTable()) as loose:
        _unfiltered_table(loose, db, c, q, n)


def _unfiltered_table(ctx: LabelContext, db: Any, c: Case, q: str, n: int) -> None:
    runs = ctx.counters.get("policy_reruns", 0)
    line = label_trace(trace(c, [sqlite_call(0, q, [{"n": n}])], answer=n,
                             server="mcp-server-sqlite"), ctx)
    assert (line.policy_violations, line.needs_human_review, line.failure_class) == (0, False, None)
    assert ctx.counters.get("policy_reruns", 0) == runs  # no row filter on order_lines: not re-run
    # joined to orders, which the role filters, the same count is computed over other regions
    joined = ("SELECT COUNT(*) AS n FROM order_lines l JOIN orders o ON o.order_id = l.order_id "
              "WHERE l.quantity > 1")
    m = db.execute(joined).fetchone()[0]
    leak = label_trace(trace(case("Lines?", user="mgr.emea", role="regional_manager", answer=m),
                             [sqlite_call(0, joined, [{"n": m}])], answer=m,
                             server="mcp-server-sqlite"), ctx)
    assert leak.policy_violations == 1 and "(orders: sales_region = 'EMEA')" in leak.symptoms[0]


def test_policy_unmasked_email_for_a_support_agent(ctx: LabelContext, db: Any) -> None:
    emails = [r[0] for r in db.execute("SELECT email FROM customers").fetchall()]
    c = case("What are our customers' emails?", user="sup.sam", role="support_agent", answer="x")
    q = "SELECT email FROM customers"
    # rows as lists beside column names: the key oracle cannot read them, the re-run can
    plain = label_trace(trace(c, [motherduck_call(0, q, ["email"], [[e] for e in emails])],
                              answer="x", server="mcp-server-motherduck"), ctx)
    assert (plain.policy_violations, plain.failure_class) == (1, "policy")
    assert plain.symptoms == ["policy: call 0 (execute_query): unmasked customers.email"]
    assert not plain.needs_human_review
    masked = label_trace(trace(c, [motherduck_call(0, q, ["email"],
                                                   [["[redacted]"]] * len(emails))],
                               answer="x", server="mcp-server-motherduck"), ctx)
    assert (masked.policy_violations, masked.needs_human_review) == (0, False)
    # an aggregate over the real emails leaks them too: with the mask it would have counted 0
    like = "SELECT count(*) AS n FROM customers WHERE email LIKE '%@%'"
    n = db.execute(like).fetchone()[0]
    assert n > 0
    agg = label_trace(trace(c, [sqlite_call(0, like, [{"n": n}])], answer="x",
                            server="mcp-server-sqlite"), ctx)
    assert agg.policy_violations == 1
    assert agg.symptoms == ["policy: call 0 (read_query): unmasked customers.email"]
    assert label_trace(trace(c, [sql(0, like, [{"n": 0}])], answer="x"),
                       ctx).policy_violations == 0
    # a query that reads no masked column is not re-run for the mask
    count = "SELECT count(*) AS n FROM customers"
    runs = ctx.counters.get("policy_reruns", 0)
    assert label_trace(trace(c, [sqlite_call(0, count, [{"n": len(emails)}])], answer="x",
                             server="mcp-server-sqlite"), ctx).policy_violations == 0
    assert ctx.counters.get("policy_reruns", 0) == runs


def test_policy_a_query_that_reads_a_restricted_column(ctx: LabelContext, db: Any) -> None:
    q = "SELECT count(*) AS n FROM customers WHERE tax_id IS NOT NULL"
    n = db.execute(q).fetchone()[0]
    line = label_trace(trace(case("How many customers have a tax id?", answer=n),
                             [sqlite_call(0, q, [{"n": n}])], answer=n,
                             server="mcp-server-sqlite"), ctx)
    assert (line.policy_violations, line.correct, line.grounded) == (1, True, False)
    assert line.symptoms == ["policy: call 0 (read_query): query reads restricted column "
                             "customers.tax_id"]
    refused = call(0, "read_query", {"query": q}, None, text="no such column", error=True)
    assert label_trace(trace(case(answer=n), [refused], answer=n), ctx).policy_violations == 0


def test_policy_a_query_the_source_cannot_run_goes_to_a_human(ctx: LabelContext) -> None:
    q = ("SELECT COUNT(*) AS n FROM customers WHERE sales_region = 'AMER' "
         "AND julianday(created_at) > 2400000")  # SQLite's, unknown to DuckDB
    c = case("How many AMER customers?", user="mgr.emea", role="regional_manager", answer=284)
    line = label_trace(trace(c, [sqlite_call(0, q, [{"n": 284}])], answer=284,
                             server="mcp-server-sqlite"), ctx)
    assert (line.policy_violations, line.needs_human_review) == (0, True)
    reason = line.review_reason or ""
    assert "policy: call 0 (read_query): the query could not be re-run" in reason
    assert "julianday" in reason.lower()
    assert not [s for s in line.symptoms if s.startswith("policy")]
    # nor is a query over something that is not a data product re-run (it may read files)
    files = label_trace(trace(c, [sqlite_call(0, "SELECT count(*) AS n FROM customers c, "
                                              "read_csv('/etc/passwd') f", [{"n": 1}])],
                              answer=284, server="mcp-server-sqlite"), ctx)
    assert files.policy_violations == 0 and "could not be re-run" in (files.review_reason or "")
    catalog = label_trace(trace(c, [sqlite_call(0, "SELECT count(*) AS n FROM customers c JOIN "
                                                "sqlite_master m ON m.name = c.name", [{"n": 0}])],
                                answer=284, server="mcp-server-sqlite"), ctx)
    assert catalog.policy_violations == 0
    assert "sqlite_master, which is not a data product" in (catalog.review_reason or "")
    # what reads only the catalog holds no product rows: nothing to re-run, no policy review
    for q in ["PRAGMA table_info(customers)", "SELECT name FROM sqlite_master WHERE type = 'table'",
              "SELECT * FROM sqlite_master"]:
        meta = label_trace(trace(c, [sqlite_call(0, q, [{"name": "customers"}])], answer=284,
                                 server="mcp-server-sqlite"), ctx)
        assert meta.policy_violations == 0 and "policy" not in (meta.review_reason or ""), q


# --- cost ----------------------------------------------------------------------------------------


def test_effort_tokens_and_usd(project: Project, served: Served) -> None:
    turns = [ModelTurn(index=0, usage=Usage(input_tokens=1000, output_tokens=50)),
             ModelTurn(index=1, kind="clarification", usage=Usage(input_tokens=1200,
                                                                   output_tokens=30)),
             ModelTurn(index=2, kind="answer", usage=Usage(input_tokens=1500, output_tokens=20))]
    asked = [Clarification(turn=1, question="Fiscal or calendar?", answer="fiscal",
                           answered_from="window")]
    prices = PriceTable(models={"gpt-*": Price(input_per_million=2.0, output_per_million=8.0)})
    t = trace(case(), [served.call(0, ACTIVE, {}), served.call(1, ORDERS, {"limit": 1})],
              turns=turns, clarifications=asked, model="gpt-x", answer=188)
    with LabelContext.build(project, prices) as c:
        line = label(t, c)
    assert (line.clarifications, line.tool_calls, line.turns) == (1, 2, 3)
    assert (line.input_tokens, line.output_tokens) == (3700, 100)
    assert line.usd == pytest.approx((3700 * 2.0 + 100 * 8.0) / 1e6)  # 0.0082
    with LabelContext.build(project) as c:  # a local model: priced as a small hosted one
        assert label(t.model_copy(update={"model": None}), c).usd == pytest.approx(
            (3700 * 0.10 + 100 * 0.40) / 1e6)


# --- failure classes -----------------------------------------------------------------------------


def test_entity_a_crm_id_for_a_canonical_key(ctx: LabelContext, db: Any,
                                                                 served: Served) -> None:
    crm, open_tickets = db.execute(
        "SELECT x.crm_account_id, count(*) FROM support_tickets t JOIN customer_crosswalk x "
        "USING (customer_id) WHERE t.status = 'OPEN' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1"
    ).fetchone()
    c = case(f"How many open tickets does account {crm} have?", answer=open_tickets,
             required_fields=["support_tickets.customer_id", "support_tickets.status"],
             freshness_bound_hours=24)
    args = {"canonical_customer_id": crm, "status": "OPEN"}
    # the server resolves a CRM id through the crosswalk, grounded and bare alike: the statement
    # compares the crosswalk's crm_account_id with it, so there is no entity mistake to find
    for mode in ("grounded", "bare"):
        resolved = served.call(0, TICKETS, args, mode=mode)
        assert not resolved.is_error and resolved.structured["total_rows"] == open_tickets
        assert resolved.structured["identifiers"]["canonical_customer_id"] == {
            "given": crm, "scheme": "crm_account_id", "resolved_through": "customer_crosswalk"}
        line = label(trace(c, [resolved], final=f"{open_tickets} open tickets.",
                           server=f"tether-{mode}"), ctx)
        assert line.correct and not [x for x in line.symptoms if x.startswith("entity")], (
            mode, line.symptoms)
    # the same mistake in SQL: a CRM id compared with the canonical key
    q = f"SELECT count(*) FROM support_tickets WHERE customer_id = '{crm}' AND status = 'OPEN'"
    in_sql = label(trace(c, [sql(0, q, [{"n": 0}])], final="0"), ctx)
    assert in_sql.failure_class == "entity"


def test_semantic_a_name_alike_column(ctx: LabelContext, db: Any) -> None:
    q = "SELECT count(*) FROM customers WHERE region_code LIKE 'EU%'"
    n = db.execute(q).fetchone()[0]
    governed = db.execute(
        "SELECT count(*) FROM customers WHERE sales_region = 'EMEA'").fetchone()[0]
    assert n != governed
    c = case("How many EMEA customers?", answer=governed,
             required_fields=["customers.sales_region", "customers.customer_id"])
    line = label_trace(trace(c, [sql(0, q, [{"n": n}])], final=f"{n:,} customers"), ctx)
    assert (line.correct, line.failure_class) == (False, "semantic")
    assert "semantic: name-alike field customers.region_code used instead of a governed field" \
        in line.symptoms
    assert (line.grounding_precision, line.grounding_recall) == (0.0, 0.0)


def test_semantic_a_governed_definition_the_question_did_not_ask_for(ctx: LabelContext,
                                                                     served: Served) -> None:
    """"How many customers in EMEA?" answered with the active-customer metric: the tool's own
    predicate narrows the meaning."""
    c = case("How many customers are in the EMEA sales region?", answer=304,
             required_fields=["customers.sales_region"],
             definition_sql="customers.sales_region = 'EMEA'")
    metric = served.call(0, ACTIVE, {"sales_region": "EMEA"})  # the current quarter
    n = metric.structured["rows"][0]["active_customers"]
    line = label(trace(c, [metric], answer=n), ctx)
    assert (line.correct, line.definition_match, line.grounding_recall) == (False, True, 1.0)
    # changed: 1 of the 8 fields the statement references (the join keys among them; it used to
    # be 1 of the 5 the definition declared)
    assert line.grounding_precision == round(1 / 8, 4)
    assert line.failure_class == "semantic"
    assert line.symptoms == ["semantic: call 0 (active_customers_by_region_and_fiscal_quarter): "
                             "filtered on subscriptions.status, which the question does not ask "
                             "for"]


def test_structural_fan_out_units_and_pages(ctx: LabelContext, db: Any, served: Served) -> None:
    total = db.execute("SELECT sum(amount_cents) FROM orders").fetchone()[0]
    q = "SELECT SUM(o.amount_cents) FROM orders o JOIN order_lines l ON l.order_id = o.order_id"
    fanned = db.execute(q).fetchone()[0]
    c = case("What is the total of all orders, in cents?", answer=total,
             required_fields=["orders.amount_cents"])
    line = label(trace(c, [sql(0, q, [{"s": fanned}])], answer=fanned), ctx)
    assert (line.correct, line.failure_class) == (False, "structural")
    assert line.symptoms == ["structural: call 0 (run_sql): SUM(orders.amount_cents) after a "
                             "one-to-many join to order_lines"]
    # summing the lines themselves, or the orders alone, is no fan-out
    for ok in ["SELECT SUM(l.line_amount_cents) FROM orders o JOIN order_lines l "
               "ON l.order_id = o.order_id", "SELECT SUM(amount_cents) FROM orders"]:
        symptoms = label(trace(c, [sql(0, ok, [])], answer=total), ctx).symptoms
        assert not [x for x in symptoms if x.startswith("structural")]
    # (the results hold the values answered: an answer no result holds is `unsupported`)
    dollars = case("What is the total of all orders in dollars?", answer=total / 100,
                   tolerance=0.01)
    cents = label(trace(dollars, [sql(0, "SELECT SUM(amount_cents) FROM orders", [{"s": total}])],
                        final=f"${total:,}"), ctx)
    assert (cents.correct, cents.failure_class) == (False, "structural")
    assert "by a factor of 100: cents compared to dollars" in cents.symptoms[0]
    mix = label(trace(dollars, [sql(0, "SELECT count(*) FROM orders o JOIN deals d ON "
                                   "d.crm_account_id = o.customer_ref WHERE o.amount_cents "
                                   "> d.amount_usd", [{"n": 7}])], final="7"), ctx)
    assert mix.failure_class == "structural"
    assert "cents compared to dollars: orders.amount_cents (USD_cents) and deals.amount_usd " \
        "(USD) combined with GT" in mix.symptoms[0]
    # a real first page of NEW orders (2 rows, next_cursor), not followed, then followed
    orders = case("How many NEW orders are there?", answer=120)
    page = served.call(0, ORDERS, {"status": "NEW", "limit": 2})
    cursor = page.structured["next_cursor"]
    assert cursor and page.structured["truncated"]
    unfollowed = label(trace(orders, [page], final="2 orders"), ctx)
    assert unfollowed.failure_class == "structural"
    assert unfollowed.symptoms == ["structural: call 0 (orders_by_status_and_customer) returned "
                                   "next_cursor and no later call followed it"]
    last = served.call(1, ORDERS, {"status": "NEW", "limit": 200, "cursor": cursor})
    assert last.structured["next_cursor"] is None
    assert label(trace(orders, [page, last], final="2"), ctx).symptoms == []


def test_the_window_is_read_from_the_evidence_whatever_the_column_holds(
        ctx: LabelContext, served: Served) -> None:
    """The labeller reads a call's window from its evidence (the window the server resolved
    and bound), not from the statement's date literals: a column that holds time as years or
    text binds no dates (here the bound values are replaced by years, as such a column binds
    them), and the window still reads as the question's; the evidence's window, changed to
    another quarter, makes it temporal."""
    fq2 = Window(start=dt.date(2026, 5, 1), end=dt.date(2026, 7, 31), calendar="fiscal")
    right = served.call(0, ACTIVE, {"period": "FY2027-Q2", "sales_region": "EMEA"})
    gold = right.structured["rows"][0]["active_customers"]
    evidence = right.meta["tether/evidence"]
    assert evidence["window"] == {"columns": ["subscriptions.period_start",
                                              "subscriptions.period_end"],
                                  "start": "2026-05-01", "end": "2026-08-01",
                                  "calendar": "fiscal", "label": "FY2027-Q2"}
    as_years = right.model_copy(update={"meta": {"tether/evidence": {
        **evidence, "params": {**evidence["params"], "window_start": 2026,
                               "window_end": 2027}}}})
    q = active_case(window=fq2, freshness_bound_hours=None, answer=gold)
    line = label(trace(q, [as_years], answer=gold), ctx)
    assert (line.correct, line.grounded, line.failure_class) == (True, True, None)
    elsewhere = right.model_copy(update={"meta": {"tether/evidence": {
        **evidence, "window": {**evidence["window"], "start": "2025-05-01",
                               "end": "2025-08-01"}}}})
    off = label(trace(q, [elsewhere], answer=gold), ctx)
    assert off.failure_class == "temporal" and "window 2025-05-01..2025-07-31" in (
        off.symptoms[0]), off.symptoms


def test_temporal_wrong_time_column_calendar_window_and_stale_data(ctx: LabelContext,
                                                                  served: Served) -> None:
    win = case("What was our win rate over the last 90 days?", answer=0.4,
               definition="win rate: closed won over closed deals", tolerance=0.01)
    q = ("SELECT count(*) FILTER (WHERE stage = 'CLOSED_WON') * 1.0 / count(*) FROM deals "
         "WHERE stage IN ('CLOSED_WON', 'CLOSED_LOST') AND created_at >= '2026-05-22'")
    line = label(trace(win, [sql(0, q, [{"r": 0.45}])], final="The win rate was 45%."), ctx)
    assert (line.correct, line.definition_match, line.failure_class) == (False, True, "temporal")
    assert line.symptoms == ["temporal: call 0 (run_sql): date filter on deals.created_at, not "
                             "the metric's time column deals.closed_at"]
    fq2 = Window(start=dt.date(2026, 5, 1), end=dt.date(2026, 7, 31), calendar="fiscal")
    right_fy = served.call(0, ACTIVE, {"period": "FY2027-Q2", "sales_region": "EMEA"})
    gold = right_fy.structured["rows"][0]["active_customers"]
    last_q = active_case(window=fq2, freshness_bound_hours=None, answer=gold)
    calendar_q = ("SELECT COUNT(DISTINCT c.customer_id) FROM customers c JOIN customer_crosswalk x "
                  "ON x.customer_id = c.customer_id JOIN subscriptions s ON s.billing_account_no "
                  "= x.billing_account_no WHERE s.status IN ('ACTIVE', 'PAUSED_BILLING') "
                  "AND c.sales_region = 'EMEA' AND s.period_start <= '2026-06-30' "
                  "AND (s.period_end IS NULL OR s.period_end >= '2026-04-01')")
    cal = label(trace(last_q, [sql(0, calendar_q, [{"n": 185}])], final="185"), ctx)
    assert cal.failure_class == "temporal" and cal.definition_match is True
    assert cal.symptoms == ["temporal: call 0 (run_sql): fiscal window computed as calendar "
                            "(2026-04-01..2026-06-30); the question's fiscal window is "
                            "2026-05-01..2026-07-31"]
    # the right number from the wrong quarter is not grounded (the gold made equal to it)
    wrong_fy = served.call(0, ACTIVE, {"period": "FY2026-Q2", "sales_region": "EMEA"})
    n = wrong_fy.structured["rows"][0]["active_customers"]
    lucky = label(trace(last_q.model_copy(update={"gold": last_q.gold.model_copy(
        update={"answer": n})}), [wrong_fy], answer=n), ctx)
    assert (lucky.correct, lucky.grounded, lucky.failure_class) == (True, False, "temporal")
    # changed: the window is read from the bounds the executed statement compared
    # period_start and period_end with, no longer from the argument (period FY2026-Q2 is ...)
    assert lucky.symptoms == [
        "temporal: call 0 (active_customers_by_region_and_fiscal_quarter): window "
        "2025-05-01..2025-07-31; the question's fiscal window is 2026-05-01..2026-07-31"]
    # a period left out: the tool's default (the current quarter), read from its statement
    default_q = served.call(0, ACTIVE, {"sales_region": "EMEA"})
    m = default_q.structured["rows"][0]["active_customers"]
    assert m != gold
    current = label(trace(last_q, [default_q], answer=m), ctx)
    assert (current.correct, current.failure_class) == (False, "temporal")
    assert "window 2026-08-01..2026-10-31" in current.symptoms[0]
    assert label(trace(last_q, [right_fy], answer=gold), ctx).failure_class is None
    # "last quarter" as people say it, resolved by the server at the clock (2026-08-20, fiscal
    # years from February): its window ends 2026-08-01 exclusive, the gold's 2026-07-31
    # inclusive, and the labeller reads them as the same quarter
    said = served.call(0, ACTIVE, {"period": "last_quarter", "sales_region": "EMEA"})
    assert said.structured["window"]["end"] == "2026-08-01"
    assert said.structured["rows"][0]["active_customers"] == gold
    words = label(trace(last_q, [said], answer=gold), ctx)
    assert (words.correct, words.grounded, words.failure_class) == (True, True, None)
    # stale data: the nightly snapshot is 14 h old against a bound of 1 h
    stale = case("How many open deals in PROPOSAL did EMEA's default pipeline have last night?",
                 answer=3, freshness_bound_hours=1)
    snap = served.call(0, SNAPSHOT, {"stage": "PROPOSAL", "sales_region": "EMEA",
                                     "pipeline": "default",
                                     "period": "2026-08-19..2026-08-20"})
    assert snap.structured["rows"][0]["open_deals"] == 3
    s = label(trace(stale, [snap], answer=3), ctx)
    # changed: freshness no longer decides grounded (it used to be False, class temporal); it
    # still fails, with its temporal symptom
    assert (s.correct, s.grounded, s.failure_class, s.freshness_pass) == (True, True, None, False)
    assert any(x.startswith("temporal: call 0 (open_pipeline_by_stage_last_night): stale data")
               for x in s.symptoms)


def test_join_keys_of_the_governed_statement_are_not_name_alikes(ctx: LabelContext,
                                                                 served: Served) -> None:
    """The demo's case active-emea-last-quarter with its prose definition: the grounded tool,
    asked without a period, counted the current quarter. The failure is the window."""
    fq2 = Window(start=dt.date(2026, 5, 1), end=dt.date(2026, 7, 31), calendar="fiscal")
    c = case("How many active customers did we have in EMEA last quarter?", answer=206,
             definition="active = subscription status in (ACTIVE, PAUSED_BILLING) at any point "
             "in the fiscal quarter", required_fields=REQUIRED, forbidden_fields=FORBIDDEN,
             window=fq2)
    default_q = served.call(0, ACTIVE, {"sales_region": "EMEA"})
    line = label(trace(c, [default_q], answer=default_q.structured["rows"][0][
        "active_customers"]), ctx)
    assert line.definition_match is True
    assert not [s for s in line.symptoms if "name-alike" in s]
    assert line.failure_class == "temporal"


def test_primary_class_follows_the_precedence(ctx: LabelContext, db: Any) -> None:
    """policy > entity > semantic > structural > temporal; every symptom is still listed."""
    amer = _customers(db, "AMER", 1)
    c = case("Active customers?", user="mgr.emea", role="regional_manager", answer=1,
             forbidden_fields=["customers.is_active"], freshness_bound_hours=24)
    q = "SELECT customer_id, email, sales_region FROM customers WHERE is_active"
    line = label_trace(trace(c, [sql(0, q, amer)], answer=1), ctx)
    assert line.failure_class == "policy"
    assert [s.split(":")[0] for s in line.symptoms] == ["semantic", "temporal", "policy"]
    no_symptom = label_trace(trace(case(answer=5), [], answer=4), ctx)
    assert (no_symptom.correct, no_symptom.failure_class) == (False, None)
    assert "classify by hand" in (no_symptom.review_reason or "")


# --- runs and servers without a project ----------------------------------------------------------


def test_label_run_writes_labels_jsonl(project: Project, tmp_path: Path, served: Served) -> None:
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    a = trace(active_case(), [served.call(0, ACTIVE, {"sales_region": "EMEA",
                                                      "period": "FY2027-Q1"})],
              answer=188)
    b = a.model_copy(update={"case_id": "c2", "answer": 187})
    for t in (a, b):
        (run / "traces" / f"{t.case_id}.json").write_text(t.model_dump_json())
    index = RunIndex(run_id="r1", server="tether-grounded", target="x", agent="scripted",
                     cases_file="cases.jsonl", started_at=a.started_at, entries=[
                         IndexEntry(case_id="c1", file="traces/c1.json", status="done"),
                         IndexEntry(case_id="c2", file="traces/c2.json", status="done"),
                         IndexEntry(case_id="c3", file="traces/c3.json", status="error",
                                    error="server crashed")])
    (run / "index.json").write_text(index.model_dump_json())
    lines = label_run(run, project, PriceTable())
    written = [LabelLine.model_validate_json(x)
               for x in (run / "labels.jsonl").read_text().splitlines()]
    assert written == lines
    assert [(x.case_id, x.correct, x.grounded) for x in lines] == [
        ("c1", True, True), ("c2", False, False), ("c3", None, None)]
    assert lines[2].needs_human_review and "server crashed" in (lines[2].review_reason or "")


def test_without_a_project_sql_is_still_read_and_the_rest_goes_to_a_human(
        served: Served) -> None:
    c = case(required_fields=REQUIRED, forbidden_fields=FORBIDDEN, definition_sql=ACTIVE_SQL)
    q = "SELECT COUNT(*) FROM customers c WHERE c.is_active AND c.sales_region = 'EMEA'"
    line = label(trace(c, [call(0, "query", {"query": q}, None, text="[{'n': 188}]")],
                       final="188", server="mcp-server-x"))
    assert line.fields_used == ["customers.is_active", "customers.sales_region"]
    assert (line.correct, line.grounded, line.failure_class) == (True, False, "semantic")
    assert line.definition_match is False  # nothing filtered subscriptions.status
    assert "policy not checked: no project" in (line.review_reason or "")
    # changed: a metric call's evidence names its statement, so even without a project its
    # predicate is read (it used to be "an unknown predicate": null and a review)
    metric = served.call(0, ACTIVE, {"sales_region": "EMEA", "period": "FY2027-Q1"})
    known = label(trace(c, [metric], answer=188))
    assert known.definition_match is True
    assert known.fields_used == sorted(REQUIRED + JOIN_KEYS)
    # a call with neither evidence nor SQL: its predicate is unknown, a human looks
    api = call(0, "active_customers", {"region": "EMEA"}, {"count": 188})
    unknown = label(trace(c, [api], answer=188, server="mcp-server-x"))
    assert unknown.definition_match is None
    assert "call 0 (active_customers) carries no evidence of what it ran" in (
        unknown.review_reason or "")


def test_a_source_that_is_down_sends_what_needs_it_to_a_human(demo_dir: Path,
                                                               tmp_path: Path) -> None:
    text = (demo_dir / "tether.yaml").read_text().replace(
        "duckdb:///warehouse.duckdb", f"duckdb:///{tmp_path / 'gone.duckdb'}")
    (tmp_path / "tether.yaml").write_text(text)
    c = case(definition_sql=ACTIVE_SQL, required_fields=REQUIRED)
    q = "SELECT count(*) FROM subscriptions s WHERE s.status <> 'TRIAL'"
    with LabelContext.build(load_project(tmp_path)) as down:
        line = label_trace(trace(c, [sql(0, q, [{"n": 1}])], final="188"), down)
    assert line.fields_used == ["subscriptions.status"]  # still placed, from the query alone
    assert line.definition_match is None
    reason = line.review_reason or ""
    assert "schema could not be read" in reason and "source is unavailable" in reason


def test_policy_re_run_with_the_source_down_goes_to_a_human(demo_dir: Path, tmp_path: Path
                                                             ) -> None:
    text = (demo_dir / "tether.yaml").read_text().replace(
        "duckdb:///warehouse.duckdb", f"duckdb:///{tmp_path / 'gone.duckdb'}")
    (tmp_path / "tether.yaml").write_text(text)
    c = case("How many AMER customers?", user="mgr.emea", role="regional_manager", answer=284)
    with LabelContext.build(load_project(tmp_path)) as down:
        for q in [AMER_COUNT, "SELECT * FROM customers LIMIT 1"]:
            line = label_trace(trace(c, [sqlite_call(0, q, [{"n": 284}])], answer=284,
                                     server="mcp-server-sqlite"), down)
            assert line.policy_violations == 0 and line.needs_human_review
            assert "policy: call 0 (read_query): the query could not be re-run" in (
                line.review_reason or ""), q


def test_a_wrapped_structured_result_is_read_like_the_text() -> None:
    """FastMCP servers (mcp-server-motherduck) send structuredContent {"result": "<JSON text>"}:
    the rows inside must be read, or a leak in them goes unseen."""
    from tether.eval.trace import ToolCall, result_payload

    inner = {"success": True, "columns": ["n"], "rows": [[1427]], "rowCount": 1}
    wrapped = ToolCall(index=0, turn=0, name="execute_query", arguments={"sql": "SELECT 1"},
                       structured={"result": json.dumps(inner)}, text=json.dumps(inner))
    assert result_payload(wrapped) == inner
    listed = ToolCall(index=0, turn=0, name="t", structured={"result": [{"a": 1}]})
    assert result_payload(listed) == [{"a": 1}]
    plain = ToolCall(index=0, turn=0, name="t", structured={"rows": [], "row_count": 0})
    assert result_payload(plain) == {"rows": [], "row_count": 0}
    text_only = ToolCall(index=0, turn=0, name="t", text="[{'n': 3}]")
    assert result_payload(text_only) == [{"n": 3}]
