"""report.json, report.meta.json, report.html and the diff, from hand-written run folders.

Every expected number below is computed by hand from the label lines in this file.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from conftest import run_cli
from tether.eval.cases import Case, Gold
from tether.eval.html import fmt_usd, nice_ceiling
from tether.eval.prices import Price, PriceTable
from tether.eval.report import (
    REPORT_FIELDS,
    ReportError,
    build_report,
    diff_paths,
    diff_reports,
    load_labels,
    load_report,
    load_run,
    load_side,
    render_diff,
    write_report,
)
from tether.eval.trace import IndexEntry, RunIndex, Trace

GROUNDED, BARE = "tether-grounded", "third & <party>"
ODD = "q<2>&co"  # a case id that needs escaping in HTML and quoting in a URL

DEFAULTS: dict[str, Any] = {
    "correct": True, "grounded": True, "grounding_precision": 1.0, "grounding_recall": 1.0,
    "fields_used": [], "definition_match": None, "freshness_pass": None, "policy_violations": 0,
    "clarifications": 0, "tool_calls": 1, "turns": 2, "input_tokens": 1000, "output_tokens": 100,
    "usd": 0.0, "failure_class": None, "needs_human_review": False, "review_reason": None,
    "symptoms": [],
}


def label(case_id: str, server: str, **kw: Any) -> dict[str, Any]:
    return {"case_id": case_id, "server": server, **DEFAULTS, **kw}


# Server A: four labelled cases and one that errored before labelling.
A_LABELS = [
    label("c1", GROUNDED, definition_match=True, freshness_pass=True, tool_calls=2, usd=0.01),
    label(ODD, GROUNDED, grounded=False, grounding_precision=0.25, grounding_recall=0.25,
          definition_match=False, clarifications=1, tool_calls=4, usd=0.03, failure_class="semantic",
          symptoms=["semantic: forbidden field subscriptions.is_active"]),
    label("c3", GROUNDED, correct=False, grounded=False, grounding_precision=None,
          grounding_recall=None, freshness_pass=False, policy_violations=1, tool_calls=3, usd=0.02,
          failure_class="policy", needs_human_review=True, review_reason="oracle <unsure>"),
    label("c4", GROUNDED, correct=None, grounded=None, grounding_precision=0.5, grounding_recall=0.0,
          definition_match=True, clarifications=2, tool_calls=1, usd=0.04, needs_human_review=True,
          review_reason="answer unreadable"),
]
# Server B: nothing has a denominator (no definitions, bounds or calls), nothing is right.
B_LABELS = [
    label("c1", BARE, grounded=False, grounding_precision=None, grounding_recall=None, tool_calls=0,
          usd=0.005, failure_class="entity"),
    label("c3", BARE, correct=False, grounded=False, grounding_precision=None, grounding_recall=None,
          tool_calls=0, usd=0.007, failure_class="temporal"),
]


def make_run(d: Path, server: str, labels: list[dict[str, Any]] | None, *, run_id: str | None = None,
             traces: tuple[str, ...] = (), extra_entries: tuple[str, ...] = ()) -> Path:
    """A run folder as `tether eval run` + `tether eval label` would leave it."""
    (d / "traces").mkdir(parents=True)
    t0 = dt.datetime(2026, 8, 20, 9, tzinfo=dt.UTC)
    ids = [x["case_id"] for x in labels or []] + list(extra_entries)
    entries = [IndexEntry(case_id=c, file=f"traces/{c}.json",
                          status="error" if c in extra_entries else "done") for c in ids]
    index = RunIndex(run_id=run_id or f"run-{d.name}", server=server, target="stdio:'tether serve'",
                     agent="scripted", model="qwen2.5-7b", cases_file="cases.jsonl", started_at=t0,
                     finished_at=t0 + dt.timedelta(minutes=3), entries=entries)
    (d / "index.json").write_text(index.model_dump_json(indent=2))
    for cid in traces:
        case = Case(case_id=cid, user_role="analyst", as_user="ana", question="How many?",
                    gold=Gold(answer=3))
        trace = Trace(case_id=cid, server=server, target=index.target, agent="scripted",
                      as_user="ana", user_role="analyst", question=case.question, case=case,
                      started_at=t0)
        (d / "traces" / f"{cid}.json").write_text(trace.model_dump_json(indent=2))
    if labels is not None:
        (d / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return d


@pytest.fixture()
def runs(tmp_path: Path) -> tuple[Path, Path]:
    a = make_run(tmp_path / "runs" / "a", GROUNDED, A_LABELS, traces=("c1", ODD),
                 extra_entries=("c5",))
    b = make_run(tmp_path / "runs" / "b", BARE, B_LABELS, traces=("c1", "c3"))
    return a, b


def test_every_field_by_hand(runs: tuple[Path, Path]) -> None:
    ra, rb = build_report(list(runs))
    assert list(ra) == list(REPORT_FIELDS) and list(rb) == list(REPORT_FIELDS)
    assert ra == {
        "server": GROUNDED, "run_id": "run-a", "cases": 4,
        "correct": 2,                                  # c1, q<2>&co (c4's null is not correct)
        "correct_and_grounded": 1,                     # c1
        "correct_grounded_and_fresh": 1,               # c1: its freshness did not fail
        "grounding_precision": pytest.approx(1.75 / 3),  # (1 + .25 + .5) / 3, c3 has none
        "grounding_recall": pytest.approx(1.25 / 3),     # (1 + .25 + 0) / 3
        "definition_match_rate": pytest.approx(2 / 3),   # T, F, T over 3 with a gold definition
        "freshness_pass_rate": 0.5,                    # T, F over 2 with a bound
        "policy_violation_rate": pytest.approx(0.1),   # 1 call with a violation / 10 calls
        "clarification_loops_per_task": 0.75,          # 3 / 4
        "cost_total_usd": pytest.approx(0.10),
        "cost_per_correct_answer_usd": pytest.approx(0.10),  # 0.10 / 1 correct and grounded
        "failures_by_class": {"entity": 0, "semantic": 1, "structural": 0, "temporal": 0, "policy": 1},
        "needs_human_review": 2,
    }
    assert rb == {
        "server": BARE, "run_id": "run-b", "cases": 2, "correct": 1, "correct_and_grounded": 0,
        "correct_grounded_and_fresh": 0, "grounding_precision": None, "grounding_recall": None,
        "definition_match_rate": None,
        "freshness_pass_rate": None, "policy_violation_rate": None,
        "clarification_loops_per_task": 0.0, "cost_total_usd": pytest.approx(0.012),
        "cost_per_correct_answer_usd": None,
        "failures_by_class": {"entity": 1, "semantic": 0, "structural": 0, "temporal": 1, "policy": 0},
        "needs_human_review": 0,
    }


def test_a_class_on_a_correct_and_grounded_case_is_not_a_failure(tmp_path: Path) -> None:
    d = make_run(tmp_path / "r", GROUNDED, [label("c1", GROUNDED, failure_class="policy")])
    (r,) = build_report([d])
    assert r["failures_by_class"]["policy"] == 0 and r["correct_and_grounded"] == 1


def test_write_report_files(runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out" / "reports"
    prices = PriceTable(default=Price(input_per_million=0.1, output_per_million=0.4),
                        models={"gpt-*": Price(input_per_million=1, output_per_million=2)})
    json_path, html_path = write_report(list(runs), out, prices)
    assert json_path == out / "report.json" and html_path == out / "report.html"
    report = json.loads(json_path.read_text())
    assert report == json.loads(json.dumps(build_report(list(runs))))
    assert load_report(json_path) == report

    meta = json.loads((out / "report.meta.json").read_text())
    assert meta["prices"] == prices.statement() and "1 model-specific prices" in meta["prices"]
    ma, mb = meta["servers"]
    assert ma["run_dir"] == "../../runs/a" and ma["agent"] == "scripted"
    assert ma["model"] == "qwen2.5-7b"
    assert ma["denominators"] == {
        "grounding_precision": 3, "grounding_recall": 3, "definition_match_rate": 3,
        "freshness_pass_rate": 2, "policy_violation_rate": 10, "clarification_loops_per_task": 4,
        "cost_per_correct_answer_usd": 1}
    assert ma["correct_rate"] == 0.5 and ma["input_tokens"] == 4000 and ma["tool_calls"] == 10
    assert ma["nulls"] == {}
    assert ma["unlabelled_cases"] == ["c5"] and ma["unclassified_failures"] == ["c4"]
    cases = {c["case_id"]: c for c in ma["cases"]}
    assert cases["c3"]["trace"] is None  # no trace file: no link
    assert cases[ODD]["trace"] == "../../runs/a/traces/q%3C2%3E%26co.json"
    assert set(mb["nulls"]) == {"grounding_precision", "grounding_recall", "definition_match_rate",
                                "freshness_pass_rate", "policy_violation_rate",
                                "cost_per_correct_answer_usd"}
    assert mb["nulls"]["cost_per_correct_answer_usd"] == "no case was answered correctly and grounded"
    assert mb["nulls"]["definition_match_rate"] == "no case has a gold definition"


def test_html_page(runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out" / "reports"
    _, html_path = write_report(list(runs), out)
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert GROUNDED in page and "third &amp; &lt;party&gt;" in page and "<party>" not in page
    assert "q&lt;2&gt;&amp;co" in page and ODD not in page
    assert "oracle &lt;unsure&gt;" in page  # review reason in a cell's title
    assert page.count("<svg") == 3  # rates, failures by class, cost per correct answer
    for title in ("Rates by server", "Failures by class", "Cost per correct and grounded answer"):
        assert f"<title>{title}" in page
    assert PriceTable().statement() in page
    assert "no case was answered correctly and grounded" in page  # a null is stated
    assert "c5" in page  # the unlabelled case is called out
    assert "n = 10" in page  # policy violation rate's denominator: all calls
    # each case links to its trace inside the page (one self-contained file), shown as a
    # conversation; the raw JSON stays one click further
    links = re.findall(r'<a href="([^"]+)">trace</a>', page)
    assert len(links) == 4  # a: c1, q<2>&co; b: c1, c3
    for href in links:
        assert href.startswith("#") and f'<section id="{href[1:]}" class="trace">' in page, href
    assert page.count('class="question"') == 4 and "How many?" in page
    raw = re.findall(r'<a class="raw muted" href="([^"]+)">JSON</a>', page)
    assert len(raw) == 4
    for href in raw:
        target = (out / unquote(href.replace("&amp;", "&"))).resolve()
        assert target.is_file() and target.parent.name == "traces", href
    # one row per case, in first-seen order; b never ran q<2>&co and c4
    rows = re.findall(r"<tr><th>([^<]*)</th><td class=\"(\w+)\"[^>]*>.*?<td class=\"(\w+)\"", page)
    cases = [(r[0], r[1], r[2]) for r in rows if r[0] in ("c1", "q&lt;2&gt;&amp;co", "c3", "c4")]
    assert cases == [("c1", "ok", "ungrounded"), ("q&lt;2&gt;&amp;co", "ungrounded", "none"),
                     ("c3", "wrong", "wrong"), ("c4", "unknown", "none")]


def test_html_is_deterministic(runs: tuple[Path, Path], tmp_path: Path) -> None:
    _, h1 = write_report(list(runs), tmp_path / "o1")
    _, h2 = write_report(list(runs), tmp_path / "o2")
    assert h1.read_text() == h2.read_text()


def test_formatting_helpers() -> None:
    assert [fmt_usd(v) for v in (None, 0, 0.0912, 0.0000123, 1.5)] == [
        "n/a", "$0.00", "$0.0912", "$0.0000123", "$1.50"]
    assert [nice_ceiling(v) for v in (0, 0.0912, 3, 10, 11)] == [1, 0.1, 5, 10, 20]


# ---------------------------------------------------------------- diff


def _after(tmp_path: Path) -> Path:
    """Run A again after a context change: c1 regressed, q<2>&co improved, c3 changed class."""
    labels = [dict(x) for x in A_LABELS]
    labels[0].update(correct=False, failure_class="semantic")
    labels[1].update(grounded=True, grounding_precision=1.0, grounding_recall=1.0,
                     definition_match=True, failure_class=None)
    labels[2].update(failure_class="entity")
    labels.append(label("c6", GROUNDED, usd=0.0))
    return make_run(tmp_path / "runs" / "a2", GROUNDED, labels, run_id="run-a2")


def test_diff_deltas_and_flips(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a2 = _after(tmp_path)
    third = make_run(tmp_path / "runs" / "c", "mcp-server-sqlite", [label("c1", "mcp-server-sqlite")])
    d = diff_paths_dirs([runs[0], runs[1]], [a2, third])
    assert d["servers_added"] == ["mcp-server-sqlite"] and d["servers_removed"] == [BARE]
    (s,) = d["servers"]
    assert s["server"] == GROUNDED and (s["run_id_a"], s["run_id_b"]) == ("run-a", "run-a2")
    m = s["metrics"]
    assert m["cases"] == {"a": 4, "b": 5, "delta": 1, "change": "changed"}
    assert m["correct"] == {"a": 2, "b": 2, "delta": 0, "change": "same"}  # c1 lost, c6 gained
    assert m["correct_and_grounded"]["delta"] == 1 and m["correct_and_grounded"]["change"] == "better"
    # definition match: T, T, T over 3 -> 1.0 (was 2/3)
    assert m["definition_match_rate"]["delta"] == pytest.approx(1 / 3)
    assert m["definition_match_rate"]["change"] == "better"
    assert m["failures_by_class.policy"] == {"a": 1, "b": 0, "delta": -1, "change": "better"}
    assert m["failures_by_class.entity"] == {"a": 0, "b": 1, "delta": 1, "change": "worse"}
    assert m["failures_by_class.semantic"]["change"] == "same"  # q<2>&co fixed, c1 broke
    flips = {f["case_id"]: f for f in s["flipped"]}
    assert set(flips) == {"c1", ODD, "c3"}
    assert flips["c1"]["direction"] == "regressed" and flips["c1"]["changed"] == ["correct",
                                                                                  "failure_class"]
    assert flips[ODD]["direction"] == "improved"
    assert flips["c3"] == {"case_id": "c3", "direction": "changed", "changed": ["failure_class"],
                           "a": {"correct": False, "grounded": False, "failure_class": "policy"},
                           "b": {"correct": False, "grounded": False, "failure_class": "entity"}}
    assert s["cases_added"] == ["c6"] and s["cases_removed"] == []
    assert (d["regressed"], d["improved"]) == (1, 1)

    text = render_diff(d)
    assert "only in B: mcp-server-sqlite" in text and f"only in A: {BARE}" in text
    assert "c1  regressed: correct, grounded -> not correct, grounded (semantic)" in text
    assert "cases only in B: c6" in text and "1 case(s) regressed, 1 improved." in text
    short = render_diff(d, only_changes=True)
    assert "failures_by_class.structural" in text and "failures_by_class.structural" not in short


def diff_paths_dirs(a: list[Path], b: list[Path]) -> dict[str, Any]:
    """diff_reports over run folders, with each run's labels as the per-case outcomes."""
    runs_a, runs_b = [load_run(p) for p in a], [load_run(p) for p in b]
    return diff_reports(build_report(a), build_report(b), {r.server: r.labels for r in runs_a},
                        {r.server: r.labels for r in runs_b})


