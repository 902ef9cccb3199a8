"""`tether eval run`: cases against real MCP servers (tether over stdio and HTTP, a third-party
server), as named users, with the baseline and replay agents; resumable; clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from conftest import copy_project, free_port, http_process, run_cli
from tether.config import load_project
from tether.drift.publish import build
from tether.eval.cases import load_cases
from tether.eval.schemas import SCHEMA_DIR, rendered
from tether.eval.trace import RunIndex, Trace
from thirdparty import server_command, sqlite_copy

TETHER = str(Path(sys.executable).parent / "tether")
SOME = ["active-emea-fy27q1", "backlog-mgr-amer", "tickets-by-crm-id", "mgr-emea-asks-amer-customers",
        "support-email-masked", "paid-orders-count"]


@pytest.fixture(scope="module")
def project(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = copy_project(demo_dir, tmp_path_factory.mktemp("evalrun"))
    build(load_project(d))
    return d


@pytest.fixture(scope="module")
def cases(demo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A subset of the demo's cases (the whole set runs in `make demo`)."""
    lines = (demo_dir / "cases.jsonl").read_text().splitlines()
    keep = [ln for ln in lines if json.loads(ln)["case_id"] in SOME]
    f = tmp_path_factory.mktemp("cases") / "cases.jsonl"
    f.write_text("\n".join(keep) + "\n")
    return f


def traces(run: Path) -> dict[str, Trace]:
    return {t.case_id: t for t in (Trace.model_validate_json(f.read_text())
                                   for f in sorted((run / "traces").glob("*.json")))}


