"""Discovery, on both warehouses: with no dedicated listing tools, a caller's tools/list holds the
governed metrics and three fixed tools; a product is found by a glossary synonym and by one of
its values, only within the caller's entitlement; described with the arguments its rows take;
and read through the generic listing with the same answers and the same refusals as its own
listing tool. The list stays under its token budget, and a project whose dedicated tools alone
exceed it does not build."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import copy_project, run_cli, with_serve
from tether.config import Project, load_project
from tether.context.meta import EVIDENCE_KEY, enum_of
from tether.context.meta import REFUSAL_KEY as REFUSAL_META
from tether.errors import ConfigError
from tether.policy.entitle import equality_scope
from tether.serve.calls import NOT_ANSWERED
from tether.serve.server import TetherServer
from tether.toolgen.discovery import PROBE, ROWS, SEARCH, listed
from tether.toolgen.discovery import SHAPING as NOT_PICKING
from tether.toolgen.tokens import tool_tokens

WHICH = ["demo", "second"]


def session(project: Project, user: str, calls: list[tuple[str, dict[str, Any]]],
            dedicated: Any = "none") -> tuple[list[str], list[Any]]:
    """tools/list and each call's result, through a real MCP client, as ``user``."""
    server = TetherServer(project, stdio_user=user, dedicated_tools=dedicated)

    async def go() -> tuple[list[str], list[Any]]:
        async with Client(server.server) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            return names, [await c.call_tool(n, a) for n, a in calls]

    try:
        return anyio.run(go)
    finally:
        server.close()


def listings(project: Project) -> dict[str, Any]:
    """product -> its published listing tool (name, definition, plan)."""
    server = TetherServer(project, stdio_user=next(iter(project.config.policies.users)))
    try:
        return {v.plan.product: v for v in server.current.values()
                if v.plan.kind == "list" and v.plan.product}
    finally:
        server.close()


def reached(project: Project, user: str) -> set[str]:
    """The products ``user`` reaches (has a listing tool for), served discovery-only."""
    server = TetherServer(project, stdio_user=user, dedicated_tools="none")
    try:
        return {v.plan.product for v in server.reachable(user) if v.plan.kind == "list"}
    finally:
        server.close()


def everyone(project: Project) -> str:
    """A user whose role reads every row of every product with every tool."""
    config = project.config
    for user, cfg in config.policies.users.items():
        role = config.policies.roles[cfg.role]
        if role.tools == ["*"] and not role.row_filters and not role.masks:
            return user
    raise AssertionError("no unrestricted user")


@pytest.mark.parametrize("which", WHICH)
def test_discovery_only_lists_metrics_and_three_tools_within_the_budget(
        which: str, built_both: dict[str, Project]) -> None:
    project = built_both[which]
    user = everyone(project)
    names, _ = session(project, user, [])
    metrics = {v.name for v in listings_and_metrics(project) if v.plan.kind == "metric"}
    assert set(names) == metrics | {SEARCH, PROBE, ROWS}
    server = TetherServer(project, stdio_user=user, dedicated_tools="none")
    try:
        tokens = sum(tool_tokens(v.definition) for v in server.visible(user))
        assert tokens <= project.config.serve.tool_list_token_budget
        assert server.listed.route == "discovery"
    finally:
        server.close()
    # the project's default while everything fits: every dedicated tool, no search or rows
    names, _ = session(project, user, [], dedicated=None)
    assert SEARCH not in names and ROWS not in names and PROBE in names
    assert set(listings(project).keys()) <= {p for p in project.config.products}


def listings_and_metrics(project: Project) -> list[Any]:
    server = TetherServer(project, stdio_user=everyone(project))
    try:
        return list(server.current.values())
    finally:
        server.close()


def matches(result: Any) -> list[dict[str, Any]]:
    assert not result.is_error, result.content[0].text
    found: list[dict[str, Any]] = result.structured_content["matches"]
    return found


