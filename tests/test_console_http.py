"""The console over HTTP (no browser): sign-in, Host and Origin checks, CSRF, the reviewer
check, escaping, and the same registry state as the CLI for every decision, on SQLite, on
PostgreSQL and on the second warehouse."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from conftest import copy_project, run_cli
from console import (
    MANAGER,
    MARKED_TOOL,
    MARKUP,
    REVIEWER,
    SEMANTIC_TOOL,
    Client,
    Project,
    copy_of,
    drift_project,
    registry_dump,
    served,
)
from tether.config import load_project
from tether.drift.check import check
from tether.drift.publish import build
from tether.registry import open_registry
from tether.serve.identity import TokenStore


@pytest.fixture(scope="module")
def base(console_base: Project) -> Project:
    return console_base


@pytest.fixture
def proj(base: Project, tmp_path: Path) -> Project:
    return copy_of(base, tmp_path / "p")


def _status(root: Path, rid: int = 1) -> str:
    registry = open_registry(load_project(root))
    try:
        review = registry.review(rid)
        assert review is not None
        return str(review["status"])
    finally:
        registry.close()


def test_pages_need_a_signed_in_user_and_a_valid_token(proj: Project) -> None:
    with served(proj.root) as url:
        c = Client(url)
        for path in ("/reviews", "/tools", "/drift", "/eval", "/policy", "/reviews/1"):
            status, _, headers = c.request(path)
            assert status == 303 and headers["location"] == f"/signin?next={path}", path
        status, html, _ = c.request("/signin", {"csrf": c.csrf(), "token": "tt_wrong",
                                                "next": "/reviews"})
        assert status == 401 and "not valid here" in html
        status, _, headers = c.request("/signin", {"csrf": c.csrf(), "token": proj.tokens[
            REVIEWER], "next": "//evil.example/x"})
        assert status == 303 and headers["location"] == "/reviews"  # never another site
        status, html, headers = c.request("/reviews")
        assert status == 200 and "fin.ana (finance_analyst, reviewer)" in html
        assert "default-src 'none'" in headers["content-security-policy"]
        fresh = Client(url)
        _, _, headers = fresh.request("/signin")
        cookie = headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "tt_" not in cookie
        # a forged cookie is no session; a revoked token ends the session it made
        TokenStore(proj.root / ".tether" / "tokens.json").revoke(REVIEWER)
        assert c.request("/reviews")[0] == 303


def test_host_and_origin_are_checked_as_the_server_does(proj: Project) -> None:
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        csrf = c.csrf("/reviews/1")
        assert c.request("/reviews", headers={"Host": "evil.example"})[0] == 421
        port = url.rsplit(":", 1)[1]
        assert c.request("/reviews", headers={"Host": f"localhost:{port}"})[0] == 200
        for origin in ("http://evil.example", f"http://127.0.0.1:{int(port) + 1}", "null"):
            status, body, _ = c.request("/reviews/1/decide", {"csrf": csrf, "decision":
                                                              "approve"}, {"Origin": origin})
            assert status == 403 and "another site" in body, origin
        assert _status(proj.root) == "pending"


def test_beyond_loopback_only_the_named_hosts_and_origins(proj: Project) -> None:
    """Behind a proxy at https://tether.internal: that name and origin only."""
    with served(proj.root, allowed_hosts=["tether.internal:*"],
                allowed_origins=["https://tether.internal"]) as url:
        c = Client(url)
        port = url.rsplit(":", 1)[1]
        assert c.request("/signin", headers={"Host": f"127.0.0.1:{port}"})[0] == 421
        named = {"Host": "tether.internal:443"}
        assert c.request("/signin", headers=named)[0] == 200
        assert c.request("/signin", headers=named | {"Origin": "https://tether.internal"})[0] == 200
        assert c.request("/signin", headers=named | {"Origin": f"http://127.0.0.1:{port}"}
                         )[0] == 403


def test_every_form_post_needs_its_token(proj: Project) -> None:
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        own = {"Origin": url}
        for form in ({"decision": "approve"}, {"decision": "approve", "csrf": "guessed"}):
            status, html, _ = c.request("/reviews/1/decide", form, own)
            assert status == 403 and "no valid token" in html
        assert c.request("/signout", {}, own)[0] == 403
        assert _status(proj.root) == "pending"
        other = Client(url)  # without a session: sent to sign in, nothing decided
        assert other.request("/reviews/1/decide", {"decision": "approve",
                                                   "csrf": c.csrf("/reviews")})[0] == 303


