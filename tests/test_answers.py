"""Counts, totals and the answer sentence, on both warehouses.

count_by and sum_and_average_of answer "how many per value" and "the total / average" in one
call, counted in the engine with the caller's policy applied; each result's first text item is
one sentence that states the answer, its unit, window, definition and as_of. Every expectation
here is computed from what the same user gets by paging the plain listing, never from the
warehouse's names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import call_tools, copy_project
from tether.config import Project, load_project
from tether.context.meta import enum_of
from tether.drift.publish import build
from tether.serve.server import TetherServer

AGG = "sum_and_average_of"


def _users(project: Project) -> list[str]:
    """A user whose role filters rows, and one whose role sees every row."""
    config = project.config
    return [next(u for u, c in config.policies.users.items()
                 if config.policies.roles[c.role].row_filters),
            next(u for u, c in config.policies.users.items()
                 if not config.policies.roles[c.role].row_filters)]


def _all_rows(project: Project, user: str, tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row the user gets by following next_cursor to the end."""
    server = TetherServer(project, stdio_user=user)

    async def go() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        async with Client(server.server) as c:
            cursor = None
            while True:
                r = await c.call_tool(tool, {**args, "limit": 200,
                                             **({"cursor": cursor} if cursor else {})})
                assert not r.is_error, r.content
                rows += r.structured_content["rows"]
                cursor = r.structured_content["next_cursor"]
                if not cursor:
                    return rows

    try:
        return anyio.run(go)
    finally:
        server.close()


def _built(which: str, built_both: dict[str, Project], request: pytest.FixtureRequest,
           tmp_path: Path) -> Project:
    """The warehouse ``which`` names, built; "W-postgres" its PostgreSQL copy, built here."""
    if not which.endswith("-postgres"):
        return built_both[which]
    d = copy_project(request.getfixturevalue(f"pg_{which.removesuffix('-postgres')}_dir"),
                     tmp_path / "pg")
    build(load_project(d))
    return load_project(d)


def _listings(project: Project, user: str) -> list[Any]:
    server = TetherServer(project, stdio_user=user)
    try:
        return [v for v in server.visible(user) if v.plan.kind == "list"]
    finally:
        server.close()


@pytest.mark.parametrize("which", ["demo", "second"])
def test_count_by_counts_what_the_caller_would_page_through(which: str,
                                                           built_both: dict[str, Project]) -> None:
    """One row per value with its count, in one call; each count equals the total_rows of the
    listing filtered to that value, and they add up to the unfiltered total, for a filtered
    user and one who sees all."""
    project = built_both[which]
    checked = 0
    for user in _users(project):
        listings = _listings(project, user)
        props = {v.name: v.definition["inputSchema"]["properties"] for v in listings}
        todo = [(v.name, p) for v in listings
                for p in props[v.name].get("count_by", {}).get("enum", [])]

        def filter_of(name: str, value: str, props: dict[str, Any] = props) -> str | None:
            """The parameter that filters by a count_by value: itself, or a path's
            PATH_column (none where tether.yaml names the tool's filters)."""
            safe = value.replace(".", "_")
            return value if value in props[name] else safe if safe in props[name] else None
        results = call_tools(project, user, [(n, {"count_by": p}) for n, p in todo]
                             + [(n, {"limit": 1}) for n, _ in todo])
        counted, plain = results[:len(todo)], results[len(todo):]
        per_values = [[r for r in c.structured_content["rows"] if r[p] is not None]
                      if not c.is_error and filter_of(n, p) else []
                      for (n, p), c in zip(todo, counted, strict=True)]
        singles = iter(call_tools(project, user, [
            (name, {filter_of(name, param): r[param], "limit": 1})
            for (name, param), rows in zip(todo, per_values, strict=True) for r in rows]))
        for (name, param), c, pl, per_value in zip(todo, counted, plain, per_values,
                                                   strict=True):
            assert not c.is_error, (name, param, c.content)
            data = c.structured_content
            assert data["total_rows"] == pl.structured_content["total_rows"], (name, param)
            # every group, or (an identifier's thousands) the first ones and the whole count
            shown = sum(r["rows"] for r in data["rows"])
            assert data["total_rows"] == shown if not data["truncated"] else shown < data[
                "total_rows"], (name, param)
            each = [next(singles) for _ in per_value]
            assert not [e.content for e in each if e.is_error], (name, param)
            assert [e.structured_content["total_rows"] for e in each] == [
                r["rows"] for r in per_value], (name, param)
            first = c.content[0].text
            assert first.startswith(f"{data['total_rows']} matching rows counted by {param}: ")
            assert json.loads(c.content[1].text) == data
            checked += 1
    assert checked >= 4


