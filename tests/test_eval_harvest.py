"""`tether eval harvest`: candidate cases from a real call log (tether's own server, driven by the
official MCP client in memory) and from a hand-built OTLP JSON export of GenAI/MCP spans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import copy_project
from tether.config import load_project
from tether.drift.publish import build
from tether.errors import ConfigError
from tether.eval.cases import Case, load_cases
from tether.eval.harvest import (
    NO_TOOL,
    PLACEHOLDER,
    call_log_candidates,
    harvest_call_log,
    keep_discriminating,
    quota_for,
    strata,
    stratify,
    write_candidates,
)
from tether.eval.otlp import harvest_otel, otel_candidates
from tether.eval.trace import LabelLine
from tether.registry import open_registry
from tether.serve.server import TetherServer

DEALS, CUSTOMERS, BACKLOG = "deals_by_stage_and_pipeline", "customers_by_region_and_segment", \
    "order_backlog_by_status"
RESOLVE, TICKETS = "resolve_customer_ids", "support_tickets_for_customer"

# (user, [(tool, arguments)]): ok calls, errors followed by a retry, empty results, duplicates
TRAFFIC: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    ("mgr.emea", [(CUSTOMERS, {"limit": n}) for n in range(1, 7)]
     + [(BACKLOG, {}), (BACKLOG, {})]
     + [c for n in range(1, 5) for c in ((DEALS, {"stage": f"nope{n}"}), (DEALS, {"limit": 5}))]),
    ("fin.ana", [(RESOLVE, {"crm_account_id": "A-9999999"}), (BACKLOG, {}),
                 (TICKETS, {"status": "closed"})]),
    ("sup.sam", [(RESOLVE, {"crm_account_id": "A-9999998"}), (RESOLVE, {"limit": 3}),
                 ("explain_data_product", {"product": "customers"})]),
]


@pytest.fixture(scope="module")
def served(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo project whose call log holds the TRAFFIC above, made through tether's own server."""
    d = copy_project(demo_dir, tmp_path_factory.mktemp("harvest"))
    build(load_project(d))
    for user, calls in TRAFFIC:
        server = TetherServer(load_project(d), stdio_user=user)

        async def go(server: TetherServer = server, calls: list[Any] = calls) -> None:
            async with Client(server.server) as c:
                for name, args in calls:
                    await c.call_tool(name, args)

        try:
            anyio.run(go)
        finally:
            server.close()  # flushes the call log
    return d


@pytest.fixture(scope="module")
def log_rows(served: Path) -> list[dict[str, Any]]:
    registry = open_registry(load_project(served))
    try:
        return registry.calls()
    finally:
        registry.close()


# --- the call log --------------------------------------------------------------------------------


def test_the_call_log_holds_what_the_test_relies_on(log_rows: list[dict[str, Any]]) -> None:
    assert len(log_rows) == sum(len(c) for _, c in TRAFFIC)
    resolve = [r for r in log_rows if r["tool"] == RESOLVE]
    assert [r["row_count"] for r in resolve][:2] == [0, 0] and resolve[0]["error"] is None
    assert all(r["error"] for r in log_rows if r["tool"] == DEALS and "nope" in r["arguments"])


def test_call_log_episodes_by_tool_role_and_outcome(log_rows: list[dict[str, Any]]) -> None:
    cands = call_log_candidates(log_rows)
    assert strata(cands) == {
        (CUSTOMERS, "regional_manager", "ok"): 6,
        (DEALS, "regional_manager", "retry"): 4,
        ("explain_data_product", "support_agent", "ok"): 1,
        (BACKLOG, "finance_analyst", "ok"): 1,
        (BACKLOG, "regional_manager", "ok"): 2,
        (RESOLVE, "finance_analyst", "empty"): 1,
        (RESOLVE, "support_agent", "retry"): 1,  # an empty result, then the same tool again
        (TICKETS, "finance_analyst", "error"): 1,  # an error with no retry is a failure
    }
    retry = next(c for c in cands if c.stratum == (DEALS, "regional_manager", "retry"))
    q = retry.case.question
    assert q.startswith(PLACEHOLDER) and "as mgr.emea" in q
    assert "deals_by_stage_and_pipeline(stage='nope1') -> error: stage: 'nope1' is not allowed" in q
    assert "then deals_by_stage_and_pipeline(limit=5) -> " in q and " rows" in q
    assert retry.case.source_trace is not None and retry.case.source_trace.startswith("call_log:")
    assert retry.case.as_user == "mgr.emea" and retry.case.user_role == "regional_manager"
    empty = next(c for c in cands if c.outcome == "empty")
    assert empty.case.question.endswith(f"{RESOLVE}(crm_account_id='A-9999999') -> no rows")