@pytest.mark.parametrize("which", WHICH)
def test_a_product_is_found_by_a_glossary_synonym(which: str,
                                                  built_both: dict[str, Project]) -> None:
    project = built_both[which]
    config = project.config
    readable = set(listings(project))
    asked = [(s, {f.split(".")[0] for f in g.fields} & readable)
             for g in config.glossary.values() for s in g.synonyms]
    asked = [(s, ps) for s, ps in asked if ps]
    assert asked, "the warehouse's glossary has synonyms over its products"
    _, results = session(project, everyone(project), [(SEARCH, {"question": s})
                                                       for s, _ in asked])
    for (synonym, products), result in zip(asked, results, strict=True):
        found = {m["name"]: m for m in matches(result)}
        hit = products & set(found)
        assert hit, (synonym, products, list(found))
        m = found[sorted(hit)[0]]
        assert m["call"] == ROWS and m["with"] == {"product": sorted(hit)[0]}
        assert any("glossary" in why and synonym in why for why in m["matched"]), m


SHAPING = ("count_by", "sum_and_average_of", "order_by", "order")


def unique_values(project: Project) -> list[tuple[str, str, str]]:
    """(product, parameter, value): an enum value of one product's listing found in no other
    product's tool, name or description (so a search for it has one right answer)."""
    tools = listings_and_metrics(project)
    text = {v.name: json.dumps(v.definition).lower() for v in tools}
    out = []
    for product, v in sorted(listings(project).items()):
        for param, prop in v.definition["inputSchema"]["properties"].items():
            if param in SHAPING:
                continue  # its enum names columns, not values the data holds
            for value in enum_of(prop) or []:
                word = str(value)
                if (len(word) > 3 and word.replace("_", "").isalpha()
                        and not any(word.lower() in t for n, t in text.items() if n != v.name)):
                    out.append((product, param, word))
                    break
    return out


@pytest.mark.parametrize("which", WHICH)
def test_a_product_is_found_by_one_of_its_values(which: str,
                                                 built_both: dict[str, Project]) -> None:
    project = built_both[which]
    asked = unique_values(project)
    assert asked
    _, results = session(project, everyone(project),
                         [(SEARCH, {"question": f"which have {value}?"})
                          for _, _, value in asked])
    for (product, param, value), result in zip(asked, results, strict=True):
        found = matches(result)
        assert found and found[0]["name"] == product, (value, found)
        assert f"value {value!r} of {param}" in found[0]["matched"]
        assert result.content[0].text.startswith("1 match") or product in result.content[0].text


@pytest.mark.parametrize("which", WHICH)
def test_search_and_describe_stay_within_the_callers_entitlement(
        which: str, built_both: dict[str, Project]) -> None:
    project = built_both[which]
    config = project.config
    checked = 0
    for user, cfg in config.policies.users.items():
        role = config.policies.roles[cfg.role]
        # another scope's value of a row-filtered column: never matched for this caller
        others: list[str] = []
        for product in role.row_filters:
            scope = equality_scope(config, user, product)
            for column, mine in scope.items():
                v = listings(project).get(product)
                if v is None:
                    continue
                for param, prop in v.definition["inputSchema"]["properties"].items():
                    if param == column:
                        others += [str(x) for x in enum_of(prop) or [] if x not in mine]
        # products whose listing tool the role may not call: never found, never described
        names, results = session(project, user, [(SEARCH, {"question": w, "limit": 20})
                                                 for w in [*others, *config.products]])
        server = TetherServer(project, stdio_user=user, dedicated_tools="none")
        try:
            reach = {v.plan.product for v in server.reachable(user) if v.plan.kind == "list"}
        finally:
            server.close()
        for word, result in zip([*others, *config.products], results, strict=True):
            for m in matches(result):
                assert m["kind"] == "metric" or m["name"] in reach, (user, word, m)
                if word in others:  # another scope's value is nowhere in what they search
                    assert not any(why.startswith(f"value {word!r}") for why in m["matched"])
                checked += 1 + (word in others)
        hidden = sorted(set(config.products) - reach)
        if ROWS in names and hidden:
            _, refused = session(project, user, [(ROWS, {"product": p}) for p in hidden])
            for p, r in zip(hidden, refused, strict=True):
                assert r.is_error and p not in json.dumps(r.structured_content or {})
    assert checked