@pytest.mark.parametrize("which", ["demo", "second"])
def test_sum_and_average_equal_the_rows_the_caller_may_page(which: str,
                                                           built_both: dict[str, Project]) -> None:
    """The total and mean of a numeric column, with its unit, equal what the same user gets by
    paging every row and adding up; the sentence states them with the unit, and how many rows
    held a value where some did not (the mean is over those)."""
    project = built_both[which]
    checked = 0
    for user in _users(project):
        for v in _listings(project, user):
            columns = v.definition["inputSchema"]["properties"].get(AGG, {}).get("enum", [])
            if not columns:
                continue
            rows = _all_rows(project, user, v.name, {})  # once per tool and user
            for r, column in zip(call_tools(project, user, [(v.name, {AGG: c})
                                                             for c in columns[:2]]),
                                 columns[:2], strict=True):
                assert not r.is_error, (v.name, column, r.content)
                data = r.structured_content
                unit = v.plan.units.get(column, "")
                if "{" in unit:  # totalled per unit column value: compare per group
                    per = unit[unit.index("{") + 1:unit.index("}")]
                    groups = {g[per]: g for g in data["rows"]}
                    for key, g in groups.items():
                        values = [x[column] for x in rows if x[per] == key
                                  and x[column] is not None]
                        assert g[f"sum_{column}"] == pytest.approx(sum(values))
                        assert g[f"rows_with_{column}"] == len(values)
                    checked += 1
                    continue
                values = [x[column] for x in rows if x[column] is not None]
                assert data["total_rows"] == len(rows), (v.name, column)
                if not rows:
                    assert data["rows"] == []
                    continue
                (row,) = data["rows"]
                assert row[f"sum_{column}"] == pytest.approx(sum(values)), (v.name, column)
                if values:
                    assert row[f"average_{column}"] == pytest.approx(sum(values) / len(values))
                # an average leaves out the rows without a value, and says how many it kept
                assert row[f"rows_with_{column}"] == len(values), (v.name, column)
                assert (f"(over the {len(values)} rows with a value)" in r.content[0].text) == (
                    len(values) != len(rows)), r.content[0].text
                if unit:
                    assert data["units"][f"sum_{column}"] == unit
                    assert f"total {column} " in r.content[0].text
                    assert unit in r.content[0].text, r.content[0].text
                checked += 1
    assert checked >= 3


@pytest.mark.parametrize("which", ["demo", "second"])
def test_every_answer_starts_with_one_sentence(which: str, built_both: dict[str, Project]) -> None:
    """Listings: "TOTAL matching rows in all; one page of them shown" (the total the one
    number, never the page as the count); metrics: the
    value with its unit, the window (end exclusive), the definition applied; both: as_of. An
    empty result says why in the sentence."""
    project = built_both[which]
    user = _users(project)[0]
    server = TetherServer(project, stdio_user=user)
    try:
        tools = [v for v in server.visible(user) if v.plan.kind in ("list", "metric")]
    finally:
        server.close()
    results = call_tools(project, user, [(v.name, {"limit": 2} if v.plan.kind == "list" else {})
                                   for v in tools])
    metrics = cents = 0
    for v, r in zip(tools, results, strict=True):
        assert not r.is_error, (v.name, r.content)
        first, data = r.content[0].text, r.structured_content
        assert json.loads(r.content[1].text) == data
        assert "\n" not in first and first.endswith(".")
        assert (f"as of {data['as_of']}" if data.get("as_of") else "as of: not known") in first
        if v.plan.kind == "list":
            if data["total_rows"]:
                total = data["total_rows"]
                every = data["row_count"] == total
                assert first.startswith(f"{total} matching rows in all" + (
                    ", every one shown" if every else "; one page of them shown")), first
                # no other number before the window or as_of (nor before one row's values):
                # the page's size is never said
                head = first.split("; window", 1)[0].split("; as of", 1)[0].split(":", 1)[0]
                assert re.findall(r"\d+", head) == [str(total)], first
            else:
                assert data["empty_reason"] in first
        else:
            metrics += 1
            window = data.get("window")
            if window:
                assert f"{window['start']} to {window['end']} (end exclusive" in first
            if v.plan.definition:
                assert f"definition applied: {v.plan.definition}" in first
            for field, unit in data.get("units", {}).items():
                if data["rows"] and "{" not in unit:
                    assert f"{field} = " in first and unit in first, (v.name, first)
                value = (data.get("overall") or data["rows"][0] if data["rows"] else {}).get(field)
                if unit.endswith("_cents") and isinstance(value, int):  # also in currency units
                    cents += 1
                    # the currency's units first, the stored cents after them
                    assert f"{value / 100:.2f} {unit[:-len('_cents')]} (= {value} {unit})" \
                        in first, first
    assert metrics >= 2 and cents >= 1


