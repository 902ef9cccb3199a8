"""The console in headless Chromium (Debian's package, driven by Playwright): a reviewer approves
the review a real drift step opened and sees the new version on the tool's page; a manager's
approve is refused; a form on another site is refused; markup in a description and a comment is
shown as text; a trace shows each tool call; the static report's chart labels never overlap; a
reviewer applies what `tether learn` proposed.
Each view is saved as a screenshot under the folder the session prints."""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from conftest import free_port, run_cli
from console import (
    MANAGER,
    MARKED_TOOL,
    MARKUP,
    REVIEWER,
    SEMANTIC_TOOL,
    Project,
    copy_of,
    served,
)
from tether.config import load_project
from tether.registry import open_registry

CHROMIUM = Path(os.environ.get("TETHER_CHROMIUM", "/usr/bin/chromium"))

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing: apt-get install -y chromium "
    "chromium-driver (.ci/run does)")


@pytest.fixture(scope="module")
def base(console_base: Project) -> Project:
    return console_base


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = Path(os.environ.get("TETHER_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {d}")
    return d


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM),
                              args=["--disable-gpu", "--disable-quic"])
        yield b
        b.close()


@pytest.fixture
def proj(base: Project, tmp_path: Path) -> Project:
    return copy_of(base, tmp_path / "p")


def sign_in(browser: Any, url: str, token: str) -> Any:
    """A fresh browser context signed in through the form; returns its page."""
    page = browser.new_context().new_page()
    page.on("dialog", lambda d: pytest.fail(f"a script ran: {d.message}"))
    page.goto(f"{url}/reviews")
    assert page.url.startswith(f"{url}/signin")
    page.fill("input[name=token]", token)
    page.click("form.signin button[type=submit]")
    page.wait_for_url(f"{url}/reviews")
    return page


def shot(page: Any, shots: Path, name: str) -> None:
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def _version(root: Path, tool: str) -> str:
    registry = open_registry(load_project(root))
    try:
        return registry.current()[tool].version
    finally:
        registry.close()


def test_a_reviewer_approves_a_semantic_change(browser: Any, proj: Project, shots: Path) -> None:
    with served(proj.root) as url:
        page = sign_in(browser, url, proj.tokens[REVIEWER])
        assert page.locator("text=Waiting or blocked").is_visible()
        shot(page, shots, "reviews")
        page.click("a[href='/reviews/1']")
        page.wait_for_url(f"{url}/reviews/1")
        cols = page.locator(".cols > section h3").all_inner_texts()
        assert cols[:3] == ["Schema", "Description", "Policy projection"]
        assert "paused subscriptions no longer count" in page.locator(".diff .add").first.inner_text()
        assert page.locator("td", has_text="definition_changed").count() >= 1
        shot(page, shots, "review")
        comment = 'Finance agreed <b>today</b> <script>alert("c")</script>'
        page.fill("textarea[name=comment]", comment)
        page.click("button[value=approve]")
        page.wait_for_url(f"{url}/reviews/1?decided=approved*")
        assert "Approved and published" in page.locator(".flash").inner_text()
        assert page.locator("q.comment").inner_text() == comment  # shown as text
        assert page.locator("q.comment b, q.comment script").count() == 0
        shot(page, shots, "review-approved")
        page.goto(f"{url}/tools/{SEMANTIC_TOOL}")
        rows = page.locator("table.versions tbody tr").all_inner_texts()
        assert rows[0].startswith("2.0.0") and "current" in rows[0] and "fin.ana" in rows[0]
        assert rows[1].startswith("1.0.0") and "deprecated" in rows[1]
        assert "paused subscriptions no longer count" in page.locator(".sentences").inner_text()
        shot(page, shots, "tool")
        page.goto(f"{url}/drift")
        assert page.locator(".timeline li.publication", has_text="review 1 by fin.ana").count() == 1
        shot(page, shots, "drift")
        page.goto(f"{url}/policy")
        assert page.locator("h2#role-support_agent").count() == 1
        shot(page, shots, "policy")
        page.goto(f"{url}/tools")
        assert page.locator("td.num", has_text="/10").count() >= 5
        shot(page, shots, "tools")
    assert _version(proj.root, SEMANTIC_TOOL) == "2.0.0"


def test_a_managers_approve_is_refused(browser: Any, proj: Project, shots: Path) -> None:
    with served(proj.root) as url:
        page = sign_in(browser, url, proj.tokens[MANAGER])
        page.goto(f"{url}/reviews/1")
        assert page.locator("form.decide").count() == 0
        assert "Only a reviewer decides" in page.content()
        csrf = page.locator("input[name=csrf]").first.get_attribute("value")
        answer = page.context.request.post(f"{url}/reviews/1/decide",
                                           form={"csrf": csrf, "decision": "approve"})
        assert answer.status == 403 and "is not a reviewer" in answer.text()
        page.set_content(answer.text())
        shot(page, shots, "refused-403")
    assert _version(proj.root, SEMANTIC_TOOL) == "1.0.0"


class _Attacker(http.server.BaseHTTPRequestHandler):
    """Another site: one page whose form posts to the console."""

    target = ""

    def do_GET(self) -> None:
        body = (f'<!DOCTYPE html><form method="post" action="{self.target}/reviews/1/decide">'
                '<input name="decision" value="approve"><input name="csrf" value="guess">'
                '<button id="go" type="submit">win a prize</button></form>').encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: Any) -> None:
        pass