@pytest.mark.parametrize("which", WHICH)
def test_no_restricted_column_is_found_or_described(which: str,
                                                    built_both: dict[str, Project]) -> None:
    from tether.policy import restricted_columns

    project = built_both[which]
    config = project.config
    hidden = sorted({c.rsplit(".", 1)[-1] for p in config.products
                     for c in restricted_columns(config, p, _leaves(project, p))})
    assert hidden
    user = everyone(project)
    _, results = session(project, user, [(SEARCH, {"question": h.replace("_", " ")})
                                         for h in hidden]
                         + [(PROBE, {"product": p}) for p in config.products])
    for r in results[:len(hidden)]:
        for m in matches(r):
            assert not any(h in why for h in hidden for why in m["matched"]), m
    for r in results[len(hidden):]:
        assert not r.is_error
        arguments = json.dumps((r.structured_content["query_with"] or {}).get("arguments"))
        columns = [c["name"] for c in r.structured_content["columns"]]
        assert not any(h in arguments or h in columns for h in hidden)


def _leaves(project: Project, product: str) -> list[str]:
    from tether.serve.executor import Executor

    ex = Executor(project, b"k" * 32)
    try:
        return [c.name for col in ex.columns(product) for c in [col, *col.leaves()]]
    finally:
        ex.close()


def bad_arguments(project: Project, user: str) -> list[tuple[str, dict[str, Any]]]:
    """(product, arguments) a listing must refuse: a value outside its enum, an argument it
    does not take, a period it does not know, a value outside the caller's scope."""
    config = project.config
    out = []
    for product, v in sorted(listings(project).items()):
        props = v.definition["inputSchema"]["properties"]
        out.append((product, {"no_such_argument": 1}))
        if "period" in props:
            out.append((product, {"period": "the other day"}))
        for param, prop in props.items():
            if enum_of(prop) and param not in ("count_by", "sum_and_average_of"):
                several = prop.get("type") == "array"
                out.append((product, {param: ["NOT-A-VALUE"] if several else "NOT-A-VALUE"}))
                break
        scope = equality_scope(config, user, product)
        for column, mine in scope.items():
            if column in props and enum_of(props[column]) is not None:
                published = enum_of(props[column]) or []
                other = next((x for x in published if x not in mine), None)
                if other is not None:
                    out.append((product, {column: [other]}))
    return out


@pytest.mark.parametrize("which", WHICH)
def test_the_generic_listing_refuses_exactly_as_the_products_own_tool(
        which: str, built_both: dict[str, Project]) -> None:
    project = built_both[which]
    config = project.config
    filtered = [u for u, c in config.policies.users.items()
                if config.policies.roles[c.role].row_filters]
    users = [everyone(project), filtered[0]]
    refusals = 0
    for user in users:
        asked = bad_arguments(project, user)
        tools = listings(project)
        _, direct = session(project, user, [(tools[p].name, a) for p, a in asked], "all")
        _, routed = session(project, user, [(ROWS, {"product": p, "arguments": a})
                                            for p, a in asked])
        for (product, args), d, r in zip(asked, direct, routed, strict=True):
            if d.is_error and "unknown tool" in d.content[0].text:
                continue  # the role may not call it either way
            assert d.is_error and r.is_error, (product, args, d.content[0].text)
            assert (r.meta or {}).get(REFUSAL_META) == (d.meta or {}).get(REFUSAL_META)
            refusals += REFUSAL_META in (d.meta or {})
            if REFUSAL_META in (d.meta or {}):  # a refusal of policy is the answer
                assert r.content[0].text == d.content[0].text, (product, args)
                assert "Not answered" not in d.content[0].text, d.content[0].text
            else:  # a wrong argument: the same error, and the product's arguments to fix it
                # each ends saying it is no answer and which tool to call again
                again = ". " + NOT_ANSWERED.format(tool=tools[product].name)
                assert d.content[0].text.endswith(again), d.content[0].text
                assert r.content[0].text.endswith(NOT_ANSWERED.format(tool=ROWS))
                own, _, hint = r.content[0].text.partition(
                    f". The arguments {product} takes for you: ")
                assert own == d.content[0].text.removesuffix(again) and hint, (
                    product, args, r.content[0].text)
                assert ".. The arguments" not in r.content[0].text, r.content[0].text
    assert refusals, "a value outside a caller's scope was asked"