def test_diff_from_paths(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a2 = _after(tmp_path)
    by_run = diff_paths(runs[0], a2)  # run folders: labels at hand
    write_report([runs[0]], tmp_path / "ra")
    write_report([a2], tmp_path / "rb")
    by_report = diff_paths(tmp_path / "ra", tmp_path / "rb" / "report.json")  # meta: outcomes
    assert by_run == by_report and by_run["regressed"] == 1
    (tmp_path / "rb" / "report.meta.json").unlink()
    bare = diff_paths(tmp_path / "ra", tmp_path / "rb")
    assert bare["servers"][0]["flipped"] is None and bare["regressed"] == 0
    assert bare["servers"][0]["metrics"] == by_run["servers"][0]["metrics"]
    assert "flipped cases not compared" in render_diff(bare)
    report, outcomes = load_side(runs[1])
    assert report[0]["server"] == BARE and outcomes is not None and len(outcomes[BARE]) == 2


def test_diff_of_nulls() -> None:
    a = build_like(cost_per_correct_answer_usd=None, freshness_pass_rate=None)
    b = build_like(cost_per_correct_answer_usd=0.5, freshness_pass_rate=None)
    m = diff_reports([a], [b])["servers"][0]["metrics"]
    assert m["cost_per_correct_answer_usd"] == {"a": None, "b": 0.5, "delta": None, "change": "n/a"}
    assert m["freshness_pass_rate"]["change"] == "same"
    assert diff_reports([a], [b])["servers"][0]["flipped"] is None


def build_like(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict.fromkeys(REPORT_FIELDS, 0.0)
    base.update(server="s", run_id="r", cases=1, correct=1, correct_and_grounded=1,
                needs_human_review=0, failures_by_class=dict.fromkeys(
                    ("entity", "semantic", "structural", "temporal", "policy"), 0))
    base.update(kw)
    return base


# ---------------------------------------------------------------- bad inputs


def test_run_without_labels_says_to_label(tmp_path: Path) -> None:
    d = make_run(tmp_path / "unlabelled", GROUNDED, None, extra_entries=("c1",))
    with pytest.raises(ReportError) as e:
        build_report([d])
    assert "has no labels.jsonl" in str(e.value) and f"tether eval label {d}" in str(e.value)


def test_bad_folders(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="does not exist"):
        build_report([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match=r"no index\.json"):
        build_report([tmp_path / "empty"])
    with pytest.raises(ReportError, match="no run folder given"):
        build_report([])
    d = make_run(tmp_path / "bad-index", GROUNDED, [label("c1", GROUNDED)])
    (d / "index.json").write_text('{"run_id": 1}')
    with pytest.raises(ReportError, match=r"index.json is not valid: .*"):
        build_report([d])
    (d / "index.json").write_text("{")
    with pytest.raises(ReportError, match="not JSON"):
        build_report([d])


def test_two_runs_of_one_server_are_refused(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", GROUNDED, [label("c1", GROUNDED)])
    b = make_run(tmp_path / "b", GROUNDED, [label("c1", GROUNDED)])
    with pytest.raises(ReportError, match="two run folders are for server 'tether-grounded'") as e:
        build_report([a, b])
    assert "tether eval diff" in str(e.value)


@pytest.mark.parametrize(("lines", "message"), [
    ([label("c1", GROUNDED), {"case_id": "c2"}], r"labels.jsonl:2: label line is not valid: server"),
    ([label("c1", GROUNDED), label("c1", GROUNDED)], r":2: case 'c1' is labelled twice \(first on line 1\)"),
    ([label("c1", "other")], r":1: label names server 'other' but the run's index.json says"),
    ([label("c1", GROUNDED, failure_class="vibes")], r":1: label line is not valid: failure_class"),
    ([], r"labels.jsonl: labels.jsonl has no labelled case"),
])
def test_bad_label_lines(tmp_path: Path, lines: list[dict[str, Any]], message: str) -> None:
    d = make_run(tmp_path / "r", GROUNDED, lines)
    with pytest.raises(ReportError, match=message):
        build_report([d])


def test_label_line_not_json(tmp_path: Path) -> None:
    p = tmp_path / "labels.jsonl"
    p.write_text(json.dumps(label("c1", GROUNDED)) + "\n\n{oops\n")
    with pytest.raises(ReportError, match=r"labels.jsonl:3: label line is not JSON"):
        load_labels(p)


def test_bad_reports(tmp_path: Path) -> None:
    p = tmp_path / "report.json"
    with pytest.raises(ReportError, match="does not exist"):
        load_report(p)
    p.write_text('{"server": "x"}')
    with pytest.raises(ReportError, match="JSON array of objects"):
        load_report(p)
    p.write_text('[{"server": "x", "run_id": "r"}]')
    with pytest.raises(ReportError, match="object 0 lacks cases, correct, "):
        load_report(p)
    p.write_text(json.dumps([build_like(), build_like()]))
    with pytest.raises(ReportError, match="server 's' appears twice"):
        load_report(p)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="neither a run folder"):
        load_side(tmp_path / "empty")
    with pytest.raises(ReportError, match=r"does not exist\. Give a run folder"):
        diff_paths(tmp_path / "nowhere", tmp_path)
    (tmp_path / "report.meta.json").write_text("{}")
    p.write_text(json.dumps([build_like()]))
    with pytest.raises(ReportError, match="no per-case outcomes"):
        load_side(tmp_path)


def test_the_cli_report_and_diff(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """`tether eval report` writes the files; `tether eval diff` exits 1 on a regression (CI)."""
    res = run_cli("eval", "report", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "r"),
                  "--json")
    assert res.returncode == 0, res.stderr
    assert [o["server"] for o in json.loads(res.stdout)] == [GROUNDED, BARE]
    assert (tmp_path / "r" / "report.html").is_file()
    a2 = _after(tmp_path)
    same = run_cli("eval", "diff", str(runs[0]), str(runs[0]), "--json")
    assert same.returncode == 0 and json.loads(same.stdout)["regressed"] == 0
    worse = run_cli("eval", "diff", str(runs[0]), str(a2))
    assert worse.returncode == 1 and "1 case(s) regressed" in worse.stdout
    missing = run_cli("eval", "report", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