def test_retry_window(log_rows: list[dict[str, Any]]) -> None:
    import datetime as dt

    rows = [dict(r) for r in log_rows]
    second = [r for r in rows if r["tool"] == RESOLVE and r["username"] == "sup.sam"][1]
    second["at"] = (dt.datetime.fromisoformat(second["at"]) + dt.timedelta(seconds=301)).isoformat()
    late = strata(call_log_candidates(rows, retry_window_s=300))
    assert (RESOLVE, "support_agent", "retry") not in late
    assert late[(RESOLVE, "support_agent", "empty")] == 1 and late[(RESOLVE, "support_agent", "ok")] == 1
    assert strata(call_log_candidates(rows, retry_window_s=400))[
        (RESOLVE, "support_agent", "retry")] == 1
    # a call the server could not attribute to anyone cannot be replayed as anyone
    anon = {**rows[0], "username": "?", "role": "?"}
    assert len(call_log_candidates([*rows, anon])) == len(call_log_candidates(rows))


def test_stratified_sample_caps_and_oversamples(served: Path) -> None:
    project = load_project(served)
    got = strata(harvest_call_log(project, per_stratum=2, oversample=3, seed=0))
    assert got[(CUSTOMERS, "regional_manager", "ok")] == 2  # capped
    assert got[(DEALS, "regional_manager", "retry")] == 4  # quota 6: all kept
    assert got[(BACKLOG, "regional_manager", "ok")] == 1  # two identical calls are one case
    assert got[(TICKETS, "finance_analyst", "error")] == 1
    flat = strata(harvest_call_log(project, per_stratum=2, oversample=1, seed=0))
    assert flat[(DEALS, "regional_manager", "retry")] == 2
    one = strata(harvest_call_log(project, per_stratum=1, oversample=3, seed=0))
    assert one[(DEALS, "regional_manager", "retry")] == 3 and one[(CUSTOMERS, "regional_manager", "ok")] == 1
    dup = next(c for c in harvest_call_log(project) if c.stratum == (BACKLOG, "regional_manager", "ok"))
    assert dup.seen == 2
    assert quota_for("clarification", 5, 3) == 15 and quota_for("error", 5, 3) == 5


def test_sampling_is_deterministic_by_seed(served: Path) -> None:
    project = load_project(served)

    def picked(seed: int) -> tuple[str, ...]:
        return tuple(c.case.case_id for c in harvest_call_log(project, per_stratum=2, seed=seed))

    assert picked(0) == picked(0) and picked(7) == picked(7)
    assert len({picked(s) for s in range(8)}) > 1  # C(6,2) ways to choose the capped stratum


def test_bad_sampling_options_and_rows(log_rows: list[dict[str, Any]]) -> None:
    with pytest.raises(ConfigError, match="per_stratum must be 1 or more"):
        stratify(call_log_candidates(log_rows), per_stratum=0)
    with pytest.raises(ConfigError, match="oversample must be 1 or more"):
        stratify([], oversample=0.5)
    broken = {k: v for k, v in log_rows[0].items() if k != "username"}
    with pytest.raises(ConfigError, match=r"call log row 1 has no username") as e:
        call_log_candidates([broken], where="reg.db (call_log)")
    assert e.value.where == "reg.db (call_log)"


def test_written_candidates_validate_as_cases(served: Path, tmp_path: Path) -> None:
    cands = harvest_call_log(load_project(served), per_stratum=2)
    out = tmp_path / "cases.jsonl"
    assert write_candidates(cands, out) == len(cands) > 0
    lines = out.read_text().splitlines()
    for raw in lines:
        case = Case.model_validate(json.loads(raw))
        assert case.gold.answer is None and case.label is None and case.source_trace
    loaded = load_cases(out)
    assert not loaded.errors and [c.case_id for c in loaded.cases] == [c.case.case_id for c in cands]
    with pytest.raises(ConfigError, match="appears twice"):
        write_candidates([cands[0], cands[0]], tmp_path / "dup.jsonl")


# --- OpenTelemetry spans --------------------------------------------------------------------------

T0 = 1_780_000_000