@pytest.mark.parametrize("which", WHICH)
def test_either_route_gives_the_same_answer(which: str, built_both: dict[str, Project]) -> None:
    project = built_both[which]
    user = everyone(project)
    tools = listings(project)
    asked: list[tuple[str, dict[str, Any]]] = []
    for product, v in sorted(tools.items()):
        props = v.definition["inputSchema"]["properties"]
        asked.append((product, {"limit": 3}))
        if "count_by" in props:
            asked.append((product, {"count_by": enum_of(props["count_by"])[0]}))
    _, direct = session(project, user, [(tools[p].name, a) for p, a in asked], "all")
    _, routed = session(project, user, [(ROWS, {"product": p, "arguments": a})
                                        for p, a in asked])
    for (product, args), d, r in zip(asked, direct, routed, strict=True):
        assert not d.is_error and not r.is_error, (product, args, r.content[0].text)
        assert r.content[0].text == d.content[0].text
        assert r.structured_content == d.structured_content
        assert r.meta[EVIDENCE_KEY]["sql"] == d.meta[EVIDENCE_KEY]["sql"]
        assert r.meta[EVIDENCE_KEY]["tool"] == tools[product].name


@pytest.mark.parametrize("which", WHICH)
def test_the_probe_says_how_to_read_a_products_rows(which: str,
                                                    built_both: dict[str, Project]) -> None:
    project = built_both[which]
    user = everyone(project)
    tools = listings(project)
    products = sorted(tools)
    _, routed = session(project, user, [(PROBE, {"product": p}) for p in products])
    _, direct = session(project, user, [(PROBE, {"product": p}) for p in products], "all")
    for p, r, d in zip(products, routed, direct, strict=True):
        q = r.structured_content["query_with"]
        assert q["tool"] == ROWS and q["product"] == p
        assert q["arguments"] == tools[p].definition["inputSchema"]["properties"]
        assert d.structured_content["query_with"]["tool"] == tools[p].name
    _, (unknown,) = session(project, user, [(PROBE, {"product": "no_such_product"})])
    assert unknown.is_error and SEARCH in unknown.content[0].text