def test_a_masked_column_is_neither_counted_nor_totalled(built_both: dict[str, Project]) -> None:
    """A column masked for the caller cannot be totalled (a total over one row is the value)
    nor bounded by a range (its bounds would tell the value): a masked_predicate refusal, on
    the second warehouse's front desk (a birth year: a part of a date, bounded, not totalled)."""
    project = built_both["second"]
    config = project.config
    checked = 0
    for user, cfg in config.policies.users.items():
        masks = config.policies.roles[cfg.role].masks
        for v in _listings(project, user):
            totalled = v.definition["inputSchema"]["properties"].get(AGG, {}).get("enum", [])
            asked = [{AGG: c} for c in totalled] + [{"range": {c: "1..3000"}}
                                                    for c in v.plan.ranges]
            for args in asked:
                column = args.get(AGG) or next(iter(args.get("range", {})))
                if f"{v.plan.product}.{column}" not in masks:
                    continue
                (r,) = call_tools(project, user, [(v.name, args)])
                assert r.is_error and r.content[0].text.startswith("Not permitted"), args
                assert (r.meta or {})["tether/refusal"]["reason"] == "masked_predicate"
                checked += 1
    assert checked >= 1


@pytest.mark.parametrize("which", ["demo", "second"])
def test_bare_shares_every_server_behaviour(which: str, built_both: dict[str, Project]) -> None:
    """Bare tools strip descriptions, enums, patterns and output schemas, nothing the server
    does: the same call gets the same result and the same answer sentence (periods, caller
    defaults, counts, totals, identifiers resolved, units, windows)."""
    project = built_both[which]
    user = _users(project)[0]
    grounded = TetherServer(project, stdio_user=user)
    bare = TetherServer(project, mode="bare", stdio_user=user)
    try:
        calls: list[tuple[str, dict[str, Any]]] = []
        refused: list[tuple[str, dict[str, Any]]] = []
        for v in grounded.visible(user):
            if v.plan.kind not in ("list", "metric"):
                continue
            props = v.definition["inputSchema"]["properties"]
            extra = {"limit": 3} if "limit" in props else {}
            calls.append((v.name, dict(extra)))
            if "period" in props:
                calls.append((v.name, {**extra, "period": "last_quarter"}))
            if "count_by" in props:
                calls.append((v.name, {"count_by": props["count_by"]["enum"][0]}))
                # a parameter the grounded schema does not offer to count by (a key, an id)
                refused += [(v.name, {"count_by": f.param}) for f in sorted(
                    v.plan.filters, key=lambda f: bool(f.routes))
                            if f.param not in props["count_by"]["enum"]
                            and f.alias is None][:1]  # (a path's is read as its PATH.column)
            if AGG in props:
                calls.append((v.name, {AGG: props[AGG]["enum"][0]}))
        assert {n for n, _ in calls} <= {v.name for v in bare.visible(user)}
        assert refused, "a listing whose key or id is not offered to count by"
        calls += refused

        async def go(server: TetherServer) -> list[Any]:
            async with Client(server.server) as c:
                return [await c.call_tool(name, args) for name, args in calls]

        got_g, got_b = anyio.run(go, grounded), anyio.run(go, bare)
    finally:
        grounded.close()
        bare.close()
    for (name, args), g, b in zip(calls, got_g, got_b, strict=True):
        if (name, args) in refused:  # refused by both: by the enum, and by the server itself
            assert g.is_error and b.is_error, (name, args, b.content)
            assert "count_by" in b.content[0].text, b.content
            continue
        assert not g.is_error and not b.is_error, (name, args, g.content, b.content)
        assert g.structured_content == b.structured_content, (name, args)
        assert g.content[0].text == b.content[0].text, (name, args)
    assert len(calls) >= 10


