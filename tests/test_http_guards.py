"""Every HTTP route checks Host and Origin the same way (tether.httpguard): the MCP endpoint and
`POST /api/v1/lineage` of `tether serve --transport http` give the same answer to every Host and
Origin, a foreign one 421 or 403; every console route of `tether ui` refuses a foreign Host (421)
and Origin (403); and a malformed, over-long or integer-overflowing id, name or key in a console
URL is a 400 or 404, never a 500. Real servers over real HTTP."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from conftest import copy_project, free_port, http_process, run_cli
from console import REVIEWER, Client, Project, copy_of, served
from tether.config import load_project
from tether.layers.model import layer_path
from tether.web import create_app

TETHER = str(Path(sys.executable).parent / "tether")
EVIL_HOST = {"Host": "evil.example"}
EVIL_ORIGIN = {"Origin": "http://evil.example"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "guard-test", "version": "1"}}}


@contextlib.contextmanager
def mcp_server(second_dir: Path, d: Path, *flags: str) -> Iterator[dict[str, Any]]:
    """`tether serve --transport http` on a built copy of the second warehouse, with a user's
    and an admin token; yields what a request needs."""
    copy_project(second_dir, d)
    assert run_cli("build", "--project", str(d)).returncode == 0
    user = next(iter(load_project(d).config.policies.users))
    tokens = {}
    for key, args in (("user", [user]), ("admin", ["emitter", "--admin"])):
        res = run_cli("token", "add", *args, "--project", str(d))
        assert res.returncode == 0, res.stderr
        tokens[key] = res.stdout.strip()
    port = free_port()
    with http_process([TETHER, "serve", "--project", str(d), "--transport", "http", "--port",
                       str(port), *flags], port, timeout=60):
        yield {"base": f"http://127.0.0.1:{port}", "port": port, "tokens": tokens, "dir": d}


def mcp(s: dict[str, Any], headers: dict[str, str], method: str = "POST") -> int:
    h = {"Authorization": f"Bearer {s['tokens']['user']}", "Content-Type": "application/json",
         "Accept": "application/json, text/event-stream", **headers}
    if method == "GET":  # the SSE stream: only its status is read
        with httpx.stream("GET", f"{s['base']}/mcp", headers=h, timeout=30) as r:
            return r.status_code
    return httpx.post(f"{s['base']}/mcp", json=INITIALIZE, headers=h, timeout=30).status_code


def lineage(s: dict[str, Any], headers: dict[str, str], job: str = "guard") -> int:
    event = {"eventType": "COMPLETE", "eventTime": "2026-01-01T00:00:00Z",
             "job": {"namespace": "etl", "name": job}, "inputs": [{"namespace": "pg",
                                                                     "name": "lake.a"}],
             "outputs": [{"namespace": "pg", "name": "lake.b"}]}
    h = {"Authorization": f"Bearer {s['tokens']['admin']}", **headers}
    return httpx.post(f"{s['base']}/api/v1/lineage", json=event, headers=h, timeout=30
                      ).status_code


def answer(status: int) -> int | str:
    return status if status in (421, 403) else "served"


def variants(port: int) -> list[dict[str, str]]:
    return [{}, {"Host": f"localhost:{port}"}, {"Host": f"[::1]:{port}"}, EVIL_HOST,
            {"Host": "127.0.0.1"}, {"Host": "tether.internal:443"},
            {"Origin": f"http://localhost:{port}"}, {"Origin": "http://127.0.0.1:9"}, EVIL_ORIGIN,
            {"Origin": "null"}, {"Origin": f"https://127.0.0.1:{port}"},
            {"Host": "tether.internal:443", "Origin": "https://tether.internal"}]


@pytest.fixture(scope="module")
def loopback(second_dir: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[dict[str, Any]]:
    with mcp_server(second_dir, tmp_path_factory.mktemp("guard") / "second") as s:
        yield s


def test_lineage_answers_every_host_and_origin_as_the_mcp_endpoint(
        loopback: dict[str, Any]) -> None:
    s = loopback
    got = {json.dumps(h): (answer(mcp(s, h)), answer(lineage(s, h))) for h in variants(s["port"])}
    assert all(a == b for a, b in got.values()), got
    assert got[json.dumps(EVIL_HOST)] == (421, 421) and got[json.dumps(EVIL_ORIGIN)] == (403, 403)


def test_beyond_loopback_both_routes_answer_the_named_hosts_and_origins(
        second_dir: Path, tmp_path: Path) -> None:
    with mcp_server(second_dir, tmp_path / "second", "--allowed-host", "tether.internal:*",
                    "--allowed-origin", "https://tether.internal") as s:
        got = {json.dumps(h): (answer(mcp(s, h)), answer(lineage(s, h)))
               for h in variants(s["port"])}
    assert got[json.dumps({"Host": "tether.internal:443"})] == ("served", "served"), got
    assert all(a == b for a, b in got.values()), got


# --- the console ---------------------------------------------------------------------------------


@pytest.fixture
def proj(console_base: Project, tmp_path: Path) -> Project:
    return copy_of(console_base, tmp_path / "p")


def console_routes(root: Path) -> list[tuple[str, str]]:
    """(method, path pattern) of every route the console serves (HEAD aside), a parameter's
    convertor left out (``{rid:int}`` is ``{rid}``)."""
    app = create_app(root)
    return sorted((m, re.sub(r":\w+}", "}", r.path)) for r in app.app.routes
                  for m in (r.methods or {"GET"}) if m != "HEAD")


def filled(pattern: str) -> str:
    return re.sub(r"\{(rid|pid)\}", "1", pattern).replace("{name}", "some_tool")


def test_every_route_refuses_a_foreign_host_and_origin(loopback: dict[str, Any],
                                                        proj: Project) -> None:
    """The MCP endpoint, POST /api/v1/lineage and every console route: 421 and 403."""
    s = loopback
    assert mcp(s, {}) == 200 and mcp(s, EVIL_HOST) == 421 and mcp(s, EVIL_ORIGIN) == 403
    assert mcp(s, EVIL_HOST, "GET") == 421 and mcp(s, EVIL_ORIGIN, "GET") == 403
    assert lineage(s, EVIL_HOST, "refused") == 421 and lineage(s, EVIL_ORIGIN, "refused") == 403
    layer = layer_path(s["dir"], "openlineage")
    assert not layer.exists() or "etl/refused" not in json.loads(layer.read_text())["jobs"]
    routes = console_routes(proj.root)
    assert len(routes) >= 14, routes
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        csrf = c.csrf("/reviews")
        for method, pattern in routes:
            path = filled(pattern)
            form = {"csrf": csrf, "decision": "reject"} if method == "POST" else None
            for headers, code, says in ((EVIL_HOST, 421, "Invalid Host header"),
                                        (EVIL_ORIGIN, 403, "Invalid Origin header")):
                status, body, _ = c.request(path, form, headers)
                assert status == code and says in body, (method, path, headers, status)
        assert "pending" in c.request("/reviews/1")[1]  # nothing was decided
    assert lineage(s, {}, "accepted") == 200
    assert "etl/accepted" in json.loads(layer.read_text())["jobs"]


LONG = "9" * 5000
BAD_IDS: dict[str, list[tuple[str, str]]] = {
    "/reviews/{rid}": [("GET", f"/reviews/{10**30}"), ("GET", f"/reviews/{LONG}"),
                       ("GET", f"/reviews/{2**63}"), ("GET", "/reviews/%C2%B2"),
                       ("GET", "/reviews/-1")],
    "/reviews/{rid}/decide": [("POST", f"/reviews/{10**30}/decide"),
                              ("POST", f"/reviews/{LONG}/decide")],
    "/reviews/auto/{pid}": [("GET", f"/reviews/auto/{10**30}"), ("GET", f"/reviews/auto/{LONG}")],
    "/tools/{name}": [("GET", "/tools/" + "x" * 5000), ("GET", "/tools/%00"),
                      ("GET", "/tools/" + "x" * 300)],
    "/drift": [("GET", f"/drift?page={10**30}"), ("GET", f"/drift?page={LONG}")],
    "/learn/{pid}": [("GET", f"/learn/{10**30}"), ("GET", f"/learn/{LONG}"),
                     ("GET", "/learn/%C2%B2"), ("GET", "/learn/-1")],
    "/learn/{pid}/decide": [("POST", f"/learn/{10**30}/decide"),
                            ("POST", f"/learn/{LONG}/decide")],
    "/eval/run": [("GET", "/eval/run?run=0/" + "x" * 5000), ("GET", f"/eval/run?run={LONG}/x"),
                  ("GET", "/eval/run?run=0/%00"), ("GET", "/eval/run?run=%C2%B2/x")],
    "/eval/trace": [("GET", "/eval/trace?run=0/grounded&case=" + "x" * 5000),
                    ("GET", "/eval/trace?run=0/grounded&case=%00"),
                    ("GET", "/eval/trace?run=0/" + "x" * 5000 + "&case=c1"),
                    ("GET", f"/eval/trace?run={LONG}/grounded&case=c1")],
}
"""Every console route that takes an id, a name or a key (in its path or its query), with ids
that overflow 64 bits or Python's integer conversion, names longer than any file name, NUL."""


def test_bad_ids_names_and_keys_are_400_or_404_on_every_console_route(proj: Project) -> None:
    with_params = {p for _, p in console_routes(proj.root) if "{" in p}
    assert with_params <= set(BAD_IDS), with_params - set(BAD_IDS)  # a new route: add its ids
    with served(proj.root) as url:
        c = Client(url)
        c.sign_in(proj.tokens[REVIEWER])
        csrf = c.csrf("/reviews")
        for pattern, requests in BAD_IDS.items():
            for method, path in requests:
                form = {"csrf": csrf, "decision": "approve"} if method == "POST" else None
                status, body, _ = c.request(path, form)
                assert status in (400, 404), (pattern, path[:80], status, body[:300])
                assert "Traceback" not in body and "failed on this page" not in body
        status, _, headers = c.request("/eval/compare", [("csrf", csrf), ("run", "0/" + "x" * 5000)])
        assert status == 303
        assert c.request(headers["location"])[0] == 404
        assert "pending" in c.request("/reviews/1")[1]  # nothing was decided