def test_the_budget_decides_the_default_and_fails_closed(demo_dir: Path, tmp_path: Path) -> None:
    from tether.drift.publish import build

    d = copy_project(demo_dir, tmp_path / "p")
    build(load_project(d))
    project = load_project(d)
    server = TetherServer(project, stdio_user=everyone(project))
    try:
        tools = [(n, v.definition, v.plan) for n, v in server.current.items()]
    finally:
        server.close()
    config = project.config
    whole = listed(config, tools)
    assert whole.route == "dedicated" and whole.tokens <= config.serve.tool_list_token_budget
    small = config.model_copy(update={"serve": config.serve.model_copy(
        update={"tool_list_token_budget": whole.tokens - 1})})
    assert listed(small, tools).route == "discovery"  # the default gives way
    # and says why, as tether tools and tether build print it
    assert "fits serve.tool_list_token_budget" in whole.reason
    assert listed(small, tools).reason.startswith(
        f"discovery only: a tool for each of the {len(config.products)} products would take "
        f"over serve.tool_list_token_budget ({whole.tokens - 1:,} tokens)")
    said = run_cli("tools", "--project", str(d), "--dedicated-tools", "none")
    assert said.returncode == 0 and "discovery only, as serve.dedicated_tools" in said.stdout
    with pytest.raises(ConfigError, match=r"over serve\.tool_list_token_budget"):
        listed(small, tools, "all")
    named = listed(config, tools, [next(iter(config.products))])
    assert named.route == "mixed"
    with pytest.raises(ConfigError, match="neither a product nor a listing tool"):
        listed(config, tools, ["no_such_product"])
    # a project whose dedicated tools alone exceed the budget does not build (exit 2, said)
    text = (d / "tether.yaml").read_text()
    (d / "tether.yaml").write_text(with_serve(text, dedicated_tools="all",
                                              tool_list_token_budget=whole.tokens - 1))
    r = run_cli("build", "--project", str(d))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "tool_list_token_budget" in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_serve_takes_dedicated_tools_none_over_stdio(built_both: dict[str, Project]) -> None:
    from mcp import StdioServerParameters

    project = built_both["demo"]
    user = everyone(project)
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "tether"), args=[
        "serve", "--project", str(project.root), "--as-user", user, "--dedicated-tools", "none"])

    async def go(*more: str) -> tuple[list[str], str | None]:
        async with Client(StdioServerParameters(command=params.command,
                                                args=params.args[:5] + list(more))) as c:
            return [t.name for t in (await c.list_tools()).tools], c.instructions

    names, said = anyio.run(go, "--dedicated-tools", "none")
    assert {SEARCH, PROBE, ROWS} <= set(names)
    assert not any(v.plan.kind == "list" for v in listings_and_metrics(project)
                   if v.name in names)
    # the server's instructions say the way to a product that has no tool of its own ...
    assert said and f"call {SEARCH} with the question first" in said
    # ... and say nothing of a search where every product has its own tool
    names, said = anyio.run(go, "--dedicated-tools", "all")
    assert SEARCH not in names and said and SEARCH not in said


@pytest.mark.parametrize("which", WHICH)
def test_a_value_sent_to_the_wrong_parameter_says_where_it_belongs(
        which: str, built_both: dict[str, Project]) -> None:
    """A model that puts a segment into the region parameter gets it read as the segment: a
    value of exactly one other filter moves there (`moved_values`) and answers as the call
    written right, by either route; given to what shapes the answer (`order`), it is refused
    with the parameter that lists it."""
    project = built_both[which]
    user = everyone(project)
    tools = listings(project)
    moved, shaped = [], []
    for product, v in sorted(tools.items()):
        props = v.definition["inputSchema"]["properties"]
        enums = {f.param: [str(x) for x in enum_of(props.get(f.param)) or []]
                 for f in v.plan.filters if enum_of(props.get(f.param))}
        for a, b in ((a, b) for a in enums for b in enums if a != b):
            lone = next((x for x in enums[b] if sum(
                x.lower() in map(str.lower, vals) for vals in enums.values()) == 1), None)
            if lone is not None:
                moved.append((product, a, b, lone))
                break
        if enums and "order" in props:
            b, values = next(iter(enums.items()))
            shaped.append((product, b, values[0]))
    assert moved and shaped
    calls = [(tools[p].name, {a: x}) for p, a, _, x in moved]
    calls += [(tools[p].name, {b: [x] if tools[p].definition["inputSchema"]["properties"][b]
                               .get("type") == "array" else x}) for p, _, b, x in moved]
    calls += [(tools[p].name, {"order": x}) for p, _, x in shaped]
    _, results = session(project, user, calls, "all")
    n = len(moved)
    for (product, a, b, x), r, right in zip(moved, results[:n], results[n:2 * n], strict=True):
        assert not r.is_error, (product, a, r.content[0].text)
        assert r.structured_content["moved_values"] == {x: b}, (product, a)
        assert r.structured_content["rows"] == right.structured_content["rows"], (product, a)
    for (product, b, _), r in zip(shaped, results[2 * n:], strict=True):
        assert r.is_error, (product, "order")
        text = r.content[0].text
        assert "is a value of " in text, text
        assert b in text.split("is a value of ")[1].split(":")[0].split(" and "), text


