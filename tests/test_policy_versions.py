"""A policy change is reviewed like a tool change, on both warehouses and both engines.

For each edit of tether.yaml's access policy that could widen what someone reads (a row filter
widened, rewritten or removed; a role or user added; a user moved or an attribute changed; a
mask removed; a deny removed; tool globs widened; a reviewer granted): `tether check` exits 11,
an HTTP server started before the edit and a server started after it both keep enforcing the
approved policy, the author cannot approve it, and once another reviewer does, the running
server enforces it without a restart. Each edit that can only narrow (a conjunct added, a mask
or deny added, a user removed, tool globs narrowed) is published at once and reaches the
running server. A new product whose SQL reads a filtered product reads it filtered.

Everything a variant needs is found in each warehouse's own tether.yaml (a filtered role and
its users, an equality filter, a role with narrowed tools and a mask), never named here.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
import yaml
from mcp import Client
from sqlglot import exp

from conftest import copy_project, free_port, http_process, run_cli
from tether.config import load_project
from tether.drift.check import check, decide
from tether.drift.publish import build
from tether.errors import NotPermittedError, TetherError
from tether.policy import templates
from tether.policy.model import reviewers
from tether.registry import open_registry
from tether.registry.policy import enforced
from tether.serve.server import TetherServer

TETHER = str(Path(sys.executable).parent / "tether")
SECOND_REVIEWER = "second.reviewer"
NEW_USER = "new.person"


@dataclass
class Scope:
    """What the variants edit, found in the warehouse's tether.yaml."""

    reviewer: str
    role: str            # the role with row filters
    user: str            # one of its users
    other: str           # another of its users, with another attribute value
    attr: str            # the attribute the filter binds
    product: str         # a product the role filters with `column = {{ user.attr }}`
    column: str
    text_column: str     # a text column of the product, neither key nor the filter's column
    narrow_role: str     # a role with narrowed tool globs and a mask
    narrow_user: str
    masked: str          # product.column that role masks


@dataclass
class Live:
    dir: Path
    url: str
    token: str
    scope: Scope
    original: str        # tether.yaml as built


def _scope(d: Path) -> Scope:
    c = load_project(d).config
    pol = c.policies
    reviewer = next(u for u in reviewers(c) if u != SECOND_REVIEWER)
    role = max((r for r in pol.roles if pol.roles[r].row_filters),
               key=lambda r: len(pol.roles[r].row_filters))
    product, column, attr = next(
        (name, parsed.expr.this.name, parsed.attributes[0])
        for name, parsed in ((n, templates.parse(t))
                             for n, t in sorted(pol.roles[role].row_filters.items()))
        if isinstance(parsed.expr, exp.EQ) and isinstance(parsed.expr.this, exp.Column)
        and len(parsed.attributes) == 1)
    users = [u for u, cfg in pol.users.items() if cfg.role == role]
    user = users[0]
    other = next(u for u in users if pol.users[u].attributes()[attr]
                 != pol.users[user].attributes()[attr])
    p = c.products[product]
    text_column = _text_column(d, product, set(p.primary_key) | {column})
    narrow_role = next(r for r, cfg in pol.roles.items() if cfg.tools != ["*"] and cfg.masks)
    narrow_user = next(u for u, cfg in pol.users.items() if cfg.role == narrow_role)
    masked = next(t for t in pol.roles[narrow_role].masks if "." in t)
    return Scope(reviewer, role, user, other, attr, product, column, text_column, narrow_role,
                 narrow_user, masked)


def _text_column(d: Path, product: str, not_these: set[str]) -> str:
    """A text column whose values the probe shows (so a mask on it shows), neither a key nor
    the filter's column; a free-text one where there is one (masking it changes no enum)."""
    from tether.profiling import profile_project

    prof = profile_project(load_project(d), [product])[0]
    server = TetherServer(load_project(d), stdio_user=_scope_reviewer(d))

    async def go() -> Any:
        async with Client(server.server) as c:
            return _explain(await c.call_tool("explain_data_product", {"product": product}))

    try:
        shown = anyio.run(go)["values"]
    finally:
        server.close()
    text = [x for x in prof.columns if x.column.type.upper() in ("VARCHAR", "TEXT",
            "CHARACTER VARYING") and x.column.name not in not_these and shown.get(x.column.name)]
    return sorted(text, key=lambda x: x.enum is not None)[0].column.name


