"""Evidence, not definitions: the labeller reads what a call ran (``_meta["tether/evidence"]`` on
its result, or SQL it sent), never what a tool definition says of itself.

Real runs (`tether eval run` over stdio with the baseline agent, `tether eval label`) against
tether serve in grounded and bare mode, and against a small third-party server written here
with the official SDK's low-level server: one tool whose description and
``_meta["tether/context"]`` claim the governed "active customer" definition, and whose result
reports, as evidence, the statement it really ran on the demo's DuckDB file. All runs start at
once (one fixture) to keep the file fast.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import copy_project, piped, run_cli
from tether.config import load_project
from tether.drift.publish import build
from tether.eval.label import LabelContext, label_run, label_trace
from tether.eval.trace import Trace
from tether.registry import open_registry
from tether.serve.executor import Executor
from tether.serve.kinds import Call
from tether.serve.pagination import load_key
from tether.toolgen import QueryPlan

TETHER = str(Path(sys.executable).parent / "tether")
CASE = "active-emea-fy27q1"  # gold: 188, the governed definition, FY2027 Q1, fresh within 24 h
CASES = [CASE, "backlog-mgr-amer", "open-deals-now", "tickets-by-canonical-id", "win-rate-90d",
         "mgr-emea-asks-amer-customers"]
ACTIVE = "active_customers_by_region_and_fiscal_quarter"
NEWEST = "2026-08-20T08:00:00+00:00"  # the newest row under the active-customer count's as_of

# the governed count written by hand, and the same without the governed status predicate
COUNT = ("SELECT COUNT(DISTINCT c.customer_id) AS active_customers FROM customers c "
         "JOIN customer_crosswalk x ON x.customer_id = c.customer_id "
         "JOIN subscriptions s ON s.billing_account_no = x.billing_account_no "
         "WHERE c.sales_region = 'EMEA' {status}AND s.period_start < TIMESTAMP '2026-05-01' "
         "AND (s.period_end IS NULL OR s.period_end > TIMESTAMP '2026-02-01')")
WITHOUT = COUNT.format(status="")
WITH = COUNT.format(status="AND s.status IN ('ACTIVE', 'PAUSED_BILLING') ")
AS_OF_SQL = ("SELECT MIN(v) FROM (SELECT MAX(loaded_at) AS v FROM customers UNION ALL "
             "SELECT MAX(loaded_at) AS v FROM subscriptions) AS t")

SERVER = '''"""A third party's server: its tool claims the governed definition; its evidence
says what it ran (config: the database, the evidence, optionally an as_of to claim)."""
import datetime as dt
import json
import sys

import anyio
import duckdb
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from tether.sources.duckdb import READ_ONLY_CONFIG

CONFIG = json.loads(open(sys.argv[1], encoding="utf-8").read())
EVIDENCE = CONFIG["evidence"]
TOOL = types.Tool(
    name="active_customers_by_region",
    description="Active customers by sales region. Governed definition (active customer): a "
    "customer with a subscription whose status is ACTIVE or PAUSED_BILLING at any point in the "
    "fiscal quarter.",
    input_schema={"type": "object", "properties": {
        "sales_region": {"type": "string", "enum": ["AMER", "APAC", "EMEA"]}}},
    _meta={"tether/context": {"kind": "metric", "definitions": ["active customer"],
                              "source_of_truth": {"active_customers": "metric:active_customers"},
                              "fields": {"governed": ["subscriptions.status",
                                                      "subscriptions.period_start",
                                                      "subscriptions.period_end"]}}})


def value(v):
    if isinstance(v, str) and v[:4].isdigit() and "T" in v:
        return dt.datetime.fromisoformat(v)
    return v


def run(sql):
    con = duckdb.connect(CONFIG["db"], read_only=True, config=dict(READ_ONLY_CONFIG))
    try:
        params = {k: value(v) for k, v in EVIDENCE["params"].items() if "$" + k in sql}
        cur = con.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [{n: v.isoformat() if isinstance(v, dt.datetime) else v
                 for n, v in zip(names, r)} for r in cur.fetchall()]
    finally:
        con.close()


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx, params):
    rows = run(EVIDENCE["sql"])
    as_of = CONFIG.get("as_of") or next(iter(run(EVIDENCE["as_of_sql"])[0].values()))
    result = {"rows": rows, "row_count": len(rows), "as_of": as_of}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(result))],
        structured_content=result, _meta={"tether/evidence": EVIDENCE})


async def main():
    server = Server("active-customers", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
'''


def evidence(sql: str) -> dict[str, Any]:
    return {"tool": "active_customers_by_region", "sql": sql, "params": {},
            "tables": ["customers", "customer_crosswalk", "subscriptions"],
            "policy_predicates": [], "as_of_sql": AS_OF_SQL, "dialect": "duckdb"}


def tethers_evidence(project_dir: Path) -> dict[str, Any]:
    """What tether's grounded tool reports for the case's call (fin.ana, EMEA, FY2027-Q1)."""
    project = load_project(project_dir)
    registry = open_registry(project)
    try:
        v = registry.current()[ACTIVE]
    finally:
        registry.close()
    ex = Executor(project, load_key(project_dir / ".tether" / "cursor.key"))
    try:
        answered = piped(ex).answer(Call("fin.ana", ACTIVE, v.version, v.definition,
                                  QueryPlan.model_validate(v.plan),
                                  {"sales_region": "EMEA", "period": "FY2027-Q1"}))
    finally:
        ex.close()
    out: dict[str, Any] = answered.evidence.model_dump(mode="json")
    return out


def labels(run: Path) -> dict[str, dict[str, Any]]:
    return {d["case_id"]: d for d in map(json.loads, (run / "labels.jsonl").read_text()
                                         .splitlines())}


def trace(run: Path, case_id: str) -> Trace:
    return Trace.model_validate_json((run / "traces" / f"{case_id}.json").read_text())


def label(*runs: Path, project: Path) -> None:
    """`tether eval label RUN --project DIR`, the runs labelled side by side."""
    procs = [subprocess.Popen([TETHER, "eval", "label", str(r), "--project", str(project)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in runs]
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, out[-2000:] + err[-2000:]


@pytest.fixture(scope="module")
def project(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = copy_project(demo_dir, tmp_path_factory.mktemp("evidence"))
    build(load_project(d))
    res = run_cli("demo", "cases", "--project", str(d))
    assert res.returncode == 0, res.stderr
    return d


@pytest.fixture(scope="module")
def runs(project: Path, demo_dir: Path, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, Path]:
    """Every run of this file, started at once, then labelled: grounded and bare over a few of
    the demo's cases (labelled by `tether eval label`); the small server (one case) without the
    governed predicate, with it, with tether's own statement, and claiming an as_of in the
    future (labelled in process, by the same label_run)."""
    tmp = tmp_path_factory.mktemp("runs")
    lines = (project / "cases.jsonl").read_text().splitlines()
    some, one = tmp / "cases.jsonl", tmp / "one.jsonl"
    some.write_text("\n".join(ln for ln in lines if json.loads(ln)["case_id"] in CASES) + "\n")
    one.write_text("\n".join(ln for ln in lines if json.loads(ln)["case_id"] == CASE) + "\n")
    script = tmp / "active_server.py"
    script.write_text(SERVER)
    db = str(demo_dir / "warehouse.duckdb")
    configs = {"without": {"evidence": evidence(WITHOUT)}, "with": {"evidence": evidence(WITH)},
               "tethers": {"evidence": tethers_evidence(project)},
               "future": {"evidence": evidence(WITH), "as_of": "2026-12-01T00:00:00+00:00"}}
    argv: dict[str, list[str]] = {mode: [
        "--server", "stdio:" + shlex.join([TETHER, "serve", "--project", str(project), "--mode",
                                           mode]),
        "--cases", str(some), "--concurrency", "4"] for mode in ("grounded", "bare")}
    for name, config in configs.items():
        (tmp / f"{name}.json").write_text(json.dumps({"db": db, **config}))
        argv[name] = ["--server", "stdio:" + shlex.join([sys.executable, str(script),
                                                         str(tmp / f"{name}.json")]),
                      "--as-user-via", "none", "--name", f"active-{name}", "--cases", str(one)]
    procs = {name: subprocess.Popen(
        [TETHER, "eval", "run", *args, "--agent", "baseline", "--out", str(tmp / name)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, args in argv.items()}
    try:
        for name, p in procs.items():
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, f"{name}: {out[-2000:]}{err[-2000:]}"
    finally:
        for p in procs.values():  # a failed run leaves none of ours behind
            if p.poll() is None:
                p.kill()
                p.wait()
    label(*(tmp / mode for mode in ("grounded", "bare")), project=project)
    loaded = load_project(project)
    for name in configs:
        label_run(tmp / name, loaded)
    return {name: tmp / name for name in procs}


def test_relabelling_without_any_definitions_meta_gives_identical_labels(
        runs: dict[str, Path], project: Path, tmp_path: Path) -> None:
    names = ("grounded", "bare", "without")
    for name in names:
        copy = tmp_path / name
        shutil.copytree(runs[name], copy)
        (copy / "labels.jsonl").unlink()
        stripped = 0
        for f in sorted((copy / "traces").glob("*.json")):
            data = json.loads(f.read_text())
            for tool in data["tools"]:
                stripped += tool.pop("_meta", None) is not None
            f.write_text(json.dumps(data))
        assert stripped > 0, name  # the definitions did carry _meta
    label(*(tmp_path / name for name in names), project=project)
    for name in names:
        copy = tmp_path / name
        before = (runs[name] / "labels.jsonl").read_text().splitlines()
        after = (copy / "labels.jsonl").read_text().splitlines()
        assert len(before) == len(after) == len(list((copy / "traces").glob("*.json")))
        for a, b in zip(before, after, strict=True):
            assert json.loads(a) == json.loads(b)  # every field, line by line


def test_identical_calls_and_results_on_bare_and_grounded_get_identical_labels(
        runs: dict[str, Path]) -> None:
    grounded, bare = labels(runs["grounded"]), labels(runs["bare"])
    assert sorted(grounded) == sorted(bare) == sorted(CASES)
    strictly, compared = [], []
    for case_id in CASES:
        g, b = trace(runs["grounded"], case_id), trace(runs["bare"], case_id)
        if [(c.name, c.arguments) for c in g.tool_calls] != [
                (c.name, c.arguments) for c in b.tool_calls]:
            continue
        # bare strips output schemas, which is where a result's `units` come from: results that
        # differ only there are the same data (the labeller never reads `units`)
        def data(t: Trace) -> list[Any]:
            return [{k: v for k, v in c.structured.items() if k != "units"}
                    if isinstance(c.structured, dict) else c.structured for c in t.tool_calls]
        if data(g) != data(b):
            continue
        compared.append(case_id)
        if [c.structured for c in g.tool_calls] == [c.structured for c in b.tool_calls]:
            strictly.append(case_id)
        assert {**grounded[case_id], "server": None} == {**bare[case_id], "server": None}, case_id
        assert (grounded[case_id]["server"], bare[case_id]["server"]) == ("tether-grounded",
                                                                          "tether-bare")
    # the comparison is not empty: several cases, one of them byte for byte
    assert len(compared) >= 4 and strictly, (compared, strictly)
    # and a case whose calls differ may be labelled differently: the same question, asked of
    # bare tools, got no arguments (the current quarter, every region)
    assert trace(runs["bare"], CASE).tool_calls[0].arguments == {}
    assert (grounded[CASE]["correct"], bare[CASE]["correct"]) == (True, False)


def test_a_description_that_claims_the_definition_is_not_evidence(
        runs: dict[str, Path]) -> None:
    without, with_ = labels(runs["without"])[CASE], labels(runs["with"])[CASE]
    t = trace(runs["without"], CASE)
    assert "ACTIVE or PAUSED_BILLING" in t.tools[0]["description"]
    assert t.tools[0]["_meta"]["tether/context"]["definitions"] == ["active customer"]
    assert t.tool_calls[0].meta["tether/evidence"]["sql"] == WITHOUT
    # the claim is the governed definition; what ran has no status predicate
    assert without["definition_match"] is False
    assert "subscriptions.status" not in without["fields_used"]
    assert any(s.startswith("semantic: no call applied the governed definition")
               for s in without["symptoms"])
    assert (without["correct"], without["grounded"]) == (False, False)  # 279 EMEA customers
    # the same server, running the predicate, applies the definition
    assert trace(runs["with"], CASE).tool_calls[0].meta["tether/evidence"]["sql"] == WITH
    assert with_["definition_match"] is True
    assert (with_["correct"], with_["grounding_recall"]) == (True, 1.0)


def test_a_third_party_reporting_tethers_statement_is_labelled_as_tether_is(
        runs: dict[str, Path]) -> None:
    theirs, ours = trace(runs["tethers"], CASE), trace(runs["grounded"], CASE)
    (their_call,), (our_call,) = theirs.tool_calls, ours.tool_calls
    assert their_call.name != our_call.name and theirs.server == "active-tethers"
    # the same statement, parameters and rows (tether adds the quarter's label to its rows)
    assert their_call.meta["tether/evidence"] == our_call.meta["tether/evidence"]
    assert their_call.structured["rows"] == [
        {k: v for k, v in r.items() if k != "period"}
        for r in our_call.structured["rows"]]
    a, b = labels(runs["tethers"])[CASE], labels(runs["grounded"])[CASE]
    keys = ("fields_used", "grounding_precision", "grounding_recall", "definition_match",
            "correct", "grounded", "freshness_pass", "policy_violations", "failure_class",
            "symptoms")
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    assert (a["definition_match"], a["grounding_recall"]) == (True, 1.0)


def claiming(t: Trace, as_of: str, bound: float | None = 24) -> Trace:
    """The trace with its one result claiming ``as_of`` (and the case's freshness bound)."""
    (c,) = t.tool_calls
    claimed = c.model_copy(update={"structured": {**c.structured, "as_of": as_of}})
    case = t.case.model_copy(update={"gold": t.case.gold.model_copy(
        update={"freshness_bound_hours": bound})})
    return t.model_copy(update={"tool_calls": [claimed], "case": case})


def test_an_as_of_later_than_the_run_or_the_source_is_reported(runs: dict[str, Path],
                                                               project: Path) -> None:
    future = labels(runs["future"])[CASE]
    assert trace(runs["future"], CASE).tool_calls[0].structured["as_of"] == \
        "2026-12-01T00:00:00+00:00"
    assert future["freshness_pass"] is False
    assert "temporal: call 0 (active_customers_by_region): as_of 2026-12-01T00:00:00+00:00 is " \
        "later than the run (2026-08-20T09:00:00+00:00)" in future["symptoms"]
    # freshness stands apart from grounded: the answer is still correct and grounded
    assert (future["correct"], future["grounded"]) == (True, True)
    # the true as_of (the newest row, 08:00) passes
    assert labels(runs["with"])[CASE]["freshness_pass"] is True
    # a claim of 08:30: before the run, but as_of_sql recomputes the newest row at 08:00; the
    # same for the third party and for tether's own result, with or without a bound
    theirs, ours = trace(runs["with"], CASE), trace(runs["grounded"], CASE)
    with LabelContext.build(load_project(project)) as ctx:
        for t, tool in [(theirs, "active_customers_by_region"), (ours, ACTIVE)]:
            for bound in (24, None):
                line = label_trace(claiming(t, "2026-08-20T08:30:00+00:00", bound), ctx)
                assert line.freshness_pass is False, (tool, bound)
                assert f"temporal: call 0 ({tool}): as_of 2026-08-20T08:30:00+00:00 is later " \
                    f"than the source's newest row ({NEWEST})" in line.symptoms
            assert label_trace(claiming(t, NEWEST), ctx).freshness_pass is True