@pytest.mark.parametrize("which", WHICH)
def test_every_eval_case_finds_its_data_by_its_question(
        which: str, built_both: dict[str, Project], demo_dir: Path, second_dir: Path) -> None:
    """Through discovery alone, each evaluation case's question, asked by the case's user,
    ranks a product its gold reads among the first three matches (measured when this was
    written: the first match for 31 of 34 demo cases and 18 of 19 on the second warehouse)."""
    from tether.context.meta import ToolContext

    project = built_both[which]
    src = demo_dir if which == "demo" else second_dir
    cases = [json.loads(x) for x in (src / "cases.jsonl").read_text().splitlines() if x.strip()]
    missed, asked = [], 0
    by_user: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        if (c.get("gold") or {}).get("required_fields"):
            by_user.setdefault(c["as_user"], []).append(c)
    for user, mine in by_user.items():
        _, results = session(project, user, [(SEARCH, {"question": c["question"], "limit": 3})
                                             for c in mine])
        metrics = {v.name: set(ToolContext.of(v.definition).products)
                   for v in listings_and_metrics(project) if v.plan.kind == "metric"}
        for c, r in zip(mine, results, strict=True):
            need = {f.split(".")[0] for f in c["gold"]["required_fields"]}
            found = set()
            for m in matches(r):
                found |= {m["name"]} if m["kind"] == "product" else metrics.get(m["name"], set())
            asked += 1
            if not need & found:
                missed.append((c["case_id"], [m["name"] for m in matches(r)]))
    assert asked >= 12 and not missed, missed


def test_the_discovery_configuration_is_named_in_reports() -> None:
    from tether.cli.eval import server_name

    assert server_name("stdio:tether serve --project p --mode grounded --dedicated-tools none"
                       ) == "tether-discovery"
    assert server_name("stdio:tether serve --project p --dedicated-tools none") == \
        "tether-discovery"
    assert server_name("stdio:tether serve --project p --mode bare") == "tether-bare"
    assert server_name("stdio:tether serve --project p --dedicated-tools all") == \
        "tether-grounded"


@pytest.mark.parametrize("which", WHICH)
def test_the_best_product_comes_with_its_arguments(which: str,
                                                   built_both: dict[str, Project]) -> None:
    """A model that goes straight from the search to the rows (the real one did) finds the
    best product's own arguments, as the caller's own listing would show them, in the result."""
    project = built_both[which]
    user = everyone(project)
    asked = unique_values(project)
    _, results = session(project, user, [(SEARCH, {"question": f"which have {value}?"})
                                         for _, _, value in asked])
    tools = listings(project)
    for (product, _, _), r in zip(asked, results, strict=True):
        best = matches(r)[0]
        assert best["arguments"] == tools[product].definition["inputSchema"]["properties"]
        assert "Its rows take the arguments" in r.content[0].text
        assert all("arguments" not in m for m in matches(r)[1:])


def _own_listings(project: Project, user: str) -> dict[str, Any]:
    """The listing tool of each product as the caller's dedicated list shows it."""
    by_name = {v.name: p for p, v in listings(project).items()}
    server = TetherServer(project, stdio_user=user, dedicated_tools="all")

    async def go() -> Any:
        async with Client(server.server) as c:
            return (await c.list_tools()).tools

    try:
        return {by_name[t.name]: t for t in anyio.run(go) if t.name in by_name}
    finally:
        server.close()