@pytest.mark.parametrize("which", ["demo", "second"])
def test_a_list_of_one_name_counts_and_totals_by_that_name(
        which: str, built_both: dict[str, Project]) -> None:
    """count_by and sum_and_average_of take one name; sent as a list of one (the shape of the
    enum parameters beside them, which the real model copied), it is that name."""
    project = built_both[which]
    user = _users(project)[1]
    server = TetherServer(project, stdio_user=user)
    try:
        calls = []
        for v in server.visible(user):
            props = v.definition["inputSchema"]["properties"]
            for key in ("count_by", AGG):
                if key in props:
                    name = props[key]["enum"][0]
                    calls += [(v.name, {key: name}), (v.name, {key: [name]})]
    finally:
        server.close()
    results = call_tools(project, user, calls)
    for (name, args), plain, listed in zip(calls[::2], results[::2], results[1::2], strict=True):
        assert not plain.is_error and not listed.is_error, (name, args, listed.content)
        assert plain.structured_content == listed.structured_content, (name, args)
    assert len(calls) >= 4


def _first_rows(project: Project, user: str) -> list[tuple[Any, dict[str, Any], dict[str, Any]]]:
    """Each listing the caller sees, its first row as they read it ({} when none) and its
    parameters."""
    tools = _listings(project, user)
    firsts = call_tools(project, user, [(v.name, {"limit": 1}) for v in tools])
    return [(v, ((first.structured_content or {}).get("rows") or [{}])[0],
             v.definition["inputSchema"]["properties"])
            for v, first in zip(tools, firsts, strict=True)]


@pytest.mark.parametrize("which", ["demo", "second"])
def test_a_list_of_one_value_for_a_one_value_filter_is_that_value(
        which: str, built_both: dict[str, Project]) -> None:
    """A filter that takes one value (an identifier, a code), given a list of one (as a small
    model wrote `clinic_code: ["X"]` three times and was refused each time), asks the same as
    the value alone: the same answer. Two values stay refused."""
    project = built_both[which]
    user = _users(project)[0]
    calls = []
    for v, row, props in _first_rows(project, user):
        for f in v.plan.filters:
            prop = props.get(f.param) or {}
            column = f.column.rsplit(".", 1)[-1]
            if prop.get("type") == "string" and f.op == "eq" and row.get(column):
                value = str(row[column])
                calls += [(v.name, {f.param: value}), (v.name, {f.param: [value]}),
                          (v.name, {f.param: [value, value + "x"]})]
                break
    results = call_tools(project, user, calls)
    for i in range(0, len(calls), 3):
        plain, listed, two = results[i:i + 3]
        assert not plain.is_error and not listed.is_error, (calls[i + 1], listed.content)
        assert plain.structured_content == listed.structured_content, calls[i + 1]
        assert two.is_error, calls[i + 2]
    assert len(calls) >= 3


