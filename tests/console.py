"""Helpers for the console's tests: a demo project with a real pending review (the semantic
drift step `redefine-active`), markup planted in a tool description, user tokens, a labelled
evaluation run, and the console served by uvicorn in a thread."""

from __future__ import annotations

import contextlib
import http.cookiejar
import re
import shutil
import sqlite3
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import free_port, run_cli
from tether.config import load_project
from tether.demo import init_demo
from tether.demo.drift import apply
from tether.drift.check import check
from tether.drift.publish import build
from tether.serve.identity import TokenStore
from tether.web import create_app

MARKUP = '<b>bold</b> & <script>alert("x")</script>'
PLANTED = "Line items of orders;"
"""A product description of the demo that lands in its listing tool's description."""
SEMANTIC_TOOL = "active_customers_by_region_and_fiscal_quarter"
MARKED_TOOL = "items_in_an_order"
REVIEWER, MANAGER = "fin.ana", "mgr.emea"


@dataclass(frozen=True)
class Project:
    root: Path
    tokens: dict[str, str]


def drift_project(d: Path, *, run: bool = True, registry: str | None = None) -> Project:
    """The demo (scale 0.05) built, with markup in one tool's description, then redefined
    (semantic: review 1 waits for a person), tokens for a reviewer and a manager, and, with
    ``run``, a labelled run of three cases under the project's eval.runs_dir; ``registry``
    names another registry URL than the default SQLite file."""
    init_demo(d, scale=0.05)
    yaml = d / "tether.yaml"
    text = yaml.read_text()
    assert PLANTED in text
    text = text.replace(PLANTED, f"Line items of orders {MARKUP};", 1)
    yaml.write_text(text + (f'registry: {{url: "{registry}"}}\n' if registry else ""))
    build(load_project(d))
    apply(d, "redefine-active")
    assert check(load_project(d)).exit_code == 11
    store = TokenStore(d / ".tether" / "tokens.json")
    tokens = {u: store.add(u) for u in (REVIEWER, MANAGER)}
    if run:
        cases = d / "cases3.jsonl"
        assert run_cli("demo", "cases", "--project", str(d)).returncode == 0
        cases.write_text("".join((d / "cases.jsonl").read_text().splitlines(True)[:3]))
        out = d / ".tether" / "runs" / "grounded"
        tether = Path(sys.executable).parent / "tether"
        res = run_cli("eval", "run", "--server", f"stdio:{tether} serve --project {d}",
                      "--cases", str(cases), "--agent", "baseline", "--out", str(out))
        assert res.returncode == 0, res.stderr
        res = run_cli("eval", "label", str(out), "--project", str(d))
        assert res.returncode == 0, res.stderr
    return Project(d, tokens)


def copy_of(p: Project, dst: Path) -> Project:
    """An independent copy (its own warehouse file and registry)."""
    shutil.copytree(p.root, dst)
    return Project(dst, p.tokens)


@contextlib.contextmanager
def served(project_dir: Path, runs: list[Path] | None = None, **kw: Any) -> Iterator[str]:
    """The console on a free loopback port, in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    app = create_app(project_dir, runs, "127.0.0.1", port, **kw)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the console did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class Client:
    """A browser-less client with a cookie jar (for HTTP-level checks)."""

    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar),
                                                  _NoRedirect())

    def request(self, path: str, data: dict[str, str] | list[tuple[str, str]] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(self.base + path, data=body, headers=headers or {})
        try:
            with self.opener.open(req, timeout=60) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def csrf(self, path: str = "/signin") -> str:
        _, html, _ = self.request(path)
        found = re.search(r'name="csrf" value="([^"]+)"', html)
        assert found, html[:500]
        return found.group(1)

    def sign_in(self, token: str) -> None:
        status, _, headers = self.request("/signin", {"csrf": self.csrf(), "token": token,
                                                      "next": "/reviews"})
        assert status == 303 and headers["location"] == "/reviews", status


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a: Any, **k: Any) -> None:
        return None


def registry_dump(root: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every registry table (SQLite), sorted: the whole registry state."""
    con = sqlite3.connect(root / ".tether" / "registry.db")
    try:
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(con.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr)
                for t in tables}
    finally:
        con.close()