@pytest.mark.parametrize("which", WHICH)
def test_the_generic_listing_says_what_each_reachable_product_holds(
        which: str, built_both: dict[str, Project]) -> None:
    """rows_from_data_product's product argument carries a one-line catalog (each product's
    listing title) for exactly the products the caller reaches: a model that reads a product by
    name knows what it holds, and no caller learns the title of a product they may not read."""
    project = built_both[which]
    titles = {v.plan.product: v.definition["title"] for v in listings(project).values()}
    seen_partial = False
    for user in project.config.policies.users:
        server = TetherServer(project, stdio_user=user, dedicated_tools="none")

        async def go(s: TetherServer = server) -> Any:
            async with Client(s.server) as c:
                return {t.name: t for t in (await c.list_tools()).tools}

        try:
            tools = anyio.run(go)
            reach = {v.plan.product for v in server.reachable(user) if v.plan.kind == "list"}
        finally:
            server.close()
        if ROWS not in tools:
            assert not reach
            continue
        prop = tools[ROWS].input_schema["properties"]["product"]
        assert set(prop["enum"]) == reach
        own = _own_listings(project, user)
        for product, title in titles.items():
            line = f"{product}: {title}"
            assert (line in prop["description"]) == (product in reach), (user, product)
            if product in reach:  # then the arguments that pick its rows, as its tool takes them
                picks = {a for a in own[product].input_schema["properties"]
                         if a not in NOT_PICKING}
                if not picks:
                    assert f"{line} (arguments" not in prop["description"]
                    continue
                said = prop["description"].split(f"{line} (arguments: ", 1)[1].split(")", 1)[0]
                assert set(said.split(", ")) == picks, (user, product, said)
            if product not in reach:
                seen_partial = True
                assert title not in json.dumps(tools[ROWS].model_dump(mode="json"))
    assert seen_partial, "no user of this warehouse is kept from some product"


@pytest.mark.parametrize("which", WHICH)
def test_a_product_named_by_its_tools_name_is_that_product(
        which: str, built_both: dict[str, Project]) -> None:
    """Models copy the tool names they have seen: explain_data_product and
    rows_from_data_product given a product's listing tool name read that product (the result
    says so under product_from_tool) and answer as with the product's own name; the name of a
    tool the caller does not reach is refused as an unknown product, as its product is."""
    project = built_both[which]
    by_product = {p: v.name for p, v in listings(project).items() if v.name != p}
    checked = refused = 0
    for user in project.config.policies.users:
        reach = reached(project, user)
        for product, tool in sorted(by_product.items()):
            calls = [(PROBE, {"product": tool}), (PROBE, {"product": product}),
                     (ROWS, {"product": tool, "arguments": {"limit": 2}}),
                     (ROWS, {"product": product, "arguments": {"limit": 2}})]
            _, (p_tool, p_own, r_tool, r_own) = session(project, user, calls)
            if product not in reach:
                assert p_tool.is_error and r_tool.is_error, (user, tool)
                assert "product_from_tool" not in json.dumps(
                    [p_tool.model_dump(mode="json"), r_tool.model_dump(mode="json")])
                refused += 1
                continue
            for by_tool, own in ((p_tool, p_own), (r_tool, r_own)):
                assert not by_tool.is_error, (user, tool, by_tool.content)
                got = dict(by_tool.structured_content)
                assert got.pop("product_from_tool") == {"given": tool, "product": product}
                assert got == own.structured_content
            checked += 1
    assert checked and refused