def av(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [av(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": av(x)} for k, x in v.items()]}}
    return {"stringValue": v}


def span(trace: str, sid: str, name: str, at: float, attrs: dict[str, Any], parent: str = "",
         error: str | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {
        "traceId": trace, "spanId": sid, "parentSpanId": parent, "name": name, "kind": 1,
        "startTimeUnixNano": str(int((T0 + at) * 1e9)), "endTimeUnixNano": str(int((T0 + at + .5) * 1e9)),
        "attributes": [{"key": k, "value": av(v)} for k, v in attrs.items()]}
    if error:
        s["status"] = {"code": 2, "message": error}
    return s


def msgs(*turns: tuple[str, str]) -> str:
    """JSON messages in the GenAI convention; a text of 'call:NAME' is a tool call part."""
    return json.dumps([{"role": r, "parts": [
        {"type": "tool_call", "id": "c1", "name": t[5:], "arguments": {}} if t.startswith("call:")
        else {"type": "text", "content": t}]} for r, t in turns])


def chat(trace: str, sid: str, at: float, inp: str | None, out: str | None, **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                             "gen_ai.usage.input_tokens": 120, "gen_ai.request.temperature": 0.0, **extra}
    if inp is not None:
        attrs["gen_ai.input.messages"] = inp
    if out is not None:
        attrs["gen_ai.output.messages"] = out
    return chat_span(trace, sid, at, attrs)


def chat_span(trace: str, sid: str, at: float, attrs: dict[str, Any]) -> dict[str, Any]:
    return span(trace, sid, "chat m", at, attrs, parent="root")


def tool(trace: str, sid: str, at: float, name: str, args: dict[str, Any], result: Any = None,
         error: str | None = None, parent: str = "root", **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                             "gen_ai.tool.call.arguments": json.dumps(args), **extra}
    if result is not None:
        attrs["gen_ai.tool.call.result"] = json.dumps(result)
    if error:
        attrs["error.type"] = "tool_error"
    return span(trace, sid, f"execute_tool {name}", at, attrs, parent=parent, error=error)


def export(*resources: tuple[dict[str, Any], list[dict[str, Any]]]) -> dict[str, Any]:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": k, "value": av(v)} for k, v in res.items()]},
        "scopeSpans": [{"scope": {"name": "agent"}, "spans": spans}]} for res, spans in resources]}


SYSTEM = ("system", "You answer from the tools.")
Q1, Q2, Q3 = ("How many orders are waiting to ship?", "Which deals did EMEA win last month?",
              "Show the open tickets for my customer")
ASK = "Which customer do you mean? Can you give me the account id?"


def sample_traces() -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    t1 = [span("t1", "root", "invoke_agent analyst", 0, {"gen_ai.operation.name": "invoke_agent",
                                                          "enduser.id": "fin.ana"}),
          chat("t1", "c1", 1, msgs(SYSTEM, ("user", Q1)), msgs(("assistant", f"call:{BACKLOG}"))),
          tool("t1", "x1", 2, BACKLOG, {}, {"rows": [{"status": "PAID", "orders": 4}], "row_count": 1}),
          # the MCP client's span for the same call, under the agent's: one call, not two
          span("t1", "m1", f"tools/call {BACKLOG}", 2.1, {"mcp.method.name": "tools/call",
                                                           "gen_ai.tool.name": BACKLOG}, parent="x1"),
          chat("t1", "c2", 3, msgs(SYSTEM, ("user", Q1)),  # a final answer that ends on a courtesy
               msgs(("assistant", "There are 4 paid orders waiting. Anything else?")))]
    t2 = [span("t2", "root", "invoke_agent", 10, {"gen_ai.operation.name": "invoke_agent"}),
          chat_span("t2", "c1", 11, {"gen_ai.operation.name": "chat", "gen_ai.prompt": Q2}),
          tool("t2", "x1", 12, DEALS, {"stage": "won"}, error="stage: 'won' is not allowed",
               **{"enduser.id": "mgr.emea", "enduser.role": "regional_manager"}),
          tool("t2", "x2", 15, DEALS, {"stage": "CLOSED_WON"}, {"rows": [{"deal": 1}], "row_count": 1},
               **{"enduser.id": "mgr.emea", "enduser.role": "regional_manager"})]
    t3 = [span("t3", "root", "invoke_agent", 20, {"enduser.id": "sup.sam"}),
          chat("t3", "c1", 21, msgs(("user", Q3)), msgs(("assistant", ASK))),
          chat("t3", "c2", 40, msgs(("user", Q3), ("assistant", ASK), ("user", "A-1000001")),
               msgs(("assistant", f"call:{TICKETS}"))),
          tool("t3", "x1", 41, TICKETS, {"status": "OPEN"}, {"rows": [{"id": 9}], "row_count": 1})]
    t4 = [tool("t4", "x1", 50, RESOLVE, {"crm_account_id": "A-0000001"}, {"rows": [], "row_count": 0},
               parent="")]
    t5 = [span("t5", "h1", "GET /health", 60, {"http.request.method": "GET", "ok": True})]
    t6 = [span("t6", "root", "invoke_agent", 70, {"enduser.id": "fin.ana"}),
          chat("t6", "c1", 71, msgs(("user", "Active customers last quarter?")),
               msgs(("assistant", "Do you mean the fiscal or the calendar quarter?")))]
    return [({"service.name": "agent"}, t1 + t2 + t3 + t6 + t5),
            ({"service.name": "mcp", "enduser.id": "fin.ana", "tags": {"env": "prod"}}, t4)]


def test_otel_traces_become_stratified_candidates(demo_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(export(*sample_traces())))
    cands = otel_candidates(path, project=load_project(demo_dir))
    by_trace = {c.case.source_trace: c for c in cands}
    assert set(by_trace) == {"t1", "t2", "t3", "t4", "t6"}  # the health check is no case
    assert by_trace["t1"].stratum == (BACKLOG, "finance_analyst", "ok")
    assert by_trace["t1"].case.question == Q1  # first user message, not the system prompt
    assert by_trace["t1"].key.count(BACKLOG) == 1  # the MCP client span is the same call
    assert by_trace["t2"].stratum == (DEALS, "regional_manager", "retry")
    assert by_trace["t2"].case.question == Q2  # from gen_ai.prompt
    assert by_trace["t3"].stratum == (TICKETS, "support_agent", "clarification")
    assert by_trace["t3"].case.as_user == "sup.sam" and by_trace["t3"].case.question == Q3
    assert by_trace["t4"].stratum == (RESOLVE, "finance_analyst", "empty")  # user from the resource
    assert by_trace["t4"].case.question.startswith(f"{PLACEHOLDER} as fin.ana: {RESOLVE}(")
    assert by_trace["t6"].stratum == (NO_TOOL, "finance_analyst", "clarification")
    # without the project, a role the spans do not carry is unknown
    assert {c.role for c in otel_candidates(path)} == {"unknown", "regional_manager"}
    # a tighter window: the second deals call came 3 s after the error, so it is no retry
    assert {c.case.source_trace: c.outcome for c in otel_candidates(path, retry_window_s=2)}["t2"] == "error"
    out = tmp_path / "cases.jsonl"
    write_candidates(harvest_otel(path, project=load_project(demo_dir)), out)
    assert not load_cases(out).errors and len(load_cases(out).cases) == 5


def test_otel_json_lines_export_reads_the_same(tmp_path: Path) -> None:
    whole, lines = tmp_path / "one.json", tmp_path / "many.jsonl"
    resources = sample_traces()
    whole.write_text(json.dumps(export(*resources)))
    lines.write_text("\n".join(json.dumps(export(r)) for r in resources) + "\n")
    assert [c.case for c in otel_candidates(whole)] == [c.case for c in otel_candidates(lines)]


def test_otel_oversamples_clarifications(tmp_path: Path) -> None:
    spans: list[dict[str, Any]] = []
    for n in range(8):
        spans += [span(f"ok{n}", "root", "invoke_agent", n * 100, {"enduser.id": "fin.ana",
                                                                   "enduser.role": "finance_analyst"}),
                  chat(f"ok{n}", "c1", n * 100 + 1, msgs(("user", f"Backlog question {n}")), None),
                  tool(f"ok{n}", "x1", n * 100 + 2, BACKLOG, {"n": n}, {"row_count": 2})]
        spans += [span(f"cl{n}", "root", "invoke_agent", n * 100 + 50,
                       {"enduser.id": "fin.ana", "enduser.role": "finance_analyst"}),
                  chat(f"cl{n}", "c1", n * 100 + 51, msgs(("user", f"Vague question {n}")),
                       msgs(("assistant", f"Which status do you mean ({n})?")))]
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(export(({}, spans))))
    got = strata(harvest_otel(path, per_stratum=2, oversample=3, seed=1))
    assert got == {(BACKLOG, "finance_analyst", "ok"): 2, (NO_TOOL, "finance_analyst", "clarification"): 6}
    assert strata(harvest_otel(path, per_stratum=2, oversample=1.5))[
        (NO_TOOL, "finance_analyst", "clarification")] == 3
    a = [c.case.case_id for c in harvest_otel(path, per_stratum=2, seed=1)]
    assert a == [c.case.case_id for c in harvest_otel(path, per_stratum=2, seed=1)]