def test_the_demo_case_set_is_valid_and_covers_every_failure_class(demo_dir: Path) -> None:
    loaded = load_cases(demo_dir / "cases.jsonl")
    assert not loaded.errors and len(loaded.cases) >= 30
    schema = json.loads((SCHEMA_DIR / "cases.schema.json").read_text())
    for line in (demo_dir / "cases.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), schema)
    users = {c.as_user for c in loaded.cases}
    assert {"fin.ana", "mgr.emea", "mgr.amer", "mgr.apac", "sup.sam"} <= users
    by_id = {c.case_id: c for c in loaded.cases}
    # the article's trap: the governed definition, with the look-alike columns forbidden
    emea = by_id["active-emea-fy27q1"].gold
    assert emea.forbidden_fields == ["customers.is_active", "customers.region_code"]
    assert emea.window is not None and emea.window.calendar == "fiscal"
    # a manager's gold is what the manager may see: their region's backlog only
    assert by_id["backlog-mgr-amer"].gold.answer < by_id["backlog-now"].gold.answer
    # another region's rows: the server refuses them, and the right answer declines
    assert by_id["mgr-emea-asks-amer-customers"].gold.answer == "refused"


def test_the_committed_schemas_match_the_models() -> None:
    for name, text in rendered().items():
        assert (SCHEMA_DIR / name).read_text() == text, (
            f"schemas/{name} is stale: run `python -m tether.eval.schemas --write`")


def test_a_bad_line_is_named_and_the_valid_cases_still_load(tmp_path: Path,
                                                           demo_dir: Path) -> None:
    good = (demo_dir / "cases.jsonl").read_text().splitlines()[:2]
    bad = json.loads(good[0])
    bad["case_id"] = "typo"
    bad["gold"]["tolerence"] = 1  # a typo in a field name
    f = tmp_path / "cases.jsonl"
    f.write_text("\n".join([good[0], "{not json", json.dumps(bad), good[1], good[0]]) + "\n")
    loaded = load_cases(f)
    assert [c.case_id for c in loaded.cases] == [json.loads(g)["case_id"] for g in good]
    errors = [str(e) for e in loaded.errors]
    assert errors[0].startswith(f"{f}:2: not JSON")
    assert errors[1].startswith(f"{f}:3: gold.tolerence: unknown field") and "'typo'" in errors[1]
    assert errors[2].startswith(f"{f}:5: case_id: duplicate case_id")


def test_run_against_tether_over_stdio_as_each_named_user(project: Path, cases: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = run_cli("eval", "run", "--server", f"stdio:{TETHER} serve --project {project}",
                  "--cases", str(cases), "--agent", "baseline", "--out", str(out),
                  "--concurrency", "3", "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["server"] == "tether-grounded" and summary["cases"] == len(SOME)
    index = RunIndex.model_validate_json((out / "index.json").read_text())
    assert sorted(e.case_id for e in index.entries) == sorted(SOME)
    got = traces(out)
    schema = json.loads((SCHEMA_DIR / "trace.schema.json").read_text())
    for f in (out / "traces").glob("*.json"):
        jsonschema.validate(json.loads(f.read_text()), schema)
    t = got["active-emea-fy27q1"]
    call = t.tool_calls[0]
    assert call.name == "active_customers_by_region_and_fiscal_quarter"
    assert call.arguments == {"period": "FY2027-Q1", "sales_region": ["EMEA"]}
    assert call.tool_version == "1.0.0" and not call.is_error and call.latency_ms > 0
    assert call.structured["as_of"] and t.answer == t.case.gold.answer
    assert t.turns and t.turns[-1].kind == "answer"
    # identity reached the server: the support agent sees five tools, email masked
    sam = got["support-email-masked"]
    assert len(sam.tools) == 5
    rows = sam.tool_calls[0].structured["rows"]
    assert rows and all(r.get("email", "[redacted]") == "[redacted]" for r in rows)
    # the regional manager's backlog is their region's: the same tool, fewer orders
    amer = got["backlog-mgr-amer"]
    assert amer.as_user == "mgr.amer" and amer.answer == amer.case.gold.answer
    # the entity trap: a CRM id passed where the canonical id is keyed is resolved by the
    # server through the crosswalk, in the same query, and the result says so
    crm = got["tickets-by-crm-id"].tool_calls[0]
    assert not crm.is_error and crm.structured["identifiers"]["canonical_customer_id"][
        "scheme"] == "crm_account_id"
    assert crm.structured["total_rows"] == got["tickets-by-crm-id"].case.gold.answer


def test_run_over_http_with_a_runner_token(project: Path, cases: Path, tmp_path: Path) -> None:
    res = run_cli("token", "add", "fin.ana", "--runner", "--project", str(project))
    assert res.returncode == 0, res.stderr
    token = res.stdout.strip()
    port = free_port()
    out = tmp_path / "http"
    argv = [TETHER, "serve", "--project", str(project), "--transport", "http", "--port", str(port)]
    with http_process(argv, port, timeout=30):
        url = f"http://127.0.0.1:{port}/mcp"
        res = run_cli("eval", "run", "--server", url, "--cases", str(cases), "--agent",
                      "baseline", "--out", str(out), "--as-user-via", "runner-token",
                      "--name", "tether-grounded-http",
                      env={**os.environ, "TETHER_RUNNER_TOKEN": token})
        assert res.returncode == 0, res.stdout + res.stderr
        no_token = run_cli("eval", "run", "--server", url, "--cases", str(cases), "--agent",
                           "baseline", "--out", str(tmp_path / "x"), "--as-user-via",
                           "runner-token", env={k: v for k, v in os.environ.items()
                                                if k != "TETHER_RUNNER_TOKEN"})
    assert no_token.returncode == 2 and "TETHER_RUNNER_TOKEN" in no_token.stderr
    got = traces(out)
    assert got["support-email-masked"].tool_calls[0].structured["rows"]
    assert len(got["support-email-masked"].tools) == 5  # sup.sam's tools, not the runner's
    assert got["backlog-mgr-amer"].answer == got["backlog-mgr-amer"].case.gold.answer


def test_a_killed_run_resumes_without_redoing_finished_cases(project: Path, cases: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "resume"
    argv = [TETHER, "eval", "run", "--server", f"stdio:{TETHER} serve --project {project}",
            "--cases", str(cases), "--agent", "baseline", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list((out / "traces").glob("*.json"))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = {f.name: f.stat().st_mtime_ns for f in (out / "traces").glob("*.json")}
    assert 2 <= len(first) < len(SOME)
    res = run_cli(*argv[1:], "--json")
    assert res.returncode == 0, res.stderr
    index = RunIndex.model_validate_json((out / "index.json").read_text())
    assert sorted(e.case_id for e in index.entries) == sorted(SOME)
    after = {f.name: f.stat().st_mtime_ns for f in (out / "traces").glob("*.json")}
    assert all(after[n] == m for n, m in first.items())  # finished cases were not rerun
    assert not list((out / "traces").glob(".*.tmp"))


def test_replay_reissues_the_recorded_calls(project: Path, cases: Path, tmp_path: Path) -> None:
    first, again = tmp_path / "first", tmp_path / "replay"
    base = ["eval", "run", "--server", f"stdio:{TETHER} serve --project {project}",
            "--cases", str(cases)]
    assert run_cli(*base, "--agent", "baseline", "--out", str(first)).returncode == 0
    res = run_cli(*base, "--agent", "replay", "--replay", str(first), "--out", str(again))
    assert res.returncode == 0, res.stderr
    a, b = traces(first), traces(again)
    for cid in SOME:
        assert [(c.name, c.arguments) for c in b[cid].tool_calls] == [
            (c.name, c.arguments) for c in a[cid].tool_calls]
        assert b[cid].final_answer == a[cid].final_answer and b[cid].agent == "replay"
        assert [c.structured for c in b[cid].tool_calls] == [c.structured for c in a[cid].tool_calls]


def test_run_against_a_third_party_server(demo_dir: Path, cases: Path, tmp_path: Path) -> None:
    db = sqlite_copy(demo_dir / "warehouse.duckdb", tmp_path / "demo.sqlite")
    exe = server_command("sqlite")
    out = tmp_path / "sqlite"
    res = run_cli("eval", "run", "--server", f"stdio:{exe} --db-path {db}", "--cases", str(cases),
                  "--agent", "baseline", "--out", str(out), "--as-user-via", "none")
    assert res.returncode == 0, res.stdout + res.stderr
    got = traces(out)
    assert set(got) == set(SOME)
    t = got["paid-orders-count"]
    assert [c.name for c in t.tool_calls] == ["list_tables", "describe_table", "read_query"]
    sql = t.tool_calls[-1].arguments["query"]
    assert sql.startswith("SELECT COUNT(*)") and "FROM orders" in sql
    assert t.answer == t.case.gold.answer  # status = 'PAID' from the capitalised word
    assert all(c.tool_version is None for c in t.tool_calls)
    # no identity reaches this server: the manager's question gets every region's rows
    mgr = got["mgr-emea-asks-amer-customers"]
    assert mgr.answer != mgr.case.gold.answer


@pytest.mark.parametrize(("args", "message"), [
    (["--server", "ftp://x"], "neither stdio:'CMD' nor an http(s) URL"),
    (["--agent", "nosuch"], "unknown agent 'nosuch'"),
    (["--as-user-via", "cookie:x"], "--as-user-via 'cookie:x' is not understood"),
    (["--agent", "replay"], "--agent replay needs --replay RUN_DIR"),
])
def test_bad_invocations_say_what_to_do(cases: Path, tmp_path: Path, args: list[str],
                                        message: str) -> None:
    options = {"--server": "stdio:true", "--agent": "baseline"} | dict(zip(args[::2], args[1::2],
                                                                          strict=True))
    flat = [x for kv in options.items() for x in kv]
    res = run_cli("eval", "run", "--cases", str(cases), "--out", str(tmp_path / "o"), *flat)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_harvest_turns_the_served_calls_into_candidate_cases(project: Path, tmp_path: Path) -> None:
    """The runs above went through tether's server: its call log is a source of cases. One
    refused call (a manager asking for another region's customers) is made here too."""
    import anyio
    from mcp import Client, StdioServerParameters

    async def refused() -> bool:
        params = StdioServerParameters(command=TETHER, args=[
            "serve", "--project", str(project), "--as-user", "mgr.emea"])
        async with Client(params) as c:
            r = await c.call_tool("customers_by_region_and_segment", {"sales_region": "AMER"})
            return bool(r.is_error)

    assert anyio.run(refused)
    out = tmp_path / "candidates.jsonl"
    res = run_cli("eval", "harvest", "--project", str(project), "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    loaded = load_cases(out)
    assert not loaded.errors and len(loaded.cases) == summary["cases"] > 0
    roles = {s["role"] for s in summary["strata"]}
    assert {"finance_analyst", "regional_manager", "support_agent"} <= roles
    # a refused call (another region's rows), then maybe the same tool again: an error, or a
    # retry episode, kept as its own stratum
    assert any(s["outcome"] in ("error", "retry") for s in summary["strata"]), summary["strata"]
    assert all(c.question.startswith("[write the question]") for c in loaded.cases)


def test_a_second_turn_is_measured_by_labelling_both_answers(project: Path, cases: Path,
                                                             tmp_path: Path) -> None:
    """proof/second_turn.py labels an ask_again run twice, with the scored reply and with the
    answer chosen first (the answer turn's draft), and counts the cases whose label changed."""
    from proof import second_turn

    out = tmp_path / "run"
    assert run_cli("eval", "run", "--server", f"stdio:{TETHER} serve --project {project}",
                   "--cases", str(cases), "--agent", "baseline", "--out",
                   str(out)).returncode == 0
    assert run_cli("eval", "label", str(out), "--project", str(project)).returncode == 0
    labels = {json.loads(x)["case_id"]: json.loads(x)
              for x in (out / "labels.jsonl").read_text().splitlines()}
    right = sorted(c for c, x in labels.items() if x["correct"])
    assert right, "the baseline answers some of these cases"
    for path in (out / "traces").glob("*.json"):  # as an ask_again run records them
        trace = json.loads(path.read_text())
        answer = next(t for t in reversed(trace["turns"]) if t["kind"] == "answer")
        answer["draft"] = ("no idea" if trace["case_id"] == right[0]
                           else trace["final_answer"])
        path.write_text(json.dumps(trace))
    got = second_turn.measure(out, project, TETHER)
    assert got["cases"] == len(labels) and got["asked_again"] == len(labels)
    assert got["rewritten"] == 1 and got["label_changed"] == 1
    assert got["wrong_to_right"] == [right[0]] and got["right_to_wrong"] == []
    assert got["correct_with_second_reply"] == len(right)
    assert got["correct_with_first_answer"] == len(right) - 1
