"""The caller's scope, on both warehouses: a parameter the caller's row filter pins defaults to
the caller's own value and says so in their tool list ("your region: EMEA"); omitting it answers
for their scope; asking for another value is a refusal, never an empty result."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import copy_project
from tether.config import load_project
from tether.context.meta import enum_of
from tether.drift.publish import build
from tether.policy.entitle import NOT_YOURS, equality_scope
from tether.serve.server import TetherServer


@pytest.mark.parametrize("which", ["demo", "second"])
def test_a_pinned_parameter_defaults_to_the_callers_value(which: str, demo_dir: Path,
                                                          second_dir: Path,
                                                          tmp_path: Path) -> None:
    d = copy_project(demo_dir if which == "demo" else second_dir, tmp_path / which)
    build(load_project(d))
    project = load_project(d)
    config = project.config
    checked = 0
    for user, cfg in config.policies.users.items():
        filters = config.policies.roles[cfg.role].row_filters
        pins = {p: equality_scope(config, user, p) for p in filters}
        if not any(len(v) == 1 for scope in pins.values() for v in scope.values()):
            continue
        server = TetherServer(project, stdio_user=user)
        try:
            calls: list[tuple[str, str, Any, Any]] = []
            for v in server.visible(user):
                for f in v.plan.filters:
                    product, _, column = f.column.rpartition(".")
                    pinned = pins.get(product, {}).get(column)
                    if not pinned or len(pinned) != 1 or f.op != "eq" or f.alias:
                        continue  # (a path's filter has no default: it would hide the rows
                        # whose referent the caller may not see, which their policy shows)
                    (mine,) = pinned
                    prop = v.definition["inputSchema"]["properties"][f.param]
                    words = column.replace("_", " ")
                    several = prop.get("type") == "array"  # an enum takes several at once
                    assert prop["default"] == ([mine] if several else mine), (user, v.name)
                    assert f"your {words}: {mine} (the default" in prop["description"]
                    published = server.current[v.name].definition["inputSchema"]
                    others = [x for x in enum_of(published["properties"][f.param]) or []
                              if x != mine]
                    if several:
                        assert others, (v.name, f.param)  # the published enum lists them all
                    calls.append((v.name, f.param, mine, others[0] if others else None))
                    if several:  # the caller's own value with another: refused as a whole
                        calls += [(v.name, f.param, mine, [mine, others[0]]),
                                  (v.name, f.param, mine, [others[0], mine]),
                                  (v.name, f.param, mine, [others[0]])]

            async def go(srv: TetherServer, todo: list[tuple[str, str, Any, Any]]
                         ) -> list[tuple[Any, Any]]:
                out = []
                async with Client(srv.server) as c:
                    for name, param, _, other in todo:
                        mine_r = await c.call_tool(name, {})
                        other_r = (await c.call_tool(name, {param: other})
                                   if other is not None else None)
                        out.append((mine_r, other_r))
                return out

            results = anyio.run(go, server, calls)
        finally:
            server.close()
        for (name, param, mine, _other), (mine_r, other_r) in zip(calls, results, strict=True):
            assert not mine_r.is_error, (name, mine_r.content)
            column = next(f.column for f in server.current[name].plan.filters
                          if f.param == param).rpartition(".")[2]
            for row in mine_r.structured_content["rows"]:
                if column in row:
                    assert str(row[column]) == str(mine), (user, name, row)
            if other_r is not None:
                assert other_r.is_error and other_r.content[0].text.startswith("Not permitted")
                assert NOT_YOURS in other_r.content[0].text  # a refusal, never read as a zero
                # the reason is a sentence of its own before what to answer
                assert re.search(r"\)\. " + re.escape(NOT_YOURS), other_r.content[0].text), (
                    other_r.content[0].text)
                assert other_r.meta["tether/refusal"]["reason"] == "outside_entitlement"
            checked += 1
    assert checked >= 2, "each warehouse has a scoped user with a pinned parameter"


@pytest.mark.parametrize("which", ["demo", "second"])
def test_every_listing_states_the_callers_total(which: str, demo_dir: Path, second_dir: Path,
                                                tmp_path: Path) -> None:
    """total_rows on every page of every listing, for a filtered user and one who sees all,
    equals the rows that user gets by paging to the end (which the policy oracle checks row by
    row elsewhere): the count is the caller's, not the table's."""
    d = copy_project(demo_dir if which == "demo" else second_dir, tmp_path / which)
    build(load_project(d))
    project = load_project(d)
    config = project.config
    users = [next(u for u, c in config.policies.users.items()
                  if config.policies.roles[c.role].row_filters),
             next(u for u, c in config.policies.users.items()
                  if not config.policies.roles[c.role].row_filters)]
    seen: dict[str, dict[str, int]] = {}
    for user in users:
        server = TetherServer(project, stdio_user=user)
        listings = [v.name for v in server.visible(user) if v.plan.kind == "list"]

        async def go(srv: TetherServer, names: list[str]) -> dict[str, int]:
            counts = {}
            async with Client(srv.server) as c:
                for name in names:
                    rows, cursor, totals = 0, None, set()
                    while True:
                        r = await c.call_tool(name, {"limit": 200} | (
                            {"cursor": cursor} if cursor else {}))
                        assert not r.is_error, (name, r.content)
                        data = r.structured_content
                        rows += data["row_count"]
                        totals.add(data["total_rows"])
                        cursor = data["next_cursor"]
                        if not data["truncated"]:
                            break
                    assert totals == {rows}, (name, totals, rows)
                    counts[name] = rows
            return counts

        try:
            seen[user] = anyio.run(go, server, listings)
        finally:
            server.close()
    scoped, everyone = (seen[u] for u in users)
    assert any(scoped[n] < everyone[n] for n in scoped if n in everyone)