BAD_SPAN = {"spanId": "s", "startTimeUnixNano": "1"}


@pytest.mark.parametrize("content, says", [
    ("{not json", "not JSON"),
    ('{"foo": 1}', "no resourceSpans"),
    ('[1, 2]', "no resourceSpans"),
    (json.dumps(export(({}, [BAD_SPAN]))), "has no traceId"),
    (json.dumps(export(({}, [{**BAD_SPAN, "traceId": "t", "attributes": [
        {"key": "a", "value": {"weird": 1}}]}]))), "not an OTLP AnyValue"),
    (json.dumps(export(({}, [{**BAD_SPAN, "traceId": "t", "attributes": [{"k": "a"}]}]))),
     "attribute 0 is not"),
    (json.dumps(export(({}, [chat("t", "c", 0, "not json", None)]))), "gen_ai.input.messages is not JSON"),
    (json.dumps(export(({}, [span("t", "h", "GET /", 0, {"http.route": "/"})]))), "no GenAI or MCP span"),
])
def test_bad_otel_input_is_a_clear_config_error(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "spans.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=says) as e:
        otel_candidates(path)
    assert str(path) in str(e.value)
    with pytest.raises(ConfigError, match="does not exist"):
        otel_candidates(tmp_path / "missing.json")


# --- keep what discriminates ----------------------------------------------------------------------


def label(case_id: str, server: str, correct: bool | None, grounded: bool | None) -> str:
    return LabelLine(
        case_id=case_id, server=server, correct=correct, grounded=grounded, grounding_precision=None,
        grounding_recall=None, fields_used=[], definition_match=None, freshness_pass=None,
        policy_violations=0, clarifications=0, tool_calls=1, turns=2, input_tokens=0, output_tokens=0,
        usd=0.0, failure_class=None if correct and grounded else "semantic", needs_human_review=False,
        review_reason=None).model_dump_json()


def test_keep_discriminating(served: Path, tmp_path: Path) -> None:
    cands = harvest_call_log(load_project(served), per_stratum=1)
    ids = [c.case.case_id for c in cands]
    assert len(ids) >= 5
    passes, fails, ungrounded, undecided, unrun = ids[:5]
    runs = {"grounded": [(i, True, True) for i in ids[:4]],
            "bare": [(passes, True, True), (fails, False, False), (ungrounded, True, False),
                     (undecided, True, True)]}
    runs["grounded"][3] = (undecided, None, None)
    dirs = []
    for server, rows in runs.items():
        d = tmp_path / server
        d.mkdir()
        (d / "labels.jsonl").write_text("".join(label(i, server, c, g) + "\n" for i, c, g in rows))
        dirs.append(d)
    got = keep_discriminating(cands[:5], dirs)
    assert [c.case.case_id for c in got.kept] == [fails, ungrounded, undecided]
    assert [c.case.case_id for c in got.dropped] == [passes]
    assert [c.case.case_id for c in got.unlabelled] == [unrun]
    assert got.reasons[fails] == "bare failed (semantic)"
    assert got.reasons[ungrounded] == "bare passed ungrounded (semantic)"
    assert got.reasons[passes] == "every configuration passed grounded (2)"
    # the same filter over cases read back from cases.jsonl
    out = tmp_path / "cases.jsonl"
    write_candidates(cands[:5], out)
    again = keep_discriminating(load_cases(out).cases, dirs)
    assert [c.case_id for c in again.kept] == [fails, ungrounded, undecided]
    (tmp_path / "nolabels").mkdir()
    with pytest.raises(ConfigError, match=r"has no labels\.jsonl"):
        keep_discriminating(cands, [tmp_path / "nolabels"])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "labels.jsonl").write_text("{oops\n")
    with pytest.raises(ConfigError, match="not JSON") as e:
        keep_discriminating(cands, [tmp_path / "bad"])
    assert e.value.where == f"{tmp_path / 'bad' / 'labels.jsonl'}:1"
    with pytest.raises(ConfigError, match="no labelled run folder"):
        keep_discriminating(cands, [])