@pytest.mark.parametrize("which", ["demo", "second"])
def test_a_number_written_as_a_string_is_that_number(
        which: str, built_both: dict[str, Project]) -> None:
    """An integer parameter given its value as a string ("1", as a small model wrote an order's
    id and was refused), alone or in a list, and the limit as "2", ask the same as the numbers;
    a string that is no number stays refused."""
    project = built_both[which]
    user = _users(project)[0]
    calls: list[tuple[str, dict[str, Any]]] = []
    for v, row, props in _first_rows(project, user):
        for f in v.plan.filters:
            prop = props.get(f.param) or {}
            kind = prop.get("type"), (prop.get("items") or {}).get("type")
            value = row.get(f.column.rsplit(".", 1)[-1])
            if "integer" in kind and isinstance(value, int) and not isinstance(value, bool):
                typed = [value] if kind[0] == "array" else value
                written = [str(value)] if kind[0] == "array" else str(value)
                calls += [(v.name, {f.param: typed, "limit": 2}),
                          (v.name, {f.param: written, "limit": "2"}),
                          (v.name, {f.param: f"{value}x"})]
                break
    results = call_tools(project, user, calls)
    for i in range(0, len(calls), 3):
        plain, written, odd = results[i:i + 3]
        assert not plain.is_error and not written.is_error, (calls[i + 1], written.content)
        assert plain.structured_content == written.structured_content, calls[i + 1]
        assert odd.is_error and "is not of type" in odd.content[0].text, calls[i + 2]
    assert len(calls) >= 3, "no integer filter on this warehouse"


@pytest.mark.parametrize("which", ["demo", "second"])
def test_one_matching_row_says_its_numbers_with_their_units(
        which: str, built_both: dict[str, Project]) -> None:
    """A listing that matches one row says that row's numbers that carry a unit beside the
    count ("1 matching rows in all, every one shown: staff_on_duty = 7 staff"): a row that holds
    a count or an amount was answered "1"; more rows say only their total."""
    project = built_both[which]
    user = _users(project)[0]
    calls: list[tuple[str, dict[str, Any]]] = []
    for v, row, props in _first_rows(project, user):
        keyed = [f for f in v.plan.filters if f.op == "eq" and f.param in props
                 and row.get(f.column.rsplit(".", 1)[-1]) is not None]
        if keyed:
            calls.append((v.name, {f.param: row[f.column.rsplit(".", 1)[-1]] for f in keyed}))
    said = 0
    for (name, _args), r in zip(calls, call_tools(project, user, calls), strict=True):
        if r.is_error:
            continue
        data, first = r.structured_content, r.content[0].text
        numbers = {k: u for k, u in (data.get("units") or {}).items() if data["rows"]
                   and isinstance(data["rows"][0].get(k), int | float)}
        if data["total_rows"] == 1 and numbers:
            said += 1
            assert first.startswith("1 matching rows in all, every one shown: "), first
            for k, unit in numbers.items():
                assert f"{k} = " in first and unit.split("_")[0] in first, (name, first)
        elif data["total_rows"] > 1:
            assert "shown:" not in first, first
    assert said >= 1, f"no listing on {which} matched one row with a number in a unit"


def test_an_empty_string_is_an_argument_left_out(built_both: dict[str, Project]) -> None:
    """Small models fill optional parameters with "": that is the parameter left out (every row,
    the default window), not a filter on the empty value nor an invalid identifier."""
    project = built_both["second"]
    user = _users(project)[1]
    calls: list[tuple[str, dict[str, Any]]] = []
    for v in _listings(project, user):
        props = v.definition["inputSchema"]["properties"]
        blank = {k: "" for k in props if k not in ("limit", "cursor")}
        calls += [(v.name, {"limit": 2}), (v.name, {"limit": 2, **blank})]
    results = call_tools(project, user, calls)
    for i in range(0, len(calls), 2):
        plain, blank = results[i], results[i + 1]
        assert not blank.is_error, (calls[i + 1], blank.content)
        assert blank.structured_content == plain.structured_content, calls[i][0]
    assert len(calls) >= 8


@pytest.mark.parametrize("which", ["demo", "second", pytest.param(
    "second-postgres", marks=pytest.mark.postgres)])
