"""One answer to "may this role reach this product?", asked of every surface, for every role of
both warehouses: tools/list (with every tool dedicated, and discovery only), the product enums of
explain_data_product and rows_from_data_product, what each of those two answers for each
product, what find_data_for_question finds, and `tether tools --as-user`. All agree.

A role reaches a product when it may read it (`tables`) and may call its listing tool (`tools`
globs). Each warehouse's roles are read from its own tether.yaml; a role with a deny is added to
a copy so that the table rule is asked too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client

from conftest import copy_project, run_cli
from tether.config import load_project
from tether.context.meta import ToolContext
from tether.drift.publish import build
from tether.serve.server import TetherServer
from tether.toolgen.discovery import PROBE, ROWS, SEARCH


@pytest.fixture(scope="module", params=["demo", "second"])
def project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    src: Path = request.getfixturevalue("demo_dir" if request.param == "demo" else "second_dir")
    d = copy_project(src, tmp_path_factory.mktemp(f"reach-{request.param}"))
    config = yaml.safe_load((d / "tether.yaml").read_text())
    pol = config["policies"]
    filtered = max(pol["roles"], key=lambda r: len(pol["roles"][r].get("row_filters", {})))
    denied = sorted(pol["roles"][filtered]["row_filters"])[0]
    role = dict(pol["roles"][filtered]) | {"tables": {"deny": [denied]}}
    pol["roles"]["denied_one"] = role
    template = next(u for u, c in pol["users"].items() if c["role"] == filtered)
    pol["users"]["deny.user"] = dict(pol["users"][template]) | {"role": "denied_one"}
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert build(load_project(d)).exit_code == 0
    return d


def _users(d: Path) -> list[str]:
    """One user per role."""
    pol = load_project(d).config.policies
    return sorted({c.role: u for u, c in sorted(pol.users.items())}.values())


def _ask(d: Path, user: str, dedicated: str) -> dict[str, Any]:
    server = TetherServer(load_project(d), stdio_user=user, dedicated_tools=dedicated)
    products = sorted(load_project(d).config.products)

    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(server.server) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            out["names"] = sorted(tools)
            for name in (PROBE, ROWS):
                if name in tools:
                    enum = tools[name].input_schema["properties"]["product"].get("enum")
                    out[f"{name} enum"] = sorted(enum or [])
                    answered = []
                    for p in products:
                        r = await c.call_tool(name, {"product": p} if name == PROBE
                                              else {"product": p, "arguments": {"limit": 1}})
                        if not r.is_error:
                            answered.append(p)
                    out[f"{name} answers"] = answered
            if SEARCH in tools:
                found = set()
                for p in products:
                    r = await c.call_tool(SEARCH, {"question": p.replace("_", " ")})
                    found |= {m.get("product") for m in (r.structured_content or {}).get(
                        "matches", []) if m.get("product") == p}
                out[f"{SEARCH} finds"] = sorted(found)
        return out

    try:
        answers = anyio.run(go)
        reached = sorted({v.plan.product for v in server.reachable(user)
                          if v.plan.kind == "list" and v.plan.product})
        listed = sorted({p for v in server.visible(user) if v.plan.kind == "list"
                         for p in ToolContext.of(v.definition).products})
    finally:
        server.close()
    return answers | {"reached": reached, "listed": listed}


def test_every_surface_gives_the_same_answer(project: Path) -> None:
    config = load_project(project).config
    reached = {}
    for n, user in enumerate(_users(project)):
        every = _ask(project, user, "all")
        discovery = _ask(project, user, "none")
        want = reached[user] = every["reached"]
        assert discovery["reached"] == want, user
        assert every["listed"] == want, user  # each product reached has its tool listed
        if PROBE in every["names"]:
            assert every[f"{PROBE} enum"] == want and every[f"{PROBE} answers"] == want, user
        if want:
            assert ROWS in discovery["names"] and SEARCH in discovery["names"], user
            assert discovery[f"{ROWS} enum"] == want, user
            assert discovery[f"{ROWS} answers"] == want, user
            assert set(discovery[f"{SEARCH} finds"]) <= set(want), user
        if PROBE in discovery["names"]:
            assert discovery[f"{PROBE} answers"] == want, user
        # the CLI's preview is the server's own list (discovery only asked once: it is slow)
        for setting, asked in (("all", every), ("none", discovery))[:2 if n == 0 else 1]:
            r = run_cli("tools", "--project", str(project), "--as-user", user, "--json",
                        "--dedicated-tools", setting)
            assert r.returncode == 0, r.stderr
            cli = json.loads(r.stdout)
            assert sorted(t["name"] for t in cli) == asked["names"], (user, setting)
            for t in cli:
                if t["name"] in (PROBE, ROWS):
                    assert sorted(t["inputSchema"]["properties"]["product"]["enum"]) == want
        # the table rule and the tool globs were both asked somewhere
        role = config.policies.roles[config.policies.users[user].role]
        if role.tables.deny:
            assert not set(role.tables.deny) & set(want)
    # roles that reach different products: the answer is not the same everywhere by accident
    assert len({tuple(v) for v in reached.values()}) >= 3


def test_the_console_shows_each_user_what_their_tools_list_shows(project: Path) -> None:
    """/tools lists the tools each user may call (a reviewer sees the rest marked "not
    yours"), and each tool's page shows its definition as that user's tools/list does: the
    enum values of their rows, not every row's."""
    import html
    import re

    from console import Client, served
    from tether.serve.identity import TokenStore

    users = _users(project)
    store = TokenStore(project / ".tether" / "tokens.json")
    tokens = {u: store.add(u) for u in users}
    server = TetherServer(load_project(project))
    try:
        want = {u: {v.name: server.shaped(u, v).definition for v in server.reachable(u)}
                for u in users}
        reviewers = {u for u in users if server.project.config.policies.roles[
            server.project.config.policies.users[u].role].reviewer}
        current = server.registry.current()
        published = set(current)
        # shaped for the user somewhere (a manager's regions), so equal pages are not by accident
        assert any(d["inputSchema"] != current[n].definition["inputSchema"]
                   for u in users for n, d in want[u].items())
    finally:
        server.close()
    differ = 0
    with served(project) as url:
        for user in users:
            c = Client(url)
            c.sign_in(tokens[user])
            status, page, _ = c.request("/tools")
            assert status == 200, user
            rows = re.findall(r'<tr><td><a href="/tools/([^"]+)">[^<]*</a>(.*?)</td>', page)
            yours = {n for n, marks in rows if "not yours" not in marks}
            assert yours == set(want[user]), user
            assert {n for n, _ in rows} == (published if user in reviewers else yours), user
            for name, definition in want[user].items():
                status, page, _ = c.request(f"/tools/{name}")
                assert status == 200, (user, name)
                shown = json.loads(html.unescape(re.findall(r"<pre>(.*?)</pre>", page, re.S)[-1]))
                assert shown["inputSchema"] == definition["inputSchema"], (user, name)
            for name in published - set(want[user]):
                status, _, _ = c.request(f"/tools/{name}")
                assert status == (200 if user in reviewers else 404), (user, name)
            differ += len(published - set(want[user]))
    assert differ  # some user may not call some tool: the page was asked to leave it out