def _scope_reviewer(d: Path) -> str:
    return next(u for u in reviewers(load_project(d).config) if u != SECOND_REVIEWER)


WAREHOUSES = ["demo-duckdb", "second-duckdb", "demo-postgres", "second-postgres"]
FIXTURES = {"demo-duckdb": "demo_dir", "second-duckdb": "second_dir",
            "demo-postgres": "pg_demo_dir", "second-postgres": "pg_second_dir"}


@pytest.fixture(scope="module", params=WAREHOUSES)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[Live]:
    """A built copy of the warehouse with a second reviewer, and an HTTP server started
    before any edit, which every variant's running-server half talks to (a runner token
    acting as each user)."""
    src: Path = request.getfixturevalue(FIXTURES[request.param])
    d = copy_project(src, tmp_path_factory.mktemp(request.param))
    config = yaml.safe_load((d / "tether.yaml").read_text())
    pol = config["policies"]
    first = next(u for u, cfg in pol["users"].items() if pol["roles"][cfg["role"]].get("reviewer"))
    pol["users"][SECOND_REVIEWER] = {"role": pol["users"][first]["role"]}
    (d / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert build(load_project(d)).exit_code == 0
    scope = _scope(d)
    token = run_cli("token", "add", scope.reviewer, "--runner", "--project", str(d))
    assert token.returncode == 0, token.stderr
    port = free_port()
    with http_process([TETHER, "serve", "--project", str(d), "--transport", "http", "--port",
                       str(port)], port, timeout=60):
        yield Live(d, f"http://127.0.0.1:{port}/mcp", token.stdout.strip(), scope,
                   (d / "tether.yaml").read_text())


# --- what a user reads -----------------------------------------------------------------------


def _explain(result: Any) -> Any:
    if result.is_error:
        print("refused:", result.content[0].text[:300])
        return {"refused": True}
    sc = result.structured_content
    return {"rows": sc.get("row_count"),
            "values": {c["name"]: sorted(map(str, c.get("values") or [])) for c in sc["columns"]}}


def over_http(live: Live, user: str, product: str | None) -> Any:
    """What ``user`` reads of ``product`` (the probe's row count and values) from the server
    that was running before the edit; with no product, the tools they see."""
    async def go() -> Any:
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {live.token}", "X-Tether-As-User": user}
        async with httpx.AsyncClient(headers=headers) as http, Client(
                streamable_http_client(live.url, http_client=http)) as c:  # type: ignore[arg-type]
            if product is None:
                return sorted(t.name for t in (await c.list_tools(cache_mode="refresh")).tools)
            return _explain(await c.call_tool("explain_data_product", {"product": product}))

    return anyio.run(go)


def in_new_server(live: Live, user: str, product: str | None) -> Any:
    """The same, from a server started now (an unknown user cannot start one)."""
    try:
        server = TetherServer(load_project(live.dir), stdio_user=user)
    except TetherError:
        return {"refused": True} if product else []

    async def go() -> Any:
        async with Client(server.server) as c:
            if product is None:
                return sorted(t.name for t in (await c.list_tools()).tools)
            return _explain(await c.call_tool("explain_data_product", {"product": product}))

    try:
        return anyio.run(go)
    finally:
        server.close()


def enforced_reviewers(live: Live) -> list[str]:
    project = load_project(live.dir)
    registry = open_registry(project)
    try:
        return reviewers(enforced(project, registry)[0].config)
    finally:
        registry.close()


# --- the protocol every variant follows ------------------------------------------------------


def _edit(live: Live, change: Callable[[dict[str, Any], Scope], None]) -> None:
    config = yaml.safe_load(live.original)
    change(config, live.scope)
    (live.dir / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _pending_review(live: Live) -> dict[str, Any]:
    registry = open_registry(load_project(live.dir))
    try:
        return next(r for r in registry.reviews() if r["status"] == "pending")
    finally:
        registry.close()


def _until(observe: Callable[[], Any], want: Any, seconds: float = 15.0) -> Any:
    """Observe until the answer is ``want`` (the running server polls its registry)."""
    deadline = time.monotonic() + seconds
    seen = observe()
    while seen != want and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = observe()
    return seen


def _approve(live: Live) -> None:
    """The pending policy review approved by the second reviewer (never by its author)."""
    review = _pending_review(live)
    assert any(t["name"] == "policy" for t in review["body"]["tools"])
    with pytest.raises(NotPermittedError, match="approve"):
        decide(load_project(live.dir), review["id"], True, live.scope.reviewer)
    decide(load_project(live.dir), review["id"], True, SECOND_REVIEWER)


def _restore(live: Live, before: Callable[[], Any], want: Any) -> None:
    (live.dir / "tether.yaml").write_text(live.original)
    result = check(load_project(live.dir), author=live.scope.reviewer)
    if result.exit_code == 11:
        _approve(live)
    assert result.exit_code in (0, 10, 11), result.to_json()
    assert _until(before, want) == want


def widening(live: Live, change: Callable[[dict[str, Any], Scope], None],
             observe: Callable[[Live, str, str | None], Any], user: str,
             product: str | None) -> tuple[Any, Any]:
    """Edit, check (11), the running and a new server unchanged, the author refused, approved
    by another reviewer, the running server moved without a restart, then restored."""
    before = observe(live, user, product)
    _edit(live, change)
    result = check(load_project(live.dir), author=live.scope.reviewer)
    assert result.exit_code == 11, result.to_json()
    policy = next(o for o in result.outcomes if o.tool == "policy")
    assert policy.outcome == "pending" and policy.change_level == "major", policy
    time.sleep(0.7)  # longer than the running server's poll (0.5 s)
    assert observe(live, user, product) == before
    if observe is over_http:
        assert in_new_server(live, user, product) == before
    _approve(live)
    after = _until_changed(lambda: observe(live, user, product), before)
    assert after != before, "the approved change did not reach the running server"
    if observe is over_http:
        assert in_new_server(live, user, product) == after
    _restore(live, lambda: observe(live, user, product), before)
    return before, after


def narrowing(live: Live, change: Callable[[dict[str, Any], Scope], None],
              observe: Callable[[Live, str, str | None], Any], user: str,
              product: str | None) -> tuple[Any, Any]:
    """Edit, check publishes the policy at once (no review), the running server moves."""
    before = observe(live, user, product)
    _edit(live, change)
    result = check(load_project(live.dir), author=live.scope.reviewer)
    policy = next(o for o in result.outcomes if o.tool == "policy")
    assert policy.outcome == "published", result.to_json()
    assert policy.change_level == "minor"
    assert result.exit_code in (0, 10), result.to_json()
    after = _until_changed(lambda: observe(live, user, product), before)
    assert after != before, "the narrowing did not reach the running server"
    assert in_new_server(live, user, product) == after
    _restore(live, lambda: observe(live, user, product), before)
    return before, after


def _until_changed(observe: Callable[[], Any], before: Any, seconds: float = 15.0) -> Any:
    deadline = time.monotonic() + seconds
    seen = observe()
    while seen == before and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = observe()
    return seen


# --- the widening variants -------------------------------------------------------------------


def _filter(config: dict[str, Any], s: Scope) -> str:
    return str(config["policies"]["roles"][s.role]["row_filters"][s.product])


def _set_filter(config: dict[str, Any], s: Scope, text: str | None) -> None:
    filters = config["policies"]["roles"][s.role]["row_filters"]
    if text is None:
        del filters[s.product]
    else:
        filters[s.product] = text


def _value(config: dict[str, Any], user: str, attr: str) -> str:
    return str(config["policies"]["users"][user][attr])


def or_other_value(config: dict[str, Any], s: Scope) -> None:
    f = _filter(config, s)
    _set_filter(config, s, f"{f} OR {s.column} = '{_value(config, s.other, s.attr)}'")


def or_true(config: dict[str, Any], s: Scope) -> None:
    _set_filter(config, s, f"{_filter(config, s)} OR 1 = 1")


def inverted(config: dict[str, Any], s: Scope) -> None:
    _set_filter(config, s, _filter(config, s).replace(" = ", " <> ", 1))


def filter_removed(config: dict[str, Any], s: Scope) -> None:
    _set_filter(config, s, None)


def user_moved(config: dict[str, Any], s: Scope) -> None:
    config["policies"]["users"][s.user] = {
        "role": config["policies"]["users"][s.reviewer]["role"]}


def attribute_changed(config: dict[str, Any], s: Scope) -> None:
    config["policies"]["users"][s.user][s.attr] = _value(config, s.other, s.attr)


def role_and_user_added(config: dict[str, Any], s: Scope) -> None:
    config["policies"]["roles"]["newcomer"] = {"tools": ["*"]}
    config["policies"]["users"][NEW_USER] = {"role": "newcomer"}


def mask_removed(config: dict[str, Any], s: Scope) -> None:
    del config["policies"]["roles"][s.narrow_role]["masks"][s.masked]


def tools_widened(config: dict[str, Any], s: Scope) -> None:
    config["policies"]["roles"][s.narrow_role]["tools"] = ["*"]


def reviewer_granted(config: dict[str, Any], s: Scope) -> None:
    config["policies"]["roles"][s.role]["reviewer"] = True


WIDENING = {
    "filter-or-another-value": (or_other_value, "user"),
    "filter-or-true": (or_true, "user"),
    "filter-inverted": (inverted, "user"),
    "filter-removed": (filter_removed, "user"),
    "user-moved-to-another-role": (user_moved, "user"),
    "user-attribute-changed": (attribute_changed, "user"),
    "role-and-user-added": (role_and_user_added, "new"),
    "mask-removed": (mask_removed, "masked"),
    "tools-widened": (tools_widened, "tools"),
}


@pytest.mark.parametrize("variant", list(WIDENING))
def test_a_widening_waits_for_another_reviewer_and_then_reaches_running_servers(
        live: Live, variant: str) -> None:
    change, who = WIDENING[variant]
    s = live.scope
    user, product = {"user": (s.user, s.product), "new": (NEW_USER, s.product),
                     "masked": (s.narrow_user, s.masked.split(".")[0]),
                     "tools": (s.narrow_user, None)}[who]
    before, after = widening(live, change, over_http, user, product)
    if who == "new":
        assert before == {"refused": True} and after["rows"] > 0
    elif who == "masked":
        column = s.masked.split(".", 1)[1]
        assert set(before["values"][column]) <= {"[redacted]", "None"} or all(
            len(v) == 64 for v in before["values"][column])
        assert before["values"][column] != after["values"][column]
    elif who == "tools":
        assert set(before) < set(after)
    elif variant == "user-attribute-changed":
        assert before["values"][s.column] != after["values"][s.column]
    else:
        assert after["rows"] > before["rows"]


def test_a_reviewer_granted_in_tether_yaml_decides_nothing_until_approved(live: Live) -> None:
    """The role of whoever would approve it must not become a reviewer by its own edit."""
    s = live.scope
    _edit(live, reviewer_granted)
    result = check(load_project(live.dir), author=s.reviewer)
    assert result.exit_code == 11
    assert s.user not in enforced_reviewers(live)
    review = _pending_review(live)
    with pytest.raises(NotPermittedError, match="not a reviewer"):
        decide(load_project(live.dir), review["id"], True, s.user)
    _approve(live)
    assert s.user in enforced_reviewers(live)
    (live.dir / "tether.yaml").write_text(live.original)
    result = check(load_project(live.dir), author=s.reviewer)
    assert result.exit_code in (0, 10)  # withdrawing a reviewer flag only narrows
    assert s.user not in enforced_reviewers(live)


# --- the narrowing variants ------------------------------------------------------------------


def conjunct_added(config: dict[str, Any], s: Scope) -> None:
    _set_filter(config, s, f"{_filter(config, s)} AND 1 = 0")


def mask_added(config: dict[str, Any], s: Scope) -> None:
    config["policies"]["roles"][s.role].setdefault("masks", {})[
        f"{s.product}.{s.text_column}"] = "redact"


def deny_added(config: dict[str, Any], s: Scope) -> None:
    config["policies"]["roles"][s.role].setdefault("tables", {})["deny"] = [s.product]


def user_removed(config: dict[str, Any], s: Scope) -> None:
    del config["policies"]["users"][s.other]


def tools_narrowed(config: dict[str, Any], s: Scope) -> None:
    config["policies"]["roles"][s.narrow_role]["tools"] = ["explain_data_product"]


NARROWING = {
    "conjunct-added": (conjunct_added, "user"),
    "mask-added": (mask_added, "user"),
    "deny-added": (deny_added, "user"),
    "user-removed": (user_removed, "other"),
    "tools-narrowed": (tools_narrowed, "tools"),
}


@pytest.mark.parametrize("variant", list(NARROWING))
def test_a_narrowing_applies_at_once(live: Live, variant: str) -> None:
    """Published with no review and enforced by the running server; undoing it (a widening)
    goes through a reviewer again."""
    change, who = NARROWING[variant]
    s = live.scope
    user, product = {"user": (s.user, s.product), "other": (s.other, s.product),
                     "tools": (s.narrow_user, None)}[who]
    before, after = narrowing(live, change, over_http, user, product)
    if variant == "conjunct-added":
        assert before["rows"] > 0 and after["rows"] == 0
    elif variant == "mask-added":
        # the probe shows no value of a redacted column (or only the mask itself)
        assert before["values"][s.text_column] and "[redacted]" not in before["values"][
            s.text_column]
        assert set(after["values"][s.text_column]) <= {"[redacted]"}
    elif variant in ("deny-added", "user-removed"):
        assert after == {"refused": True}
    else:
        assert set(after) < set(before)


def test_a_new_sql_product_over_a_filtered_product_reads_it_filtered(live: Live) -> None:
    """A product defined by SQL over a filtered product's table, with no row filter of its
    own: the filtered role reads exactly its entitlement of the rows, never every row."""
    s = live.scope
    table = load_project(live.dir).config.products[s.product].table
    config = yaml.safe_load(live.original)
    config["products"]["every_row_copy"] = {"sql": f"SELECT * FROM {table}",
                                            "description": "Every row, copied."}
    (live.dir / "tether.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    try:
        result = check(load_project(live.dir), author=s.reviewer)
        assert result.exit_code in (0, 10), result.to_json()  # nothing widens: it inherits
        own = over_http(live, s.user, s.product)["rows"]

        def rows(user: str) -> Any:
            return over_http(live, user, "every_row_copy").get("rows")

        assert _until(lambda: rows(s.user), own) == own  # the running server, and a new one
        assert in_new_server(live, s.user, "every_row_copy")["rows"] == own
        assert rows(s.reviewer) > own
        # generic mode lists the SQL product by its name, and run_sql reads it as the caller
        # may: the rows of their entitlement
        generic = TetherServer(load_project(live.dir), mode="generic", stdio_user=s.user)

        async def go() -> tuple[Any, Any]:
            async with Client(generic.server) as c:
                return (await c.call_tool("list_tables", {}), await c.call_tool(
                    "run_sql", {"sql": "SELECT count(*) AS n FROM every_row_copy"}))

        try:
            listed, ran = anyio.run(go)
        finally:
            generic.close()
        assert {"table": "every_row_copy"} in listed.structured_content["rows"]
        assert not ran.is_error, ran.content[0].text
        assert ran.structured_content["rows"][0]["n"] == own
        ci = run_cli("ci", "--project", str(live.dir), "--json")
        assert json.loads(ci.stdout)[12]["status"] == "holds", ci.stdout
    finally:  # removing the product retires its tool: a person approves that
        (live.dir / "tether.yaml").write_text(live.original)
        if check(load_project(live.dir), author=s.reviewer).exit_code == 11:
            decide(load_project(live.dir), _pending_review(live)["id"], True, SECOND_REVIEWER)


def _restricted_column(live: Live) -> tuple[str, str]:
    """A restricted product.column of the warehouse's own tether.yaml."""
    config = load_project(live.dir).config
    for p, prod in sorted(config.products.items()):
        for c, f in sorted(prod.columns.items()):
            if f.classification == "restricted":
                return p, c
    entry = next(e for e in config.policies.restricted if "*" not in e)
    product, column = entry.split(".", 1)
    return product, column


def _assert_blocked(live: Live, metric: str) -> None:
    result = check(load_project(live.dir), author=live.scope.reviewer)
    leaky = next(o for o in result.outcomes if o.tool == metric)
    assert leaky.outcome == "blocked" and result.exit_code == 12, result.to_json()


def _never_published(live: Live, metric: str) -> None:
    registry = open_registry(load_project(live.dir))
    try:
        assert metric not in registry.current()
    finally:
        registry.close()


def test_a_metric_over_a_restricted_column_is_blocked(live: Live) -> None:
    """A governed metric whose measure reads a restricted column is never published: declared
    in tether.yaml, or imported from a dbt project's semantic layer (the import layer merges
    into the same place)."""
    product, column = _restricted_column(live)
    edited = yaml.safe_load(live.original)
    for measure in (f"max({product}.{column})", f"count(distinct {product}.{column})"):
        edited.setdefault("metrics", {})["leaky"] = {
            "measure": measure, "window": "current", "unit": "none",
            "description": "Reads a restricted column."}
        (live.dir / "tether.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
        try:
            _assert_blocked(live, "leaky")
        finally:
            (live.dir / "tether.yaml").write_text(live.original)
            _never_published(live, "leaky")


DBT_PROJECT = 'name: site\nversion: "1.0"\nprofile: site\nmodel-paths: ["models"]\n'


@pytest.mark.parametrize("agg", ["max", "count_distinct"])
def test_an_imported_dbt_metric_over_a_restricted_column_is_blocked(live: Live, agg: str
                                                                   ) -> None:
    """A dbt semantic model over the product's relation with a measure on the restricted
    column (schema.yml, no dbt run needed): `tether import dbt` then `tether check` never
    publishes the metric, on both warehouses and both engines."""
    from tether.layers.model import layer_path

    product, column = _restricted_column(live)
    p = load_project(live.dir).config.products[product]
    relation = str(p.table).replace('"', "").split(".")[-1]
    key = p.primary_key[0]
    d = live.dir / "dbt-site"
    (d / "models").mkdir(parents=True, exist_ok=True)
    (d / "dbt_project.yml").write_text(DBT_PROJECT)
    (d / "models" / f"{relation}.sql").write_text("select 1\n")
    (d / "models" / "schema.yml").write_text(yaml.safe_dump({
        "version": 2,
        "models": [{"name": relation, "columns": [{"name": key}, {"name": column}]}],
        "semantic_models": [{
            "name": f"{relation}_sm", "model": f"ref('{relation}')",
            "entities": [{"name": "thing", "type": "primary", "expr": key}],
            "measures": [{"name": "peek", "agg": agg, "expr": column}]}],
        "metrics": [{"name": "leaky_import", "label": "leaky import", "type": "simple",
                     "description": "Reads a restricted column.",
                     "type_params": {"measure": "peek"}}]}, sort_keys=False))
    try:
        res = run_cli("import", "dbt", str(d), "--project", str(live.dir), "--json")
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        report = json.loads(res.stdout)
        assert report["products"] == [product], report
        assert report["metrics"] == ["leaky_import"], report  # imported: the gate stops it
        _assert_blocked(live, "leaky_import")
    finally:
        layer_path(live.dir, "dbt").unlink(missing_ok=True)
        _never_published(live, "leaky_import")


def test_the_author_cannot_approve_from_the_command_line_either(live: Live) -> None:
    """`tether check` without --as records the login; approving under the same login is
    refused, whoever it names; the exit code of the check is 11."""
    s = live.scope
    _edit(live, or_true)
    try:
        r = run_cli("check", "--project", str(live.dir), "--json")
        assert r.returncode == 11, r.stdout[-1500:] + r.stderr
        data = json.loads(r.stdout)
        policy = next(t for t in data["tools"] if t["tool"] == "policy")
        assert policy["outcome"] == "pending"
        assert "OR 1 = 1" in policy["change_note"] and s.role in policy["change_note"]
        rid = str(policy["review"])
        refused = run_cli("review", "approve", rid, "--as", SECOND_REVIEWER, "--project",
                          str(live.dir))
        assert refused.returncode != 0 and "same login" in refused.stderr, refused.stderr
        assert run_cli("review", "reject", rid, "--as", SECOND_REVIEWER, "--project",
                       str(live.dir)).returncode == 0  # the author may withdraw it
    finally:
        (live.dir / "tether.yaml").write_text(live.original)
        assert check(load_project(live.dir), author=s.reviewer).exit_code in (0, 10)


def test_policy_versions_are_listed_with_their_diff_in_words(live: Live) -> None:
    r = run_cli("versions", "policy", "--project", str(live.dir), "--json")
    assert r.returncode == 0, r.stderr
    versions = json.loads(r.stdout)
    assert versions and versions[0]["version"] == "1.0.0"
    registry = open_registry(load_project(live.dir))
    try:
        latest = registry.current_policy()
        assert latest is not None
        assert copy.deepcopy(latest.definition["policy"]["roles"]).keys() >= {live.scope.role}
        assert all(c["words"] for c in latest.definition["changes"])
    finally:
        registry.close()