def test_an_enum_filter_takes_several_values_at_once(which: str, built_both: dict[str, Project],
                                                     request: pytest.FixtureRequest,
                                                     tmp_path: Path) -> None:
    """A listing filtered by two values of an enum matches exactly the rows of each value alone
    (its total is their sum, its rows hold only those values); a metric cut by two values gives
    each value's row as asked alone; one value given bare is the same as a list of one. For a
    filtered user and one who sees all, on DuckDB and PostgreSQL."""
    project = _built(which, built_both, request, tmp_path)
    listings = metrics = 0
    triples_checked: list[str] = []
    for user in _users(project):
        server = TetherServer(project, stdio_user=user)
        try:
            todo, triples = [], []
            for v in server.visible(user):
                props = v.definition["inputSchema"]["properties"]
                for f in v.plan.filters:
                    values = enum_of(props.get(f.param)) or []
                    if props.get(f.param, {}).get("type") == "array" and len(values) >= 2:
                        todo.append((v.name, v.plan.kind, f.param, values[0], values[1]))
                    if props.get(f.param, {}).get("type") == "array" and len(values) >= 3:
                        triples.append((v.name, v.plan.kind, f.param, values[:3]))
        finally:
            server.close()
        calls = [(n, {p: arg}) for n, _, p, a, b in todo for arg in ([a, b], [a], b, a)]
        results = iter(call_tools(project, user, calls))
        for name, kind, param, a, b in todo:
            both, only_a, only_b, bare_a = (next(results) for _ in range(4))
            assert not [r.content for r in (both, only_a, only_b, bare_a) if r.is_error], name
            sc = [r.structured_content for r in (both, only_a, only_b, bare_a)]
            assert sc[1]["rows"] == sc[3]["rows"], (name, param)  # "a" is ["a"]
            evidence = both.meta["tether/evidence"]  # each value bound, by a placeholder
            bound = {k: str(v) for k, v in evidence["params"].items()
                     if re.fullmatch(re.escape(param) + r"(__\d+_*)?", k)}
            assert sorted(bound.values()) == sorted([str(a), str(b)]), (name, bound)
            assert all(k in evidence["sql"] for k in bound), (name, evidence["sql"])
            if kind == "list":
                assert sc[0]["total_rows"] == sc[1]["total_rows"] + sc[2]["total_rows"], name
                column = param if param in (sc[0]["rows"] or [{}])[0] else None
                if column:
                    assert {str(r[column]) for r in sc[0]["rows"]} <= {str(a), str(b)}, name
                listings += 1
            else:
                assert sorted(map(json.dumps, sc[0]["rows"])) == sorted(
                    map(json.dumps, sc[1]["rows"] + sc[2]["rows"])), (name, param)
                metrics += 1
        # three values: the rows of the three alone (the SQL is made per number of values)
        calls = [(n, {p: arg}) for n, _, p, vs in triples for arg in ([vs[0], vs[1], vs[0]], vs,
                                                                     *[[x] for x in vs])]
        results = iter(call_tools(project, user, calls))
        for name, kind, _param, _ in triples:
            twice, three, *alone = (next(results) for _ in range(5))
            assert not [r.content for r in (twice, three, *alone) if r.is_error], name
            key = "total_rows" if kind == "list" else "rows"
            if kind == "list":  # a value given twice counts once
                assert twice.structured_content[key] == sum(
                    r.structured_content[key] for r in alone[:2]), name
                assert three.structured_content[key] == sum(
                    r.structured_content[key] for r in alone), name
            else:
                assert sorted(map(json.dumps, three.structured_content[key])) == sorted(
                    json.dumps(row) for r in alone for row in r.structured_content[key]), name
            triples_checked.append(name)
    assert listings >= 4 and metrics >= 1 and len(triples_checked) >= 2


def _additive(select_sql: str, dialect: str) -> tuple[set[str], set[str]]:
    """(measures of a metric's SELECT that add up over a partition of its rows: a plain
    COUNT(*) or COUNT(x), or a SUM (a COALESCE of one too); distinct counts, which do not)."""
    from sqlglot import exp, parse_one

    out, distinct = set(), set()
    for e in parse_one(select_sql, read=dialect).expressions:
        body = e.this if isinstance(e, exp.Alias) else e
        if isinstance(body, exp.Coalesce):
            body = body.this
        if isinstance(body, exp.Filter):
            body = body.this
        if isinstance(body, exp.Sum) or (isinstance(body, exp.Count)
                                         and not isinstance(body.this, exp.Distinct)):
            out.add(e.alias_or_name)
        elif isinstance(body, exp.Count):
            distinct.add(e.alias_or_name)
    return out, distinct


