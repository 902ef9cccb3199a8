"""`tether learn` on both test warehouses: real calls through the server make the call log, a
scripted agent's cases run through `tether eval run` (replay) and `tether eval label` make the
labelled runs, and each proposal kind comes out of them; applying publishes through the gate,
dismissing holds until newer evidence, and nothing learn writes reaches a policy, a governed
definition or a unit.

The calls are chosen from what each warehouse's published tools declare (schemes, enums,
periods, policies), never from names known here, so the same test runs on any project."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import call_tools, copy_project, run_cli, with_serve
from test_eval_agents import FakeEndpoint, chat, fake, fn_call  # noqa: F401  (fake: a fixture)
from tether.config import load_project
from tether.context.meta import enum_of
from tether.drift.publish import build
from tether.errors import ConfigError
from tether.learn.observe import Listing, listings
from tether.learn.propose import learn
from tether.registry import open_registry

WAREHOUSES = ("demo", "second")


def _dir(which: str, request: pytest.FixtureRequest) -> Path:
    return Path(request.getfixturevalue("demo_dir" if which == "demo" else "second_dir"))


def _project(which: str, request: pytest.FixtureRequest, tmp: Path, extra: str = "") -> Path:
    d = copy_project(_dir(which, request), tmp)
    if extra:
        (d / "tether.yaml").write_text((d / "tether.yaml").read_text() + extra)
    build(load_project(d))
    return d


def _listings(d: Path) -> dict[str, Listing]:
    registry = open_registry(load_project(d))
    try:
        return listings(registry.current())
    finally:
        registry.close()


def _unfiltered_user(d: Path, product: str) -> str | None:
    """A user whose role reads every row of the product (and may call its tool)."""
    config = load_project(d).config
    for name, u in config.policies.users.items():
        role = config.policies.roles[u.role]
        if product not in role.row_filters and role.tools == ["*"]:
            return name
    return None


def _widest_user(d: Path) -> str:
    config = load_project(d).config
    return next(n for n, u in config.policies.users.items()
                if config.policies.roles[u.role].tools == ["*"])


def _enum_param(la: Listing) -> tuple[str, list[Any]] | None:
    for p in la.params:
        values = enum_of(la.props.get(p) or {})
        if values and len(values) >= 2:
            return p, list(values)
    return None


def _value_of_scheme(d: Path, user: str, found: dict[str, Listing], scheme: str) -> str | None:
    """A real value of ``scheme``, read through a tool that lists it."""
    config = load_project(d).config
    for la in found.values():
        cols = [c for c, s in config.products[la.product].identifiers.items() if s == scheme]
        if not cols:
            continue
        res = call_tools(load_project(d), user, [(la.tool, {"limit": 5})])[0]
        for row in (res.structured_content or {}).get("rows") or []:
            if isinstance(row.get(cols[0]), str):
                return str(row[cols[0]])
    return None


def _rules(result: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for p in result.proposals:
        out.setdefault(p.rule, []).append(p)
    return out


@pytest.mark.parametrize("which", WAREHOUSES)
def test_call_log_yields_each_proposal_kind(which: str, request: pytest.FixtureRequest,
                                            tmp_path: Path) -> None:
    d = _project(which, request, tmp_path / "p")
    found = _listings(d)
    config = load_project(d).config
    user = _widest_user(d)
    calls: list[tuple[str, dict[str, Any]]] = []
    # scheme confusion: another scheme's real value given to a parameter that takes only its own
    confused = None
    for la in found.values():
        for param, takes in la.schemes.items():
            own = takes[0]
            others = [s for s, sc in config.identifier_schemes.items()
                      if s not in takes and sc.pattern]
            for other in others:
                value = _value_of_scheme(d, user, found, other)
                if value is not None and not re.search(config.identifier_schemes[own].pattern
                                                       or "$^", value):
                    confused = (la, param)
                    calls += [(la.tool, {param: value})] * 3
                    break
            if confused:
                break
        if confused:
            break
    if confused is None:  # a parameter with no routes: its own scheme only, from the config
        for la in found.values():
            ids = config.products[la.product].identifiers
            for param, column in la.params.items():
                own = ids.get(column)
                if own and param not in la.schemes:
                    other = next((s for s in config.identifier_schemes
                                  if s != own and config.identifier_schemes[s].pattern), None)
                    value = _value_of_scheme(d, user, found, other) if other else None
                    if value:
                        confused = (la, param)
                        calls += [(la.tool, {param: value})] * 3
                        break
            if confused:
                break
    assert confused is not None, "no identifier parameter to confuse"
    # interpreted: a parameter given by its column's name, or an enum value given to the wrong
    # parameter (the server moves it)
    moved = None
    for la in found.values():
        pair = _enum_param(la)
        if pair and len(la.params) >= 2:
            param, values = pair
            other = next(p for p in la.params if p != param)
            moved = (la, param)
            calls += [(la.tool, {other: values[0], "limit": 1})] * 3
            break
    assert moved is not None
    # always empty and values never asked: an enum value in a window before the data, by a
    # caller who reads every row; then one value of an enum, many times
    empty = None
    for la in found.values():
        pair = _enum_param(la)
        reader = _unfiltered_user(d, la.product)
        if pair and la.period and reader:
            empty = (la, reader)
            calls_empty = [(la.tool, {pair[0]: [pair[1][0]], "period": "1990-01"})] * 3
            asked = [(la.tool, {pair[0]: [pair[1][0]], "limit": 1})] * 20
            break
    assert empty is not None, "no listing with an enum and a period that someone reads whole"
    call_tools(load_project(d), user, calls)
    call_tools(load_project(d), empty[1], calls_empty + asked)

    result = learn(load_project(d))
    rules = _rules(result)
    la, param = confused
    [conf] = [p for p in rules["scheme_confusion"] if p.tool == la.tool]
    assert conf.support == 3 and conf.change.path[-2:] == [la.params[param], "notes"]
    assert len(conf.sample) == 3 and all(s.error for s in conf.sample)
    assert all(str(s.arguments[param]) not in conf.change.sentence for s in conf.sample), \
        "an identifier value a caller typed never enters a description"
    interp = [p for p in rules["interpreted_arguments"] if p.tool == moved[0].tool]
    assert interp and interp[0].change.column == moved[0].params[moved[1]]
    assert any(p.tool == empty[0].tool and "1990-01" in p.change.sentence
               for p in rules["always_empty"])
    assert any(p.tool == empty[0].tool and p.support >= 20
               for p in rules["values_never_asked"])

    # applying publishes through the gate: a patch, its sentence sourced execution_logs
    pid = conf.id
    res = run_cli("learn", "--apply", str(pid), "--project", str(d), "--json")
    assert res.returncode == 10, res.stdout + res.stderr
    tools = {t["name"]: t for t in json.loads(run_cli("tools", "--project", str(d),
                                                      "--json").stdout)}
    t = tools[la.tool]
    ctx = t["_meta"]["tether/context"]
    assert ctx["version"] == "1.0.1" and ctx["change_level"] == "patch"
    assert conf.change.sentence.rstrip(".") in t["inputSchema"]["properties"][param]["description"]
    assert ctx["field_origins"][la.params[param]]["notes"].startswith("learn:proposal")
    # a product note: its sentence in the description, source execution_logs
    note = next(p for p in rules["always_empty"] if p.tool == empty[0].tool)
    assert run_cli("learn", "--apply", str(note.id), "--project", str(d)).returncode == 10
    t = {t["name"]: t for t in json.loads(run_cli("tools", "--project", str(d),
                                                  "--json").stdout)}[empty[0].tool]
    said = t["_meta"]["tether/context"]["sources"]
    assert [s for s, src in said.items() if src == "execution_logs"] == [
        note.change.sentence.rstrip(".") + "."]
    assert note.change.sentence in t["description"]
    again = learn(load_project(d))
    assert pid not in {p.id for p in again.proposals}  # applied: not proposed again


def _dimension_listing(d: Path) -> tuple[Listing, str, list[Any], str]:
    """A listing whose enum parameter filters a column a governed metric is cut by, and another
    parameter of it (the moved value's origin)."""
    config = load_project(d).config
    dims = {x for m in config.metrics.values() for x in m.dimensions}
    for la in _listings(d).values():
        for param, column in la.params.items():
            values = enum_of(la.props.get(param) or {})
            others = [p for p in la.params if p != param]
            if values and len(values) >= 2 and others and f"{la.product}.{column}" in dims:
                return la, param, list(values), others[0]
    raise AssertionError("no listing filters a metric's dimension")


@pytest.mark.parametrize("which", WAREHOUSES)
def test_nothing_learn_writes_reaches_a_policy_a_metric_or_a_unit(
        which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    d = _project(which, request, tmp_path / "p")
    user = _widest_user(d)
    # a note on a column a governed metric is cut by: the metric's tool keeps its words
    la, param, values, other = _dimension_listing(d)
    call_tools(load_project(d), user, [(la.tool, {other: values[0], "limit": 1})] * 3)
    result = learn(load_project(d))
    registry = open_registry(load_project(d))
    before = {n: v.version for n, v in registry.current().items()}
    registry.close()
    for p in result.proposals:
        assert run_cli("learn", "--apply", str(p.id), "--project", str(d)).returncode in (0, 10)
    registry = open_registry(load_project(d))
    after = registry.current()
    registry.close()
    changed = {n for n, v in after.items() if v.version != before.get(n)}
    assert la.tool in changed and all(after[n].plan.get("kind") == "list" for n in changed), \
        changed
    assert "policy" not in changed
    applied = [p for p in result.proposals if p.change.column == la.params[param]]
    assert applied and applied[0].change.sentence in json.dumps(after[la.tool].definition)
    # a learn layer holding anything but notes is refused when read, never applied
    path = d / ".tether" / "imports" / "learn.json"
    layer = json.loads(path.read_text())
    product = next(iter(layer["config"]["products"]))
    layer["config"]["products"][product]["columns"] = {"x": {"unit": "USD"}}
    path.write_text(json.dumps(layer))
    with pytest.raises(ConfigError, match="learn writes only notes"):
        load_project(d)
    layer["config"] = {"policies": {"roles": {}}}
    path.write_text(json.dumps(layer))
    res = run_cli("check", "--project", str(d))
    assert res.returncode == 2 and "learn writes only notes" in res.stderr


def test_dismissed_stays_away_until_new_evidence(request: pytest.FixtureRequest,
                                                 tmp_path: Path) -> None:
    d = _project("second", request, tmp_path / "p")
    found = _listings(d)
    user = _widest_user(d)
    la = next(la for la in found.values() if _enum_param(la) and len(la.params) >= 2)
    param, values = _enum_param(la)  # type: ignore[misc]
    other = next(p for p in la.params if p != param)
    bad = [(la.tool, {other: values[0], "limit": 1})] * 3
    call_tools(load_project(d), user, bad)
    [p] = [p for p in learn(load_project(d)).proposals if p.rule == "interpreted_arguments"]
    res = run_cli("learn", "dismiss", str(p.id), "--project", str(d))
    assert res.returncode == 0, res.stderr
    assert p.id not in {q.id for q in learn(load_project(d)).proposals}
    call_tools(load_project(d), user, bad[:1])  # one more call like them: new evidence
    back = learn(load_project(d))
    assert back.reopened == 1 and p.id in {q.id for q in back.proposals}
    # an applied one dismissed: its sentence is taken out through the gate
    assert run_cli("learn", "--apply", str(p.id), "--project", str(d)).returncode == 10
    res = run_cli("learn", "dismiss", str(p.id), "--project", str(d), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["check"]["exit_code"] == 10
    tools = {t["name"]: t for t in json.loads(run_cli("tools", "--project", str(d),
                                                      "--json").stdout)}
    assert p.change.sentence not in json.dumps(tools[la.tool])
    # bad input: clear errors, exit 2
    for argv, says in ((["--apply", "999"], "no proposal 999"),
                       (["--apply", str(p.id)], "is dismissed, not open"),
                       (["--since", "yesterday-ish"], "neither a date")):
        res = run_cli("learn", *argv, "--project", str(d))
        assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("which", WAREHOUSES)
def test_slow_combinations_from_calls_past_the_timeout(which: str, request: pytest.FixtureRequest,
                                                       tmp_path: Path) -> None:
    """Calls that ran to the statement timeout are slow; the proposal says what narrows them."""
    d = _project(which, request, tmp_path / "p")
    path = d / "tether.yaml"  # every statement now runs into the timeout
    path.write_text(with_serve(path.read_text(), statement_timeout_seconds=0.001))
    found = _listings(d)
    user = _widest_user(d)
    la = next(la for la in found.values() if la.period and _enum_param(la))
    call_tools(load_project(d), user, [(la.tool, {"limit": 200})] * 4)
    rules = _rules(learn(load_project(d)))
    [slow] = [p for p in rules["slow_combination"] if p.tool == la.tool]
    assert "with no filter" in slow.change.sentence and "period" in slow.change.sentence
    assert slow.change.path == ["products", la.product, "notes"]


# --- labelled runs ------------------------------------------------------------------------------


def _scripted_run(d: Path, tmp: Path, cases: list[dict[str, Any]],
                  scripts: dict[str, dict[str, Any]]) -> Path:
    """The cases run through `tether eval run` by the replay agent from scripted traces (a
    model's calls and answer, written as a model would make them), then labelled."""
    cases_file = tmp / "cases.jsonl"
    cases_file.write_text("".join(json.dumps(c) + "\n" for c in cases))
    script = tmp / "script"
    (script / "traces").mkdir(parents=True)
    for cid, s in scripts.items():
        (script / "traces" / f"{cid}.json").write_text(json.dumps(s))
    out = tmp / "run"
    res = run_cli("eval", "run", "--server", f"stdio:{sys.executable} -m tether serve --project "
                  f"{d}", "--cases", str(cases_file), "--agent", "replay", "--replay",
                  str(script), "--out", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    res = run_cli("eval", "label", str(out), "--project", str(d))
    assert res.returncode == 0, res.stdout + res.stderr
    return out


@pytest.mark.parametrize("which", WAREHOUSES)
def test_labelled_runs_yield_their_proposal_kinds(which: str, request: pytest.FixtureRequest,
                                                  tmp_path: Path) -> None:
    d = _project(which, request, tmp_path / "p")
    found = _listings(d)
    config = load_project(d).config
    la = next(la for la in found.values() if _enum_param(la)
              and _unfiltered_user(d, la.product) and config.products[la.product].primary_key)
    user = str(_unfiltered_user(d, la.product))
    role = config.policies.users[user].role
    param, values = _enum_param(la)  # type: ignore[misc]
    total = call_tools(load_project(d), user, [(la.tool, {"limit": 1})])[0]
    n = total.structured_content["total_rows"]
    assert n > 5, "the product needs more rows than a page of 5"
    key = config.products[la.product].primary_key[0]
    cases, scripts = [], {}
    for i in range(2):  # a page read as the count, twice
        cid = f"page-{i}"
        cases.append({"case_id": cid, "user_role": role, "as_user": user,
                      "question": f"How many rows are there in all ({i})?",
                      "gold": {"answer": n, "required_fields": [f"{la.product}.{key}"]}})
        scripts[cid] = {"tool_calls": [{"name": la.tool, "arguments": {"limit": 5}, "turn": 0}],
                        "final_answer": "5", "answer": 5}
    for i in range(2):  # a filter the question never named, twice
        cid = f"unasked-{i}"
        cases.append({"case_id": cid, "user_role": role, "as_user": user,
                      "question": f"How many rows are there in all, counted ({i})?",
                      "gold": {"answer": n, "required_fields": [f"{la.product}.{key}"]}})
        scripts[cid] = {"tool_calls": [{"name": la.tool, "arguments": {
            param: [values[0]], "count_by": param}, "turn": 0}], "final_answer": "1", "answer": 1}
    run = _scripted_run(d, tmp_path, cases, scripts)
    res = run_cli("learn", "--from-eval", str(run), "--project", str(d), "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["cases"] == 4
    by = {(p["rule"], p["subject"]): p for p in got["proposals"] if p["tool"] == la.tool}
    page = by[("repeated_failure", "page_as_count")]
    assert page["support"] == 2 and "total_rows" in page["change"]["sentence"]
    assert {s["case_id"] for s in page["sample"]} == {"page-0", "page-1"}
    unasked = by[("parameters_not_named", param)]
    assert unasked["change"]["path"] == ["products", la.product, "columns", la.params[param],
                                         "notes"]
    assert {s["case_id"] for s in unasked["sample"]} == {"unasked-0", "unasked-1"}


@pytest.mark.parametrize("which", WAREHOUSES)
def test_clarifications_after_one_tool(which: str, request: pytest.FixtureRequest, tmp_path: Path,
                                       fake: FakeEndpoint) -> None:  # noqa: F811
    """A model (a local fake of the chat API: nothing reaches a hosted one) that calls a tool and
    then asks the user, in two cases, through `tether eval run --agent openai`."""
    endpoint = fake
    d = _project(which, request, tmp_path / "p")
    found = _listings(d)
    config = load_project(d).config
    la = next(iter(found.values()))
    user = _widest_user(d)
    role = config.policies.users[user].role
    cases = [{"case_id": f"ask-{i}", "user_role": role, "as_user": user,
              "question": f"What changed last period ({i})?", "gold": {"answer": 1}}
             for i in range(2)]
    for i in range(2):
        endpoint.reply(chat(None, fn_call(f"t{i}", la.tool, {"limit": 1}), finish="tool_calls"),
                       chat(None, fn_call(f"q{i}", "ask_user", {"question": "Which period?"}),
                            finish="tool_calls"),
                       chat("2"))  # wrong (gold 1): runs rules learn from what went wrong
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text("".join(json.dumps(c) + "\n" for c in cases))
    out = tmp_path / "run"
    res = run_cli("eval", "run", "--server", f"stdio:{sys.executable} -m tether serve --project "
                  f"{d}", "--cases", str(cases_file), "--agent", "openai", "--agent-option",
                  "model=local", "--agent-option", f"base_url={endpoint.url}/v1",
                  "--agent-option", "api_key_env=FAKE_KEY", "--concurrency", "1",
                  "--out", str(out), env={"FAKE_KEY": "sk-local-123"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert run_cli("eval", "label", str(out), "--project", str(d)).returncode == 0
    got = learn(load_project(d), runs=[out])
    [p] = [p for p in got.proposals if p.rule == "clarification_after"]
    assert p.tool == la.tool and p.support == 2 and p.change.path == ["products", la.product,
                                                                      "notes"]
    assert {s.said for s in p.sample} == {"asked: Which period?"}


def test_on_postgresql_source_and_registry(pg_second_dir: Path, pg_url: str,
                                           tmp_path: Path) -> None:
    """The same loop with the warehouse and the registry on PostgreSQL (the proposals table,
    the call log's details column, two learn runs at once taking turns)."""
    import threading
    import uuid

    import psycopg

    schema = f"tether_learn_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
    try:
        d = copy_project(pg_second_dir, tmp_path / "p")
        with open(d / "tether.yaml", "a") as f:
            f.write(f'registry: {{url: "{pg_url}?options=-csearch_path%3D{schema}"}}\n')
        build(load_project(d))
        found = _listings(d)
        la = next(la for la in found.values() if _enum_param(la) and len(la.params) >= 2)
        param, values = _enum_param(la)  # type: ignore[misc]
        other = next(p for p in la.params if p != param)
        call_tools(load_project(d), _widest_user(d),
                   [(la.tool, {other: values[0], "limit": 1})] * 3)
        results: list[Any] = []
        threads = [threading.Thread(target=lambda: results.append(learn(load_project(d))))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ids = [sorted(p.id for p in r.proposals) for r in results]
        assert ids[0] == ids[1] and ids[0]  # one row per proposal, whoever ran first
        assert sorted(r.new for r in results) == [0, len(ids[0])]
        p = next(p for r in results for p in r.proposals if p.rule == "interpreted_arguments")
        res = run_cli("learn", "--apply", str(p.id), "--project", str(d))
        assert res.returncode == 10, res.stdout + res.stderr
        res = run_cli("learn", "report", str(p.id), "--project", str(d), "--json")
        assert json.loads(res.stdout)["status"] == "applied"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]


def test_a_check_that_fails_leaves_the_layer_as_it_was(request: pytest.FixtureRequest,
                                                       tmp_path: Path) -> None:
    d = _project("second", request, tmp_path / "p")
    found = _listings(d)
    la = next(la for la in found.values() if _enum_param(la) and len(la.params) >= 2)
    param, values = _enum_param(la)  # type: ignore[misc]
    other = next(p for p in la.params if p != param)
    call_tools(load_project(d), _widest_user(d), [(la.tool, {other: values[0], "limit": 1})] * 3)
    [p] = [p for p in learn(load_project(d)).proposals if p.rule == "interpreted_arguments"]
    text = (d / "tether.yaml").read_text()
    gone = tmp_path / "gone" / "warehouse.duckdb"
    (d / "tether.yaml").write_text(re.sub(r"duckdb:///\S+", f"duckdb:///{gone}", text, count=1))
    res = run_cli("learn", "--apply", str(p.id), "--project", str(d))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert not (d / ".tether" / "imports" / "learn.json").exists() or p.change.sentence not in (
        d / ".tether" / "imports" / "learn.json").read_text()
    (d / "tether.yaml").write_text(text)  # the source is back: the proposal is still open
    assert p.id in {q.id for q in learn(load_project(d)).proposals}
    assert run_cli("learn", "--apply", str(p.id), "--project", str(d)).returncode == 10


def test_values_stay_out_where_a_role_reads_part(request: pytest.FixtureRequest,
                                                 tmp_path: Path) -> None:
    """Tool lists narrow enums to each caller's rows, and a description is the same for every
    caller: a value enters a sentence only where no role reads part of the product or a mask of
    the column. The evidence (calls, shown to reviewers only) keeps them."""
    for which in WAREHOUSES:
        d = _project(which, request, tmp_path / which)
        config = load_project(d).config
        la = next(la for la in _listings(d).values() if _enum_param(la) and la.period and any(
            la.product in r.row_filters for r in config.policies.roles.values()))
        param, values = _enum_param(la)  # type: ignore[misc]
        reader = _unfiltered_user(d, la.product) or _widest_user(d)
        call_tools(load_project(d), reader,
                   [(la.tool, {param: [values[0]], "period": "1990-01"})] * 3
                   + [(la.tool, {param: [values[0]], "limit": 1})] * 20)
        rules = _rules(learn(load_project(d)))
        mine = [p for r in ("always_empty", "values_never_asked") for p in rules.get(r, [])
                if p.tool == la.tool]
        assert any(p.rule == "values_never_asked" for p in mine), which
        for p in mine:
            assert not any(f'"{v}"' in p.change.sentence for v in values), p.change.sentence
        never = next(p for p in mine if p.rule == "values_never_asked")
        assert all(s.arguments.get(param) == [values[0]] for s in never.sample)


def test_what_callers_typed_stays_out_and_one_call_counts_once(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    d = _project("second", request, tmp_path / "p")
    la, _param, values, other = _dimension_listing(d)
    user = _widest_user(d)
    # a made-up name the server read from its value: interpreted, never repeated in a sentence
    typed = [(la.tool, {"Harbor clinics list": values[0], "limit": 1}),
             (la.tool, {"weekly_board_pack": values[0], "limit": 1})] * 3
    # two values moved in one call: one call of support, not two
    moved = [(la.tool, {other: values[:2], "limit": 1})] * 2
    long = [(la.tool, {"x" * 6000: values[0], "limit": 1})]  # the log keeps no 6 KB name
    results = call_tools(load_project(d), user, typed + moved + long)
    registry = open_registry(load_project(d))
    try:
        assert len(registry.calls()[-1]["details"] or "") <= 4096
    finally:
        registry.close()
    assert all(not r.is_error for r in results[:6]), results[0].content[0].text
    assert "interpreted" in results[0].structured_content
    props = [p for p in learn(load_project(d)).proposals if p.rule == "interpreted_arguments"]
    assert not [p for p in props if "Harbor" in p.change.sentence or "weekly" in
                p.change.sentence], [p.change.sentence for p in props]
    assert not [p for p in props if p.subject == "values"], "two calls are not three"


def test_learned_and_typed_notes_add_up_and_a_removed_product_leaves_them_behind(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    import yaml

    d = _project("demo", request, tmp_path / "p")
    la, param, values, other = _dimension_listing(d)
    call_tools(load_project(d), _widest_user(d), [(la.tool, {other: values[0], "limit": 1})] * 3)
    [p] = [p for p in learn(load_project(d)).proposals if p.rule == "interpreted_arguments"]
    assert run_cli("learn", "--apply", str(p.id), "--project", str(d)).returncode == 10
    data = yaml.safe_load((d / "tether.yaml").read_text())
    data["products"][la.product].setdefault("columns", {}).setdefault(
        la.params[param], {})["notes"] = ["Typed by the owner."]
    (d / "tether.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    res = run_cli("check", "--project", str(d))
    assert res.returncode == 10, res.stdout + res.stderr
    t = {t["name"]: t for t in json.loads(run_cli("tools", "--project", str(d),
                                                  "--json").stdout)}[la.tool]
    said = t["inputSchema"]["properties"][param]["description"]
    assert "Typed by the owner." in said and p.change.sentence in said
    # a learn layer naming a product tether.yaml no longer has: the project still loads
    path = d / ".tether" / "imports" / "learn.json"
    layer = json.loads(path.read_text())
    layer["config"]["products"]["no_such_product"] = {"notes": ["Gone."]}
    path.write_text(json.dumps(layer))
    assert "no_such_product" not in load_project(d).config.products
    assert run_cli("check", "--project", str(d)).returncode in (0, 10)


def test_two_learn_runs_at_once_on_sqlite(request: pytest.FixtureRequest, tmp_path: Path
                                          ) -> None:
    import threading

    d = _project("demo", request, tmp_path / "p")
    la, _param, values, other = _dimension_listing(d)
    call_tools(load_project(d), _widest_user(d), [(la.tool, {other: values[0], "limit": 1})] * 3)
    results: list[Any] = []
    errors: list[BaseException] = []

    def go() -> None:
        try:
            results.append(learn(load_project(d)))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len({tuple(sorted(p.id for p in r.proposals)) for r in results}) == 1
    assert sorted(r.new for r in results)[-1] == len(results[0].proposals)


def test_report_shows_the_regression_suite_before_and_after(request: pytest.FixtureRequest,
                                                           tmp_path: Path) -> None:
    """With eval.regression_suite set, applying replays the suite after the publication, and
    `tether learn report` shows its metrics before and after."""
    d = _project("second", request, tmp_path / "p")
    found = _listings(d)
    config = load_project(d).config
    la = next(la for la in found.values() if _enum_param(la)
              and _unfiltered_user(d, la.product) and config.products[la.product].primary_key)
    user = str(_unfiltered_user(d, la.product))
    n = call_tools(load_project(d), user, [(la.tool, {"limit": 1})])[0].structured_content[
        "total_rows"]
    key = config.products[la.product].primary_key[0]
    cases = [{"case_id": "page-0", "user_role": config.policies.users[user].role,
              "as_user": user, "question": "How many rows are there in all?",
              "gold": {"answer": n, "required_fields": [f"{la.product}.{key}"]}}]
    scripts = {"page-0": {"tool_calls": [{"name": la.tool, "arguments": {"limit": 5},
                                          "turn": 0}], "final_answer": "5", "answer": 5}}
    run = _scripted_run(d, tmp_path, cases, scripts)
    with open(d / "tether.yaml", "a") as f:
        f.write(f"eval:\n  regression_suite: {run}\n")
    got = learn(load_project(d), runs=[run])
    [p] = [p for p in got.proposals if p.rule == "repeated_failure"]
    res = run_cli("learn", "--apply", str(p.id), "--project", str(d), "--json")
    assert res.returncode == 10, res.stdout + res.stderr
    res = run_cli("learn", "report", str(p.id), "--project", str(d), "--json")
    report = json.loads(res.stdout)["report"]
    assert report["before"]["cases"] == report["after"]["cases"] == 1
    assert report["before"]["correct"] == 0 and report["flipped"] == []
    text = run_cli("learn", "report", str(p.id), "--project", str(d)).stdout
    assert "regression suite" in text and "correct_and_grounded" in text


@pytest.mark.parametrize("which", ["demo", "second"])
def test_arguments_given_beside_the_product_teach_only_their_names(
        which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Calls that flatten rows_from_data_product (the product's arguments beside ``product``)
    are read inside ``arguments``; learn notes the parameter a caller named another way
    (``salesRegion`` for ``sales_region``), never the shape of the call (``limit`` or the
    parameter's own name given beside the product: nothing to note)."""
    d = _project(which, request, tmp_path / "p")
    la, param, values = next(
        (la, p, list(v)) for la in _listings(d).values() for p in la.params
        if "_" in p and (v := enum_of(la.props.get(p) or {})) and len(v) >= 2)
    camel = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), param)
    calls = [("rows_from_data_product", {"product": la.product, camel: [values[0]],
                                         "limit": 1})] * 3
    own = [("rows_from_data_product", {"product": la.product, param: [values[0]]})] * 3
    results = call_tools(load_project(d), _widest_user(d), calls + own, dedicated_tools="none")
    assert not results[0].is_error, results[0].content[0].text
    assert results[0].structured_content["interpreted"] == {
        camel: f"arguments.{param}", "limit": "arguments.limit"}
    assert results[3].structured_content["interpreted"] == {param: f"arguments.{param}"}
    props = [p for p in learn(load_project(d)).proposals
             if p.rule == "interpreted_arguments" and p.tool == la.tool]
    assert [p.change.sentence for p in props] == [
        f"Pass it as {param} (callers have written {camel})"]