@pytest.mark.parametrize("which", WHICH)
def test_a_refused_product_call_names_the_products_that_take_the_argument(
        which: str, built_both: dict[str, Project]) -> None:
    """rows_from_data_product given one product with another product's argument: the refusal
    names the products this caller reaches that take it (never one they do not reach); called
    with words and no product, it names the products those words find."""
    import re

    project = built_both[which]
    tools = listings(project)
    takes = {p: set(v.definition["inputSchema"]["properties"]) for p, v in tools.items()}
    named = 0
    for user in project.config.policies.users:
        reach = reached(project, user)
        asked = []
        for product in sorted(reach):
            other = next(((arg, p) for p in sorted(set(takes) - {product}) for arg in
                          sorted(takes[p] - takes[product]) if arg != "period"), None)
            if other is not None:
                asked.append((product, other))
        title = str(tools[sorted(reach)[0]].definition.get("title") or "") if reach else ""
        calls = [(ROWS, {"product": p, "arguments": {arg: "x"}}) for p, (arg, _) in asked]
        calls.append((ROWS, {"question": title or "rows"}))
        _, results = session(project, user, calls)
        for (product, (arg, _owner)), r in zip(asked, results, strict=False):
            text = r.content[0].text
            assert r.is_error, (user, product, arg)
            takers = sorted(p for p in reach - {product} if arg in takes[p])
            if takers:
                assert f"{arg} is an argument of " in text, (user, product, arg, text)
                assert any(re.search(rf"\b{re.escape(t)}\b", text) for t in takers), text
                named += 1
            for p in set(tools) - reach:  # nothing of what the caller does not reach
                assert not re.search(rf"\bargument of [^.;]*\b{re.escape(p)}\b", text), (
                    user, p, text)
        found = results[-1]
        assert found.is_error
        if title:
            assert "For your words, " in found.content[0].text, found.content[0].text
    assert named


@pytest.mark.parametrize("which", WHICH)
def test_a_products_arguments_given_beside_it_are_read_inside_arguments(
        which: str, built_both: dict[str, Project]) -> None:
    """Models flatten the call: rows_from_data_product given the product's arguments beside
    ``product`` instead of inside ``arguments`` reads them inside (the result says each under
    ``interpreted`` as ``arguments.NAME``, and the sentence repeats it) and answers, for every
    caller, exactly as the nested call (a row filter holds the same); a name given both ways
    with two values is refused; a name the product does not take is refused by the product's
    own check, with its arguments."""
    project = built_both[which]
    tools = listings(project)
    checked = 0
    for user in project.config.policies.users:
        reach = sorted(reached(project, user))
        asked: list[tuple[str, dict[str, Any]]] = []
        for product in reach:
            props = tools[product].definition["inputSchema"]["properties"]
            asked.append((product, {"limit": 2}))
            if "count_by" in props:
                asked.append((product, {"count_by": enum_of(props["count_by"])[0],
                                        "limit": 3}))
        calls = [(ROWS, {"product": p, **a}) for p, a in asked]
        calls += [(ROWS, {"product": p, "arguments": a}) for p, a in asked]
        _, results = session(project, user, calls)
        flat, nested = results[:len(asked)], results[len(asked):]
        for (product, args), f, n in zip(asked, flat, nested, strict=True):
            assert f.is_error == n.is_error, (user, product, f.content[0].text)
            if n.is_error:
                continue
            got = dict(f.structured_content)
            assert got.pop("interpreted") == {k: f"arguments.{k}" for k in args}
            assert got == n.structured_content, (user, product)
            for k in args:
                assert f"argument {k} read as arguments.{k}" in f.content[0].text
            checked += 1
    assert checked
    user = everyone(project)
    product = sorted(reached(project, user))[0]
    _, (twice, unknown) = session(project, user, [
        (ROWS, {"product": product, "limit": 2, "arguments": {"limit": 3}}),
        (ROWS, {"product": product, "no_such_argument_here": 1})])
    assert twice.is_error and "given both beside and inside arguments" in twice.content[0].text
    assert unknown.is_error
    assert "unknown argument(s) no_such_argument_here" in unknown.content[0].text
    assert f"The arguments {product} takes for you" in unknown.content[0].text