@pytest.mark.parametrize("which", ["demo", "second"])
def test_a_metric_cut_into_rows_states_its_overall_value_first(
        which: str, built_both: dict[str, Project]) -> None:
    """A metric split by a dimension into several rows also gives the metric over all of them
    (``overall``, computed by the engine, first in the answer sentence, its statement in the
    evidence): a count or a sum equals the rows' sum, a distinct count lies between the largest
    row and the sum; for a filtered user only over the rows that user may see."""
    project = built_both[which]
    checked = distinct_checked = 0
    distinct_offered = False
    for user in _users(project):
        server = TetherServer(project, stdio_user=user)
        try:
            metrics = [v for v in server.visible(user) if v.plan.kind == "metric"
                       and v.plan.group_by]
        finally:
            server.close()
        for v, r in zip(metrics, call_tools(project, user, [(v.name, {}) for v in metrics]),
                        strict=True):
            assert not r.is_error, (v.name, r.content)
            data, first = r.structured_content, r.content[0].text
            if len(data["rows"]) < 2:
                assert "overall" not in data and not first[:1].isdigit(), (v.name, first)
                continue
            overall = data["overall"]
            assert next(iter(data)) == "overall"  # first in the structured result too
            assert list(data)[-1] == "rows"  # and the rows after what says what they are
            assert list(json.loads(r.content[1].text)) == list(data)  # ... and in its JSON text
            assert first.startswith("In all: "), first  # the values lead, no count of groups
            assert ", each: " in first and f"({len(data['rows'])} values)" not in first, first
            assert first.startswith(f"In all: {next(iter(overall))} = "), first
            assert r.meta["tether/evidence"]["overall_sql"], v.name
            additive, distinct = _additive(v.plan.select or "", v.plan.dialect)
            for measure, value in overall.items():
                parts = [row[measure] for row in data["rows"] if row[measure] is not None]
                if not isinstance(value, (int, float)) or not parts:
                    continue
                if measure in additive:
                    assert value == pytest.approx(sum(parts)), (v.name, measure)
                elif measure in distinct:
                    assert max(parts) <= value <= sum(parts), (v.name, measure)
                    distinct_checked += 1
            checked += 1
            distinct_offered = distinct_offered or bool(distinct & set(overall))
    assert checked >= 2
    assert distinct_checked or not distinct_offered  # a distinct count cut into rows: checked


@pytest.mark.parametrize("which", ["demo", "second"])
def test_a_page_of_rows_comes_after_what_it_is_a_page_of(
        which: str, built_both: dict[str, Project]) -> None:
    """A listing's result, structured and as JSON text, says how many rows match in all first
    (total_rows, before the page's row_count) and puts its rows last, so a client that shows
    only the start of a long result still shows how many rows match."""
    project = built_both[which]
    user = _users(project)[0]
    server = TetherServer(project, stdio_user=user)
    try:
        lists = [v for v in server.visible(user) if v.plan.kind == "list"]
    finally:
        server.close()
    results = call_tools(project, user, [(v.name, {"limit": 2}) for v in lists])
    for v, r in zip(lists, results, strict=True):
        assert not r.is_error, (v.name, r.content)
        data = r.structured_content
        keys = list(json.loads(r.content[1].text))
        assert keys == list(data) and keys[-1] == "rows", (v.name, keys)
        assert keys[0] == "total_rows", (v.name, keys)  # all that match, before the page's count
    assert lists


@pytest.mark.parametrize("which", ["demo", "second", pytest.param(
    "demo-postgres", marks=pytest.mark.postgres)])