def test_a_non_reviewer_may_look_but_not_decide(proj: Project) -> None:
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[MANAGER])
        status, html, _ = c.request("/reviews/1")
        assert status == 200 and "Only a reviewer decides (fin.ana)" in html
        assert 'action="/reviews/1/decide"' not in html
        before = registry_dump(proj.root)
        status, html, _ = c.request("/reviews/1/decide", {"csrf": c.csrf("/reviews"),
                                                          "decision": "approve"})
        assert status == 403 and "mgr.emea (role regional_manager) is not a reviewer" in html
        assert registry_dump(proj.root) == before
        for path in ("/eval", "/eval/run?run=0/grounded"):
            status, html, _ = c.request(path)
            assert status == 403 and "only a reviewer" in html
        # a manager sees their own role's policy, not the others'
        status, html, _ = c.request("/policy")
        assert status == 200 and 'id="role-regional_manager"' in html
        assert 'id="role-finance_analyst"' not in html


def test_markup_is_shown_as_text(proj: Project) -> None:
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        status, html, _ = c.request(f"/tools/{MARKED_TOOL}")
        assert status == 200
        assert MARKUP not in html and "<script" not in html
        assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
        comment = '<img src=x onerror="alert(1)"> fine'
        c.request("/reviews/1/decide", {"csrf": c.csrf("/reviews"), "decision": "reject",
                                        "comment": comment})
        for path in ("/reviews/1", "/reviews"):
            _, html, _ = c.request(path)
            assert "<img" not in html and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt; fine" in html


def _decide_both_ways(a: Project, b: Project, decision: str, comment: str) -> None:
    with served(a.root) as url:
        c = Client(url)
        c.sign_in(a.tokens[REVIEWER])
        status, _, headers = c.request("/reviews/1/decide", {"csrf": c.csrf("/reviews/1"),
                                                             "decision": decision,
                                                             "comment": comment})
        assert status == 303 and headers["location"].startswith(f"/reviews/1?decided={decision}")
    res = run_cli("review", decision, "1", "--as", REVIEWER, "--comment", comment,
                  "--project", str(b.root))
    assert res.returncode == 0, res.stderr


def _tools(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((root / "tools").glob("*.json"))}


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_console_and_cli_leave_the_same_registry(base: Project, tmp_path: Path,
                                                 decision: str) -> None:
    a, b = copy_of(base, tmp_path / "a"), copy_of(base, tmp_path / "b")
    assert registry_dump(a.root) == registry_dump(b.root)
    _decide_both_ways(a, b, decision, "agreed with finance")
    da, db = registry_dump(a.root), registry_dump(b.root)
    assert da == db and _tools(a.root) == _tools(b.root)
    review = next(r for r in da["reviews"] if r[0] == 1)
    assert review[1] == ("approved" if decision == "approve" else "rejected")
    assert "fin.ana" in review and "agreed with finance" in review
    registry = open_registry(load_project(a.root))
    try:
        version = registry.current()[SEMANTIC_TOOL].version
    finally:
        registry.close()
    assert version == ("2.0.0" if decision == "approve" else "1.0.0")