def test_a_cross_site_form_post_is_refused(browser: Any, proj: Project, shots: Path) -> None:
    with served(proj.root) as url:
        page = sign_in(browser, url, proj.tokens[REVIEWER])
        _Attacker.target = url
        port = free_port()
        evil = http.server.HTTPServer(("127.0.0.1", port), _Attacker)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            page.goto(f"http://localhost:{port}/")
            with page.expect_response(f"{url}/reviews/1/decide") as answer:
                page.click("#go")
            assert answer.value.status == 403
            assert "another site" in page.content()
            shot(page, shots, "cross-site-403")
        finally:
            evil.shutdown()
    assert _version(proj.root, SEMANTIC_TOOL) == "1.0.0"


def test_markup_in_a_tool_description_is_text(browser: Any, proj: Project, shots: Path) -> None:
    with served(proj.root) as url:
        page = sign_in(browser, url, proj.tokens[REVIEWER])
        page.goto(f"{url}/tools/{MARKED_TOOL}")
        sentences = page.locator(".sentences td.tool-description").all_inner_texts()
        assert any(MARKUP in s for s in sentences)
        assert page.locator(".sentences b, .sentences script, main script").count() == 0
        shot(page, shots, "tool-markup")


def test_a_trace_shows_each_tool_call(browser: Any, proj: Project, shots: Path) -> None:
    run = proj.root / ".tether" / "runs" / "grounded"
    with served(proj.root) as url:
        page = sign_in(browser, url, proj.tokens[REVIEWER])
        page.goto(f"{url}/eval")
        shot(page, shots, "eval")
        page.click("table a[href^='/eval/run']")
        assert page.locator("svg.chart").count() >= 2
        shot(page, shots, "eval-run")
        links = page.locator("table.cases a", has_text="trace")
        assert links.count() == 3
        first = links.first.get_attribute("href")
        case = unquote(first.split("case=", 1)[1])
        page.goto(url + first)
        trace = json.loads((run / "traces" / f"{case}.json").read_text())
        assert trace["tool_calls"], "the baseline agent called no tool"
        calls = page.locator(".call")
        assert calls.count() == len(trace["tool_calls"])
        for i, c in enumerate(trace["tool_calls"]):
            head = calls.nth(i).locator(".who-said").text_content()
            assert f"tool call {i + 1}: {c['name']}" in head
            args = calls.nth(i).locator("pre.args").inner_text()
            assert json.loads(args) == c["arguments"]
        assert page.locator(".question").inner_text().endswith(trace["question"])
        assert page.locator(".label").count() == 1
        shot(page, shots, "trace")


def _overlapping(page: Any) -> list[Any]:
    """Pairs of chart texts whose boxes, as Chromium lays them out, intersect."""
    return page.evaluate("""() => {
      const hits = [];
      for (const svg of document.querySelectorAll('svg.chart')) {
        const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent,
                        t.getBoundingClientRect()]);
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
          const [ta, a] = boxes[i], [tb, b] = boxes[j];
          if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
            hits.push([ta, tb]);
        }
      }
      return hits;
    }""")


def test_the_static_report_is_one_file_whose_labels_never_overlap(
        browser: Any, proj: Project, tmp_path: Path, shots: Path) -> None:
    run = proj.root / ".tether" / "runs" / "grounded"
    out = tmp_path / "report"
    assert run_cli("eval", "report", str(run), "--out", str(out)).returncode == 0
    page = browser.new_context().new_page()
    loaded: list[str] = []
    page.on("request", lambda r: loaded.append(r.url))
    page.goto((out / "report.html").as_uri())
    assert loaded == [(out / "report.html").as_uri()]  # nothing else is fetched
    assert page.locator("svg.chart").count() >= 2 and not _overlapping(page)
    assert page.locator("section.trace").count() == 3  # the traces are in the file
    shot(page, shots, "static-report")


def test_a_reviewer_applies_a_learned_proposal(browser: Any, proj: Project, shots: Path) -> None:
    """From the calls to the tool's page: /learn lists what learn proposed, the proposal's page
    shows the calls behind it, and applying it publishes the sentence with its source."""
    from conftest import call_tools
    from test_learn import _dimension_listing
    from tether.learn.propose import learn

    la, _, values, other = _dimension_listing(proj.root)
    found: list[Any] = []

    def calls_then_learn() -> None:  # Playwright's sync API holds this thread's event loop
        call_tools(load_project(proj.root), REVIEWER,
                   [(la.tool, {other: values[0], "limit": 1})] * 3)
        found.extend(learn(load_project(proj.root)).proposals)

    worker = threading.Thread(target=calls_then_learn)
    worker.start()
    worker.join()
    [p] = [p for p in found if p.rule == "interpreted_arguments" and p.tool == la.tool]
    with served(proj.root) as url:
        page = sign_in(browser, url, proj.tokens[REVIEWER])
        page.goto(f"{url}/learn")
        assert page.locator(f"a[href='/learn/{p.id}']").is_visible()
        shot(page, shots, "learn")
        page.click(f"a[href='/learn/{p.id}']")
        page.wait_for_url(f"{url}/learn/{p.id}")
        assert page.locator("pre", has_text=p.change.sentence).count() == 1
        assert page.locator("td", has_text=REVIEWER).count() == len(p.sample)
        shot(page, shots, "proposal")
        page.click("button[value=apply]")
        page.wait_for_url(f"{url}/learn/{p.id}?decided=applied*")
        assert "applied: publication" in page.locator("main").inner_text()
        shot(page, shots, "proposal-applied")
        page.goto(f"{url}/tools/{la.tool}")
        assert "1.0.1" in page.locator("table.versions tbody tr").first.inner_text()
    tools = {t["name"]: t for t in json.loads(run_cli("tools", "--project", str(proj.root),
                                                      "--json").stdout)}
    assert p.change.sentence in json.dumps(tools[la.tool]["inputSchema"])