def test_a_first_page_states_what_every_matching_row_adds_up_to(
        which: str, built_both: dict[str, Project], request: pytest.FixtureRequest,
        tmp_path: Path) -> None:
    """A listing's first page says what all its matching rows add up to (`totals`, and in the
    sentence after the count): each total equals the same user's sum_and_average_of over the
    same filter, so a row filter holds; only amounts in one named currency, counts and
    durations, never a value per something (a price, a rate), never a column masked for the
    caller, never for rows that each hold a state over a span a metric reads, and where the
    key holds a time column (a snapshot, a per-day aggregate) only over rows of one moment (a
    period of one day): "how much" was answered with one page's sum. DuckDB and PostgreSQL,
    every user of both warehouses."""
    project = _built(which, built_both, request, tmp_path)
    config = project.config
    spans = {m.time_end.split(".")[0] for m in config.metrics.values() if m.time_end}
    totalled = at_a_time = one_moment = 0
    for user in config.policies.users:
        masks = config.policies.roles[config.policies.users[user].role].masks
        views = [v for v in _listings(project, user)
                 if v.definition["inputSchema"]["properties"].get(AGG)]
        firsts = call_tools(project, user, [(v.name, {}) for v in views])
        for v, r in zip(views, firsts, strict=True):
            assert not r.is_error, (v.name, r.content)
            data, first = r.structured_content, r.content[0].text
            product = config.products[v.plan.product]
            moments = [c for c in product.primary_key if c in product.time_columns]
            if v.plan.product in spans:
                assert "totals" not in data, (v.name, data.get("totals"))
                at_a_time += 1
                continue
            if moments:
                if len({str(x.get(moments[0])) for x in data["rows"]}) > 1:
                    assert "totals" not in data, (v.name, data.get("totals"))
                    at_a_time += 1
                day = str(data["rows"][0][moments[0]])[:10] if data["rows"] else None
                props = v.definition["inputSchema"]["properties"]
                if day is None or "period" not in props:
                    continue
                (r,) = call_tools(project, user, [(v.name, {"period": day})])
                assert not r.is_error, r.content
                data, first = r.structured_content, r.content[0].text
                one_moment += bool(data.get("totals"))
            for column, total in (data.get("totals") or {}).items():
                assert f"{v.plan.product}.{column}" not in masks, (user, v.name, column)
                assert not {"price", "rate"} & set(column.split("_")), column
                unit = data["units"][column]
                assert re.fullmatch(r"[A-Z]{3}(_cents)?|count|seconds|minutes|hours|days",
                                    unit), (column, unit)
                asked = {"period": day} if moments else {}
                (summed,) = call_tools(project, user, [(v.name, {AGG: column, **asked})])
                assert summed.structured_content["rows"][0][f"sum_{column}"] == pytest.approx(
                    total), (user, v.name, column)
                assert "; over all of them: " in first and f"total {column} " in first, first
                assert first.index("matching rows in all") < first.index(f"total {column}")
                totalled += 1
    assert totalled >= 2, f"no listing on {which} totalled a column"
    assert at_a_time >= 1, "no snapshot, per-day or span product was checked"
    assert one_moment >= 1, "no product keyed by time totalled one moment's rows"


def test_a_column_masked_for_the_caller_is_never_totalled(demo_dir: Path, tmp_path: Path) -> None:
    """The same listing with one of its totalled columns masked (null) for a role: that role's
    first page totals the others and not it (its sum would be a value it may not read), and its
    rows, null in that column, pass the official client's check against the caller's output
    schema (a masked number failed it); a role without the mask still gets the total."""
    import yaml

    d = copy_project(demo_dir, tmp_path / "masked")
    build(load_project(d))
    project = load_project(d)
    filtered, everyone = _users(project)
    views = [v for v in _listings(project, filtered)]
    found = None
    for v, r in zip(views, call_tools(project, filtered, [(v.name, {}) for v in views]),
                    strict=True):
        if len((r.structured_content or {}).get("totals") or {}) >= 2:
            found = v, sorted(r.structured_content["totals"])
            break
    assert found is not None, "no listing totals two columns"
    (v, columns), masked = found, found[1][0]
    doc = yaml.safe_load((d / "tether.yaml").read_text())
    role = doc["policies"]["users"][filtered]["role"]
    doc["policies"]["roles"][role].setdefault("masks", {})[f"{v.plan.product}.{masked}"] = "null"
    (d / "tether.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    build(load_project(d))
    project = load_project(d)
    (mine,) = call_tools(project, filtered, [(v.name, {})])
    (theirs,) = call_tools(project, everyone, [(v.name, {})])
    # read through a client that checks results against the caller's own output schema: a
    # masked number is null there, and the schema says so
    assert not mine.is_error, mine.content
    assert all(r[masked] is None for r in mine.structured_content["rows"])
    assert masked not in mine.structured_content["totals"]
    assert set(mine.structured_content["totals"]) == set(columns) - {masked}
    assert f"total {masked} " not in mine.content[0].text
    assert masked in theirs.structured_content["totals"]