@pytest.mark.postgres
def test_the_same_registry_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    """Both copies keep their registry in PostgreSQL (each in its own schema)."""
    import uuid

    import psycopg

    schemas = [f"tether_ui_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with psycopg.connect(pg_url, autocommit=True) as con:
        for s in schemas:
            con.execute(f'CREATE SCHEMA "{s}"')
    try:
        p = drift_project(tmp_path / "base", run=False, registry=f"{pg_url}?options="
                          f"-csearch_path%3D{schemas[0]}")
        b = copy_of(p, tmp_path / "b")
        yaml = b.root / "tether.yaml"
        yaml.write_text(yaml.read_text().replace(schemas[0], schemas[1]))
        with psycopg.connect(pg_url, autocommit=True) as con:  # the same rows in the other schema
            for t in ("tether_meta", "publications", "tool_versions", "call_log",
                      "check_state", "drift_events", "reviews"):
                con.execute(f'CREATE TABLE "{schemas[1]}"."{t}" (LIKE "{schemas[0]}"."{t}" '
                            "INCLUDING ALL)")
                con.execute(f'INSERT INTO "{schemas[1]}"."{t}" SELECT * FROM "{schemas[0]}"."{t}"')
        _decide_both_ways(p, b, "approve", "ok on postgres")

        def dump(schema: str) -> dict[str, list[tuple[object, ...]]]:
            with psycopg.connect(pg_url) as con:
                return {t: sorted(con.execute(f'SELECT * FROM "{schema}"."{t}"').fetchall(),
                                  key=repr)
                        for t in ("publications", "tool_versions", "reviews", "drift_events",
                                  "check_state")}

        da, db = dump(schemas[0]), dump(schemas[1])
        assert da == db and any(r[1] == "approved" for r in da["reviews"])
    finally:
        with psycopg.connect(pg_url, autocommit=True) as con:
            for s in schemas:
                con.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')


def test_the_second_warehouse(second_dir: Path, tmp_path: Path) -> None:
    """Reviews, tools and policy on the clinic warehouse: its reviewer decides, its district
    lead may not, and its tools and roles are what the pages show."""
    p = copy_project(second_dir, tmp_path / "p")
    build(load_project(p))
    text = (p / "tether.yaml").read_text()
    prose = "SUBMITTED, IN_REVIEW or APPEALED (an appealed claim is open again)."
    (p / "tether.yaml").write_text(text.replace(
        "'SUBMITTED', 'IN_REVIEW', 'APPEALED'", "'SUBMITTED', 'IN_REVIEW'").replace(
        prose, "SUBMITTED or IN_REVIEW (an appealed claim no longer counts)."))
    assert check(load_project(p)).exit_code == 11
    store = TokenStore(p / ".tether" / "tokens.json")
    lead, auditor = store.add("lead.harbor"), store.add("aud.ines")
    with served(p) as url:
        c = Client(url)
        c.sign_in(lead)
        status, html, _ = c.request("/reviews/1/decide", {"csrf": c.csrf("/reviews"),
                                                          "decision": "approve"})
        assert status == 403 and "Reviewers: aud.ines" in html
        status, html, _ = c.request("/tools")
        names = set(re.findall(r'<a href="/tools/([a-z_]+)">', html))
        registry = open_registry(load_project(p))
        try:
            published = set(registry.current())
        finally:
            registry.close()
        assert names and names <= published
        a = Client(url)
        a.sign_in(auditor)
        status, html, _ = a.request("/policy")
        roles = set(load_project(p).config.policies.roles)
        assert status == 200 and all(f'id="role-{r}"' in html for r in roles)
        filters = [f for r in load_project(p).config.policies.roles.values()
                   for f in r.row_filters.values()]
        assert filters and all(str(escape(f)) in html for f in filters)
        status, _, headers = a.request("/reviews/1/decide", {"csrf": a.csrf("/reviews"),
                                                             "decision": "approve",
                                                             "comment": "clinics agree"})
        assert status == 303 and "decided=approved" in headers["location"]
    listed = json.loads(run_cli("review", "list", "--json", "--project", str(p)).stdout)
    assert (listed[0]["status"], listed[0]["decided_by"], listed[0]["comment"]) == (
        "approved", "aud.ines", "clinics agree")
    shutil.rmtree(p)


def test_the_url_make_demo_prints_answers(base: Project, tmp_path: Path) -> None:
    """`make demo` ends by printing the console command and its evaluation page's URL: served
    as printed over run folders laid out as the demo lays them out, the URL shows every run."""
    from tether.cli.ui import DEFAULT_PORT

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "$(BIN)/tether ui --project $(DEMO) --runs $(DEMO)/eval" in makefile
    found = re.search(r"evaluation page: http://127\.0\.0\.1:(\d+)(/eval/run\?\S+)\"", makefile)
    assert found and int(found.group(1)) == DEFAULT_PORT
    path = found.group(2)
    p = copy_of(base, tmp_path / "p")
    runs = p.root / "eval"  # as $(DEMO)/eval holds the demo's four runs
    names = [k.split("/", 1)[1] for k in re.findall(r"run=([^&]+)", path)]
    assert len(names) == 4
    for name in names:
        dst = runs / name
        shutil.copytree(p.root / ".tether" / "runs" / "grounded", dst)
        for f in ("index.json", "labels.jsonl"):
            (dst / f).write_text((dst / f).read_text().replace('"tether-grounded"',
                                                               f'"server-{name}"'))
    with served(p.root, runs=[runs]) as url:
        c = Client(url)
        c.sign_in(p.tokens[REVIEWER])
        status, html, _ = c.request(path)
        assert status == 200 and all(f"server-{n}" in html for n in names)


def test_bad_input_is_a_page_that_says_what_to_do(proj: Project) -> None:
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        for path, code, words in (
                ("/reviews/99", 404, "There is no review 99."),
                ("/reviews/nope", 404, "404"),
                ("/tools/no_such_tool", 404, "There is no published tool no_such_tool."),
                ("/eval/run?run=0/../../..", 404, "There is no such run."),
                ("/eval/run?run=7/x", 404, "There is no such run."),
                ("/eval/trace?run=0/grounded&case=../../tether", 404, "no trace for this case"),
                ("/drift?page=-1", 200, "Timeline")):
            status, html, _ = c.request(path)
            assert status == code and words in html and "Traceback" not in html, path
        status, html, _ = c.request("/reviews/1/decide", {"csrf": c.csrf("/reviews"),
                                                          "decision": "maybe"})
        assert status == 400 and "choose approve or reject" in html
        yaml = proj.root / "tether.yaml"
        good = yaml.read_text()
        yaml.write_text(good + "\nno_such_key: 1\n")  # someone breaks tether.yaml meanwhile
        status, html, _ = c.request("/tools")
        assert status == 400 and "no_such_key" in html and "Traceback" not in html
        yaml.write_text(good)
        assert c.request("/tools")[0] == 200
        assert _status(proj.root) == "pending"


def test_two_runs_of_one_server_show_what_changed(proj: Project) -> None:
    """The same run again after a change: side by side, and the case that flipped is named."""
    runs = proj.root / ".tether" / "runs"
    again = runs / "again"
    shutil.copytree(runs / "grounded", again)
    lines = (again / "labels.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first.update(correct=False, failure_class="semantic")
    (again / "labels.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    index = json.loads((again / "index.json").read_text())
    index["run_id"] = "the-second-run"
    (again / "index.json").write_text(json.dumps(index))
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        status, html, _ = c.request("/eval")
        assert status == 200 and "the-second-run" in html
        status, _, headers = c.request("/eval/compare", [("csrf", c.csrf("/eval")),
                                                         ("run", "0/grounded"),
                                                         ("run", "0/again")])
        assert status == 303
        status, html, _ = c.request(headers["location"])
        assert status == 200 and "What changed from the first run to the second" in html
        assert f"{first['case_id']}: regressed" in html
        assert "the-second-run" in html and 'href="/eval/run?run=0/again"' in html


def test_a_policy_review_reads_in_words_and_its_author_may_not_approve_it(proj: Project
                                                                         ) -> None:
    """A widened row filter waits in the console as changes per role in words; the reviewer who
    ran the check is refused (403, nothing published); another person's widening is approved
    there and becomes the policy every server enforces."""
    from tether.demo.policy_tour import FILTER, WIDER

    yaml = proj.root / "tether.yaml"
    yaml.write_text(yaml.read_text().replace(FILTER, WIDER))
    assert check(load_project(proj.root), author=MANAGER).exit_code == 11
    registry = open_registry(load_project(proj.root))
    try:
        mine = max(r["id"] for r in registry.reviews())
        before = registry.current_policy()
        assert before is not None
    finally:
        registry.close()
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        status, html, _ = c.request(f"/reviews/{mine}")
        assert status == 200
        assert "regional_manager" in html and "widening" in html
        assert str(escape("OR segment = 'SMB'")) in html
        assert f"by a check {MANAGER} ran" in html and "You ran the check" not in html
        status, _, _ = c.request(f"/reviews/{mine}/decide",
                                 {"csrf": c.csrf(f"/reviews/{mine}"), "decision": "approve"},
                                 {"Origin": url})
        assert status == 303 and _status(proj.root, mine) == "approved"
        # the reviewer's own widening: shown as hers, and refused
        yaml.write_text(yaml.read_text().replace(WIDER, WIDER.replace("'SMB'", "'ENT'")))
        assert check(load_project(proj.root), author=REVIEWER).exit_code == 11
        own = mine + 1
        status, html, _ = c.request(f"/reviews/{own}")
        assert status == 200 and "You ran the check" in html
        status, html, _ = c.request(f"/reviews/{own}/decide",
                                    {"csrf": c.csrf(f"/reviews/{own}"), "decision": "approve"},
                                    {"Origin": url})
        assert status == 403 and "nobody approves their own widening" in html
        assert _status(proj.root, own) == "pending"
    registry = open_registry(load_project(proj.root))
    try:
        now = registry.current_policy()
        assert now is not None and now.version != before.version
        assert "'SMB'" in json.dumps(now.definition["policy"]) and "'ENT'" not in json.dumps(
            now.definition["policy"])
    finally:
        registry.close()


def test_a_reviewer_flag_waiting_for_review_grants_nothing_in_the_console(proj: Project) -> None:
    """`reviewer: true` given to the manager's role in tether.yaml is a widening: until another
    reviewer approves it, the manager may not decide (the console reads the approved policy)."""
    yaml = proj.root / "tether.yaml"
    text = yaml.read_text()
    assert "    regional_manager:\n" in text
    yaml.write_text(text.replace("    regional_manager:\n",
                                 "    regional_manager:\n      reviewer: true\n", 1))
    assert check(load_project(proj.root), author=MANAGER).exit_code == 11
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[MANAGER])
        status, html, _ = c.request("/reviews/1")
        assert status == 200 and 'value="approve"' not in html
        status, html, _ = c.request("/reviews/1/decide", {"csrf": c.csrf("/reviews/1"),
                                                          "decision": "approve"},
                                    {"Origin": url})
        assert status == 403
    assert _status(proj.root) == "pending"


def test_the_learn_page_lists_applies_and_dismisses_for_reviewers_only(proj: Project) -> None:
    from conftest import call_tools
    from test_learn import _enum_param, _listings
    from tether.learn.propose import learn

    la = next(la for la in _listings(proj.root).values() if _enum_param(la)
              and len(la.params) >= 2)
    param, values = _enum_param(la)  # type: ignore[misc]
    other = next(p for p in la.params if p != param)
    call_tools(load_project(proj.root), REVIEWER,
               [(la.tool, {other: values[0], "limit": 1})] * 3
               + [(la.tool, {other: values[-1], "limit": 1})] * 3)
    found = learn(load_project(proj.root)).proposals
    assert found
    pid = found[0].id
    with served(proj.root) as url:
        m = Client(url)
        m.sign_in(proj.tokens[MANAGER])
        for path in ("/learn", f"/learn/{pid}"):
            status, html, _ = m.request(path)
            assert status == 403 and "only a reviewer" in html
        before = registry_dump(proj.root)
        status, _, _ = m.request(f"/learn/{pid}/decide", {"csrf": m.csrf("/reviews"),
                                                          "decision": "apply"})
        assert status == 403 and registry_dump(proj.root) == before
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        status, html, _ = c.request("/learn")
        assert status == 200 and f'href="/learn/{pid}"' in html
        status, html, _ = c.request(f"/learn/{pid}")
        assert status == 200 and str(escape(found[0].change.sentence)) in html
        assert html.count(f"<td>{REVIEWER}</td>") == len(found[0].sample)  # the calls, shown
        read = re.search(r'name="read" value="([0-9a-f]+)"', html)
        assert read is not None
        status, html, _ = c.request(f"/learn/{pid}/decide", {"decision": "apply"},
                                    {"Origin": url})
        assert status == 403 and registry_dump(proj.root) == before
        status, html, _ = c.request(f"/learn/{pid}/decide", {"csrf": c.csrf("/learn"),
                                                             "decision": "apply", "read": "0"})
        assert status in (400, 409, 422) and "changed since this page was loaded" in html, status
        status, _, headers = c.request(f"/learn/{pid}/decide", {
            "csrf": c.csrf("/learn"), "decision": "apply", "read": read.group(1)})
        assert status == 303 and "decided=applied" in headers["location"]
        status, html, _ = c.request(headers["location"])
        assert status == 200 and "applied: publication" in html, html
        tools = {t["name"]: t for t in json.loads(run_cli("tools", "--project", str(proj.root),
                                                          "--json").stdout)}
        assert found[0].change.sentence in json.dumps(tools[la.tool])
        status, html, _ = c.request(f"/learn/{pid}")
        read = re.search(r'name="read" value="([0-9a-f]+)"', html)
        assert read is not None
        status, _, headers = c.request(f"/learn/{pid}/decide", {
            "csrf": c.csrf("/learn"), "decision": "dismiss", "read": read.group(1)})
        assert status == 303 and "decided=dismissed" in headers["location"]
        tools = {t["name"]: t for t in json.loads(run_cli("tools", "--project", str(proj.root),
                                                          "--json").stdout)}
        assert found[0].change.sentence not in json.dumps(tools[la.tool])


def test_a_table_dropped_under_the_project_leaves_every_page_working(proj: Project) -> None:
    """The customers table dropped upstream: the tools, policy and drift pages still answer,
    the closed product's tool is not among what the manager reaches, and no page fails."""
    import duckdb

    with duckdb.connect(str(proj.root / "warehouse.duckdb")) as con:
        con.execute("DROP TABLE customers")
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[MANAGER])
        for path in ("/tools", "/policy", "/drift", "/reviews", "/tools/order_backlog_by_status"):
            status, html, _ = c.request(path)
            assert status == 200 and "Traceback" not in html, (path, status, html[:300])
        _, tools, _ = c.request("/tools")
        assert "order_backlog_by_status" in tools
        assert "customers_by_region_and_segment" not in tools
        status, html, _ = c.request("/tools/customers_by_region_and_segment")
        assert status == 404 and "Traceback" not in html
